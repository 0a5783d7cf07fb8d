package optim

import (
	"github.com/gonox/gonox/tensor"
)

// AdagradOptions are the optional hyperparameters of Adagrad and
// ScaleByRSS. Zero fields take optax's defaults; use Zero for a literal 0.
type AdagradOptions struct {
	// InitialAccumulatorValue is the starting value of the sum of squared
	// gradients (default 0.1).
	InitialAccumulatorValue float64
	// Eps is added to the sum inside the square root (default 1e-7).
	Eps float64
}

// AdagradState is the state of Adagrad and ScaleByRSS.
type AdagradState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// SumOfSquares is the running sum of squared gradients, a tree like
	// the params.
	SumOfSquares any
}

// Adagrad returns the Adagrad optimizer (Duchi et al. 2011, optax.adagrad):
// with s the sum of squared gradients, starting at InitialAccumulatorValue,
//
//	s ← s + g²
//	u = -lr(t-1) · g / sqrt(s + eps)      (0 where s = 0)
//
// PyTorch's torch.optim.Adagrad adds eps outside the root, g/(sqrt(s)+eps),
// and starts the sum at 0: with Eps Zero and equal starting values the two
// agree.
func Adagrad(lr Schedule, opts ...AdagradOptions) Transform {
	const op = "optim.Adagrad"
	needSchedule(op, lr)
	return newAdagrad(op, lr, oneOpt(op, opts))
}

// ScaleByRSS returns Adagrad's rescaling alone, g/sqrt(s + eps) with s the
// running sum of squared gradients (optax.scale_by_rss).
func ScaleByRSS(opts ...AdagradOptions) Transform {
	const op = "optim.ScaleByRSS"
	return newAdagrad(op, nil, oneOpt(op, opts))
}

type adagrad struct {
	op        string
	lr        Schedule
	init, eps float64
}

func newAdagrad(op string, lr Schedule, o AdagradOptions) *adagrad {
	a := &adagrad{op: op, lr: lr, init: orDefault(o.InitialAccumulatorValue, 0.1), eps: orDefault(o.Eps, 1e-7)}
	checkNonNeg(op, "InitialAccumulatorValue", a.init)
	checkNonNeg(op, "Eps", a.eps)
	return a
}

func (a *adagrad) elementwise() bool { return true }

func (a *adagrad) Init(params any) State {
	rejectHalf(a.op, "parameter", params)
	return AdagradState{Count: newCount(), SumOfSquares: stateLike(params, a.init)}
}

func (a *adagrad) Update(grads any, state State, _ any) (any, State) {
	rejectHalf(a.op, "gradient", grads)
	st := stateAs[AdagradState](a.op, state)
	n := countValue(a.op, st.Count)
	post := learningRate(a.op, a.lr, n)
	u, s := leafStep(a.op, grads, []any{st.SumOfSquares}, nil, func(g *tensor.Tensor, s, _ []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		sum := tensor.Add(s[0], tensor.Square(g))
		inv := tensor.Rsqrt(tensor.AddScalar(sum, float32(a.eps)))
		inv = tensor.Where(tensor.Greater(sum, tensor.Scalar(0)), inv, tensor.Scalar(0))
		return scale(tensor.Mul(g, inv), post), []*tensor.Tensor{sum}
	})
	return u, AdagradState{Count: incCount(st.Count, n), SumOfSquares: s[0]}
}
