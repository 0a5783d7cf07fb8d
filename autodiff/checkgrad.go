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
	// Eps is the largest finite-difference step (default 1e-3). f is
	// evaluated at x±Eps and x±Eps/2 for every element x, so f must be
	// smooth on [x-Eps, x+Eps] (choose test inputs at least Eps away from
	// kinks such as 0 for Relu).
	Eps float64
	// Atol and Rtol bound |analytic - numeric| <= Atol + Rtol*|numeric| + Err
	// (defaults 1e-3 and 1e-2, suited to float32), where Err is the error
	// CheckGrad estimates for the finite difference itself (see CheckGrad).
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
// cotangent c, F(x) = Σ c·f(x) (accumulated in float64), so CheckGrad
// checks the whole vector-Jacobian product x ↦ cᵀ·∂f/∂x. Only float32
// inputs are perturbed; others are passed through unchanged.
//
// # Method
//
// f computes in float32, so F carries rounding noise of about float32
// epsilon times the magnitude of the numbers f sums, and that noise
// depends on the order in which the kernels sum (it differs between the
// AVX-512, AVX2 and pure-Go kernels, see tensor.Kernels). A fixed
// tolerance on a finite difference is therefore either too loose for a
// well-conditioned f or fails on some machines for an ill-conditioned one.
// CheckGrad instead estimates, per element, how wrong its own finite
// difference can be, and accepts the analytic derivative a if
//
//	|a - D(h)| <= Atol + Rtol·|D(h)| + 2·Err
//
// where, with h = Eps and F evaluated at x + k·h/2 for k = -2..2 (steps
// rounded to what float32 represents; Δ⁴F is then computed as a divided
// difference over the points actually used),
//
//	D(h)  = (F(x+h) - F(x-h)) / 2h                 the estimate
//	Err   = max(|D(h) - D(h/2)|, |Δ⁴F| / h)
//	Δ⁴F   = F(x-h) - 4F(x-h/2) + 6F(x) - 4F(x+h/2) + F(x+h)
//
// |D(h) - D(h/2)| is three quarters of D(h)'s truncation error (the h²
// term) for a smooth F. The fourth difference Δ⁴F vanishes to O(h⁴) for a
// smooth F and is otherwise the evaluation noise: its noise is √70 ≈ 8.4
// times that of F, where D(h)'s is 0.71/h times, so |Δ⁴F|/h bounds D(h)'s
// noise by a factor of about 12 (the Moré–Wild noise estimate). The error
// of a derivative is thus judged against the conditioning of f at that
// element, not against the summation order of one machine: a gradient that
// is wrong by more than f's float32 evaluation can resolve is reported, on
// every kernel set.
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
	f0 := project(f(xs))
	var errs []error
	for k, x := range xs {
		if !x.DType().IsFloat() {
			continue
		}
		base := x.Float32s()
		analytic := grads[k].Float32s()
		shape := x.Shape()
		for i := range base {
			xi := float64(base[i])
			// F at the float32 value nearest xi+d, and the step taken.
			eval := func(d float64) (fv, step float64) {
				p := append([]float32(nil), base...)
				p[i] = float32(xi + d)
				in := append([]*tensor.Tensor(nil), xs...)
				in[k] = tensor.Reshape(tensor.FromFloat32(p), shape...)
				return project(f(in)), float64(p[i]) - xi
			}
			fp1, hp1 := eval(o.Eps)
			fm1, hm1 := eval(-o.Eps)
			fp2, hp2 := eval(o.Eps / 2)
			fm2, hm2 := eval(-o.Eps / 2)
			num := (fp1 - fm1) / (hp1 - hm1)
			half := (fp2 - fm2) / (hp2 - hm2)
			h := (hp1 - hm1) / 2
			d4 := fourthDifference([5]float64{hm1, hm2, 0, hp2, hp1}, [5]float64{fm1, fm2, f0, fp2, fp1}, h/2)
			est := math.Max(math.Abs(num-half), math.Abs(d4)/h)
			an := float64(analytic[i])
			if math.IsNaN(an) || math.IsNaN(num) || math.Abs(an-num) > o.Atol+o.Rtol*math.Abs(num)+2*est {
				errs = append(errs, fmt.Errorf("input %d (%v) element %d: analytic %.6g, numeric %.6g (estimated error of the numeric value %.2g)", k, x, i, an, num, est))
				if len(errs) >= 10 {
					errs = append(errs, errors.New("(more mismatches omitted)"))
					return errors.Join(errs...)
				}
			}
		}
	}
	return errors.Join(errs...)
}

// fourthDifference returns Δ⁴F for equispaced points of spacing s, computed
// from F at the points t (which rounding to float32 may have moved off the
// grid) as 24·s⁴ times the fourth divided difference F[t0,...,t4]. It is
// exactly zero for a polynomial of degree 3 wherever the points are, so
// the rounding of the steps (large when |x| is large) is not taken for
// noise.
func fourthDifference(t, f [5]float64, s float64) float64 {
	d := 0.0
	for i := range t {
		p := 1.0
		for j := range t {
			if j != i {
				p *= (t[i] - t[j]) / s
			}
		}
		d += f[i] / p
	}
	return 24 * d
}
