package optim

import (
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// EMA keeps an exponential moving average of a tree of parameters, the
// "EMA weights" evaluated in place of the trained ones:
//
//	ema := optim.NewEMA(model, 0.999, true)
//	for ... {
//		model, state = optim.Step(opt, model, grads, state)
//		ema = ema.Update(model)
//	}
//	evalModel := ema.Params()
//
// An EMA is a value: Update returns a new one. It is itself a pytree (Count
// and Mu are its leaves, Decay and Debias static), so checkpoints save it
// with the model and the optimizer state.
//
// With Debias, the average starts at zero and Params divides it by
// 1-Decay^Count, which makes it exactly the weighted mean of the
// parameters seen so far (optax.ema with debias=True). Without, the average
// starts at the initial parameters (as EMA-of-weights implementations do;
// optax.ema would start at zero) and Params returns it as is.
//
// Only float32 leaves are averaged; other leaves (integer buffers) are
// taken from the latest parameters.
type EMA[M any] struct {
	// Decay is the weight of the old average: avg ← Decay·avg + (1-Decay)·p.
	Decay float64
	// Debias divides by 1-Decay^Count (see EMA).
	Debias bool
	// Count is the number of updates (i32[]).
	Count *tensor.Tensor
	// Mu is the running average, with the params' logical axes.
	Mu M
}

// NewEMA returns an EMA of params with the given decay, which must be in
// [0, 1].
func NewEMA[M any](params M, decay float64, debias bool) EMA[M] {
	checkUnit("optim.NewEMA", "decay", decay, true)
	rejectHalf("optim.NewEMA", "parameter", params)
	mu := params
	if debias {
		mu = pytree.Map(params, func(p *tensor.Tensor) *tensor.Tensor {
			if !isFloat(p) {
				return p
			}
			return like(p, 0)
		})
	}
	return EMA[M]{Decay: decay, Debias: debias, Count: newCount(), Mu: mu}
}

// Update returns the EMA after seeing params: avg ← Decay·avg + (1-Decay)·p
// for the float32 leaves, the latest value for the others.
func (e EMA[M]) Update(params M) EMA[M] {
	rejectHalf("optim.EMA.Update", "parameter", params)
	n := countValue("optim.EMA.Update", e.Count)
	mu := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		m, p := xs[0], xs[1]
		if !isFloat(p) || m == nil {
			return p
		}
		return withAxesOf(ema(m, p, e.Decay), m)
	}, e.Mu, params)
	return EMA[M]{Decay: e.Decay, Debias: e.Debias, Count: incCount(e.Count, n), Mu: mu}
}

// Params returns the average: Mu, divided by 1-Decay^Count with Debias.
// Before the first Update it is Mu itself (zeros with Debias).
func (e EMA[M]) Params() M {
	n := countValue("optim.EMA.Params", e.Count)
	if !e.Debias || n == 0 {
		return e.Mu
	}
	bc := 1 - math.Pow(e.Decay, float64(n))
	if bc == 0 { // Decay 1: the average never moves from zero
		return e.Mu
	}
	return pytree.Map(e.Mu, func(m *tensor.Tensor) *tensor.Tensor {
		if !isFloat(m) {
			return m
		}
		return scale(m, 1/bc)
	})
}
