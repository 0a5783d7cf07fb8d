// Package autodiff differentiates functions of tensors and of whole models.
//
// It builds on the traces of package tensor: define-by-run reverse mode
// with no global tape, deterministic backward order, and nested traces so
// that gradients of gradients work.
//
// CheckGrad compares reverse-mode derivatives with finite differences; the
// tests of every op use it.
package autodiff
