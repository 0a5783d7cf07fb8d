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
	// Eps is the largest finite-difference step (default 1e-3, 1e-4 when f
	// returns float64). f is
	// evaluated at x±Eps and x±Eps/2 for every element x, so f must be
	// smooth on [x-Eps, x+Eps] (choose test inputs at least Eps away from
	// kinks such as 0 for Relu).
	Eps float64
	// Atol and Rtol bound |analytic - numeric| <= Atol + Rtol*|numeric| + Err
	// (defaults 1e-3 and 1e-2, suited to float32; 1e-9 and 1e-7 when f
	// returns float64), where Err is the error
	// CheckGrad estimates for the finite difference itself (see CheckGrad).
	Atol, Rtol float64
	// Seed picks the random cotangent that projects a non-scalar output.
	Seed uint64
}

func (o CheckOptions) withDefaults(dt tensor.DType) CheckOptions {
	eps, atol, rtol := 1e-3, 1e-3, 1e-2
	if dt == tensor.Float64 {
		eps, atol, rtol = 1e-4, 1e-9, 1e-7
	}
	if o.Eps == 0 {
		o.Eps = eps
	}
	if o.Atol == 0 {
		o.Atol = atol
	}
	if o.Rtol == 0 {
		o.Rtol = rtol
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
// and float64 inputs are perturbed; others are passed through unchanged.
//
// f returns float32 or float64. In float64 (tensor.Float64 inputs, as JAX
// users check gradients with jax_enable_x64) the default tolerances are
// tight, 1e-9 + 1e-7·|numeric|: the evaluation noise is 10⁹ times smaller
// and Err below shrinks with it.
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
	if y.DType() != tensor.Float32 && y.DType() != tensor.Float64 {
		return fmt.Errorf("autodiff.CheckGrad: f returned %v, want float32 or float64", y)
	}
	o := opts.withDefaults(y.DType())
	rng := rand.New(rand.NewPCG(o.Seed, 0x9e3779b97f4a7c15))
	cd := make([]float64, y.Size())
	for i := range cd {
		cd[i] = rng.NormFloat64()
		if y.DType() == tensor.Float32 {
			cd[i] = float64(float32(cd[i]))
		}
	}
	if y.Size() == 1 {
		cd[0] = 1
	}
	c := tensor.FromFloat64s(cd, y.Shape()...)
	if y.DType() == tensor.Float32 {
		c = tensor.Convert(c, tensor.Float32)
	}
	grads := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{c}, traced, false)

	project := func(v *tensor.Tensor) float64 {
		s := 0.0
		for i, e := range v.Float64s() {
			s += e * cd[i]
		}
		return s
	}
	f0 := project(f(xs))
	var errs []error
	for k, x := range xs {
		dt := x.DType()
		if dt != tensor.Float32 && dt != tensor.Float64 {
			continue
		}
		base := x.Float64s()
		analytic := grads[k].Float64s()
		shape := x.Shape()
		for i := range base {
			xi := base[i]
			// F at the value of x's dtype nearest xi+d, and the step taken.
			eval := func(d float64) (fv, step float64) {
				p := append([]float64(nil), base...)
				p[i] = xi + d
				if dt == tensor.Float32 {
					p[i] = float64(float32(p[i]))
				}
				in := append([]*tensor.Tensor(nil), xs...)
				in[k] = tensor.FromFloat64s(p, shape...)
				if dt == tensor.Float32 {
					in[k] = tensor.Convert(in[k], tensor.Float32)
				}
				return project(f(in)), p[i] - xi
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
			an := analytic[i]
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
