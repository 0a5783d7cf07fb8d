// Package doccheck holds only tests: they keep the documentation honest.
// Every exported name of the public packages has a doc comment, and every
// pkg.Name that README.md, CONTRIBUTING.md, the guides in docs/ and the
// packages' doc.go files mention exists (a renamed or removed function
// otherwise lives on in the prose). docs/performance.md is a dated log whose
// sections name the code of their day, so it is left out.
package doccheck
