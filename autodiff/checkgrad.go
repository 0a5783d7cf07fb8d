package autodiff

import (
	"errors"
	"fmt"
	"math"
	"math/rand/v2"

	"github.com/gonox/gonox/tensor"
)

// CheckOptions tunes CheckGrad. The zero value is ready to use.
type CheckOptions struct {
	// Eps is the finite-difference step (default 1e-3).
	Eps float64
	// Atol and Rtol bound |analytic - numeric| <= Atol + Rtol*|numeric|
	// (defaults 1e-3 and 1e-2, suited to float32).
	Atol, Rtol float64
	// Seed picks the random cotangent that projects a non-scalar output.
	Seed uint64
}

func (o CheckOptions) withDefaults() CheckOptions {
	if o.Eps == 0 {
		o.Eps = 1e-3
	}
	if o.Atol == 0 {
		o.Atol = 1e-3
	}
	if o.Rtol == 0 {
		o.Rtol = 1e-2
	}
	return o
}

// CheckGrad compares the reverse-mode derivative of f at xs with central
// finite differences and returns an error describing every input element
// where they disagree (nil if all agree). It is a helper for tests.
//
// f may return a tensor of any shape: it is projected onto a fixed random
// cotangent c, so CheckGrad checks the whole vector-Jacobian product
// x ↦ cᵀ·∂f/∂x. Only float32 inputs are perturbed; others are passed
// through unchanged.
func CheckGrad(f func(xs []*tensor.Tensor) *tensor.Tensor, xs []*tensor.Tensor, opts CheckOptions) error {
	o := opts.withDefaults()
	// Analytic VJP.
	tr := tensor.NewTrace()
	traced := make([]*tensor.Tensor, len(xs))
	for i, x := range xs {
		if x.DType().IsFloat() {
			traced[i] = tr.Leaf(x)
		} else {
			traced[i] = x
		}
	}
	y := f(traced)
	if y.DType() != tensor.Float32 {
		return fmt.Errorf("autodiff.CheckGrad: f returned %v, want float32", y)
	}
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	cd := make([]float32, y.Size())
	for i := range cd {
		cd[i] = float32(rng.NormFloat64())
	}
	if y.Size() == 1 {
		cd[0] = 1
	}
	c := tensor.Reshape(tensor.FromFloat32(cd), y.Shape()...)
	grads := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{c}, traced, false)

	project := func(v *tensor.Tensor) float64 {
		s := 0.0
		for i, e := range v.Float32s() {
			s += float64(e) * float64(cd[i])
		}
		return s
	}
	var errs []error
	for k, x := range xs {
		if !x.DType().IsFloat() {
			continue
		}
		base := x.Float32s()
		analytic := grads[k].Float32s()
		shape := x.Shape()
		for i := range base {
			eval := func(d float64) float64 {
				p := append([]float32(nil), base...)
				p[i] = float32(float64(base[i]) + d)
				in := append([]*tensor.Tensor(nil), xs...)
				in[k] = tensor.Reshape(tensor.FromFloat32(p), shape...)
				return project(f(in))
			}
			// Use the step actually representable in float32.
			hi := float64(float32(float64(base[i]) + o.Eps))
			lo := float64(float32(float64(base[i]) - o.Eps))
			num := (eval(hi-float64(base[i])) - eval(lo-float64(base[i]))) / (hi - lo)
			an := float64(analytic[i])
			if math.IsNaN(an) || math.Abs(an-num) > o.Atol+o.Rtol*math.Abs(num) {
				errs = append(errs, fmt.Errorf("input %d (%v) element %d: analytic %.6g, numeric %.6g", k, x, i, an, num))
				if len(errs) >= 10 {
					errs = append(errs, errors.New("(more mismatches omitted)"))
					return errors.Join(errs...)
				}
			}
		}
	}
	return errors.Join(errs...)
}
