package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// leafStep is the loop every per-leaf optimizer runs: it maps f over the
// leaves of grads, of the state trees and of the extra trees (all of grads'
// structure; extras are read-only, the selected params say), and returns
// the tree of updates and one new tree per state tree.
//
// f gets a gradient that is not nil, the leaf's state tensors (checked to be
// there: a gradient without state means Init saw other params) and the
// extra tensors (which may be nil), and returns the update and the leaf's
// new state tensors. A nil gradient gives a nil update and keeps the state.
// New state tensors get the logical axes of the ones they replace.
func leafStep(op string, grads any, states, extras []any,
	f func(g *tensor.Tensor, s, x []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor)) (any, []any) {
	ns, nx := len(states), len(extras)
	trees := append(append([]any{grads}, states...), extras...)
	defer func() {
		if r := recover(); r != nil {
			sameStructure(op, r, func(i int) string {
				switch {
				case i == 0:
					return "gradients"
				case i <= ns:
					return "optimizer state"
				}
				return "parameters"
			})
		}
	}()
	r := mapMulti(1+ns, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, s, x := xs[0], xs[1:1+ns], xs[1+ns:1+ns+nx]
		out := make([]*tensor.Tensor, 1+ns)
		if g == nil {
			copy(out[1:], s)
			return out
		}
		noState(op, g, s...)
		if ns > 0 {
			gradFits(op, g, s[0], states[0])
		}
		u, s2 := f(g, s, x)
		if len(s2) != ns {
			panic(fmt.Sprintf("%s: internal error: %d new state tensors, want %d", op, len(s2), ns))
		}
		out[0] = u
		for i := range s2 {
			out[1+i] = withAxesOf(s2[i], s[i])
		}
		return out
	}, trees...)
	return r[0], r[1:]
}

// scalarLike returns a float32 scalar v marked as the same shard.Map block
// as ref (when ref is one), for scalar state such as a step size or a loss.
func scalarLike(v float64, ref *tensor.Tensor) *tensor.Tensor {
	r := tensor.Scalar(float32(v))
	if ref != nil {
		if l := ref.Local(); l != nil {
			r = tensor.WithLocal(r, l)
		}
	}
	return r
}

// biasCorrection returns 1 - b^t, the factor Adam-style moments are divided
// by at update t (1, 2, ...).
func biasCorrection(b float64, t int) float64 { return 1 - math.Pow(b, float64(t)) }

// nesterovMoment returns optax's Nesterov estimate of the first moment at
// update t (1, 2, ...), from the new moment m and the gradient g:
//
//	b1·m/(1-b1^(t+1)) + (1-b1)·g/(1-b1^t)
func nesterovMoment(m, g *tensor.Tensor, b1 float64, t int) *tensor.Tensor {
	return tensor.Add(scale(m, b1/biasCorrection(b1, t+1)), scale(g, (1-b1)/biasCorrection(b1, t)))
}

// firstMoment returns the bias-corrected first moment m/(1-b1^t), or its
// Nesterov form.
func firstMoment(m, g *tensor.Tensor, b1 float64, t int, nesterov bool) *tensor.Tensor {
	if nesterov {
		return nesterovMoment(m, g, b1, t)
	}
	return scale(m, 1/biasCorrection(b1, t))
}

// adamDenominator returns sqrt(v + epsRoot) + eps.
func adamDenominator(v *tensor.Tensor, eps, epsRoot float64) *tensor.Tensor {
	if epsRoot != 0 {
		v = tensor.AddScalar(v, float32(epsRoot))
	}
	return tensor.AddScalar(tensor.Sqrt(v), float32(eps))
}

// learningRate returns the factor a transform's output is multiplied by at
// step n: -lr(n), or 1 for the bare scaling (nil lr).
func learningRate(op string, lr Schedule, n int) float64 {
	if lr == nil {
		return 1
	}
	return -rateAt(op, lr, n)
}

// withDecay returns u + wd·p when wd is set and p (the selected parameter)
// is present, u otherwise.
func withDecay(u, p *tensor.Tensor, wd float64) *tensor.Tensor {
	if wd == 0 || p == nil {
		return u
	}
	return tensor.Add(u, tensor.MulScalar(p, float32(wd)))
}
