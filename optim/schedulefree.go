package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// ScheduleFreeOptions are the optional hyperparameters of ScheduleFree.
// Zero fields take optax's defaults.
type ScheduleFreeOptions struct {
	// B1 is the interpolation between the averaged iterate x and the base
	// optimizer's iterate z at which gradients are taken (default 0.9).
	B1 float64
	// WeightLRPower is the power of the largest learning rate so far that
	// weighs each iterate in the average (default 2).
	WeightLRPower float64
}

// ScheduleFreeState is the state of ScheduleFree.
type ScheduleFreeState struct {
	// B1 is the interpolation factor (f32[]), kept for evaluation
	// (ScheduleFreeEvalParams).
	B1 *tensor.Tensor
	// WeightSum is the sum of the averaging weights so far (f32[]).
	WeightSum *tensor.Tensor
	// StepCount is the number of updates plus one (i32[], 1 at first).
	StepCount *tensor.Tensor
	// MaxLR is the largest learning rate so far (f32[]).
	MaxLR *tensor.Tensor
	// BaseState is the base optimizer's state.
	BaseState State
	// Z is the base optimizer's iterate, a tree like the params.
	Z any
}

// ScheduleFree wraps a base optimizer in the schedule-free scheme (Defazio
// et al. 2024, optax.contrib.schedule_free). The base optimizer steps an
// iterate z; the parameters the model is trained at are y = b1·x + (1-b1)·z,
// where x is the average of the z's weighted by the largest learning rate so
// far to the WeightLRPower:
//
//	z ← z + base(g)
//	c = w/(Σw),  w = max_lr^power       (0 while every weight is 0)
//	x ← (1-c)·x + c·z,  x recomputed from y and the old z
//	y ← b1·x + (1-b1)·z
//
// The update is the change of y. Evaluate the model at x, which
// ScheduleFreeEvalParams computes from y and the state. lr is the learning
// rate the base optimizer uses; ScheduleFree reads it, at the step count
// starting from 1 as optax does, only for the weights. Update needs params.
// ScheduleFreeSGD and ScheduleFreeAdamW are the usual base optimizers.
func ScheduleFree(base Transform, lr Schedule, opts ...ScheduleFreeOptions) Transform {
	const op = "optim.ScheduleFree"
	if base == nil {
		panic(op + ": nil base optimizer")
	}
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	s := &scheduleFree{op: op, base: base, lr: lr, b1: orDefault(o.B1, 0.9), power: orDefault(o.WeightLRPower, 2)}
	if !(s.b1 > 0 && s.b1 <= 1) {
		panic(fmt.Sprintf("%s: B1 %v outside (0, 1]", op, s.b1))
	}
	checkNonNeg(op, "WeightLRPower", s.power)
	return s
}

// ScheduleFreeSGDOptions are the optional hyperparameters of
// ScheduleFreeSGD. Zero fields take optax's defaults.
type ScheduleFreeSGDOptions struct {
	// WarmupSteps, when set, warms the learning rate up linearly from 0
	// over that many steps (WarmupConstant).
	WarmupSteps int
	// B1 and WeightLRPower are as in ScheduleFreeOptions.
	B1, WeightLRPower float64
	// WeightDecay adds WeightDecay·param to the gradient (default 0).
	WeightDecay float64
}

// ScheduleFreeSGD returns schedule-free SGD (optax.contrib.schedule_free_sgd):
// ScheduleFree around SGD with learning rate lr (after the warmup, if any)
// and weight decay added to the gradient. Its state is a
// ScheduleFreeState.
func ScheduleFreeSGD(lr float64, opts ...ScheduleFreeSGDOptions) Transform {
	const op = "optim.ScheduleFreeSGD"
	o := oneOpt(op, opts)
	sched := freeSchedule(op, lr, o.WarmupSteps)
	var base Transform = SGD(sched)
	if o.WeightDecay != 0 {
		checkNonNeg(op, "WeightDecay", o.WeightDecay)
		base = Chain(AddDecayedWeights(o.WeightDecay, nil), base)
	}
	sf := ScheduleFree(base, sched, ScheduleFreeOptions{B1: o.B1, WeightLRPower: o.WeightLRPower})
	sf.(*scheduleFree).op = op
	return sf
}

// ScheduleFreeAdamWOptions are the optional hyperparameters of
// ScheduleFreeAdamW. Zero fields take optax's defaults; use Zero for a
// literal 0.
type ScheduleFreeAdamWOptions struct {
	// WarmupSteps, when set, warms the learning rate up linearly from 0
	// over that many steps (WarmupConstant).
	WarmupSteps int
	// B1 and WeightLRPower are as in ScheduleFreeOptions.
	B1, WeightLRPower float64
	// B2 is the decay of the second moment (default 0.999), Eps is added
	// outside its square root (default 1e-8).
	B2, Eps float64
	// WeightDecay is decoupled weight decay, multiplied by the learning
	// rate (default 0).
	WeightDecay float64
}

// ScheduleFreeAdamW returns schedule-free AdamW
// (optax.contrib.schedule_free_adamw): ScheduleFree around AdamW without
// its first moment, that is ScaleByRMS with bias correction and eps outside
// the root, decoupled weight decay and the learning rate lr (0.0025 is
// optax's default). Its state is a ScheduleFreeState.
func ScheduleFreeAdamW(lr float64, opts ...ScheduleFreeAdamWOptions) Transform {
	const op = "optim.ScheduleFreeAdamW"
	o := oneOpt(op, opts)
	sched := freeSchedule(op, lr, o.WarmupSteps)
	base := Chain(
		ScaleByRMS(RMSPropOptions{Decay: orDefault(o.B2, 0.999), Eps: orDefault(o.Eps, 1e-8), EpsOutsideSqrt: true, BiasCorrection: true}),
		AddDecayedWeights(orDefault(o.WeightDecay, 0), nil),
		ScaleByLearningRate(sched),
	)
	sf := ScheduleFree(base, sched, ScheduleFreeOptions{B1: o.B1, WeightLRPower: o.WeightLRPower})
	sf.(*scheduleFree).op = op
	return sf
}

// freeSchedule returns the schedule of ScheduleFreeSGD and
// ScheduleFreeAdamW (op): lr after a linear warmup of warmup steps. It
// panics on a NaN or infinite lr, which a warmup would hide at step 0.
func freeSchedule(op string, lr float64, warmup int) Schedule {
	if !finite(lr) {
		panic(fmt.Sprintf("%s: learning rate %v, want a finite rate", op, lr))
	}
	if warmup > 0 {
		return WarmupConstant(0, lr, warmup)
	}
	return Constant(lr)
}

type scheduleFree struct {
	op        string // the constructor, named in panics
	base      Transform
	lr        Schedule
	b1, power float64
}

func (s *scheduleFree) Init(params any) State {
	rejectHalf(s.op, "parameter", params)
	z := pytree.Map(params, func(p *tensor.Tensor) *tensor.Tensor {
		if !isFloat(p) {
			return nil
		}
		return p
	})
	count := tensor.ScalarInt(1)
	return ScheduleFreeState{
		B1:        tensor.Scalar(float32(s.b1)),
		WeightSum: tensor.Scalar(0),
		StepCount: count,
		MaxLR:     tensor.Scalar(0),
		BaseState: s.base.Init(params),
		Z:         z,
	}
}

func (s *scheduleFree) Update(grads any, state State, params any) (any, State) {
	return s.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to the base optimizer.
func (s *scheduleFree) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	op := s.op
	rejectHalf(op, "gradient", grads)
	needParams(op, params)
	gradsFit(op, grads, params)
	st := stateAs[ScheduleFreeState](op, state)
	n := countValue(op, st.StepCount)
	b1 := scalarState(op, "B1", st.B1)
	lr := float64(float32(rateAt(op, s.lr, n)))
	maxLR := math.Max(scalarState(op, "MaxLR", st.MaxLR), lr)
	weight := float64(float32(math.Pow(maxLR, s.power)))
	total := float64(float32(scalarState(op, "WeightSum", st.WeightSum) + weight))
	var c float64
	switch r := weight / total; {
	case math.IsNaN(weight) || math.IsNaN(total):
		c = math.NaN()
	case math.IsNaN(r):
		c = 0
	default:
		c = r
	}
	bu, baseState := UpdateExtra(s.base, grads, st.BaseState, params, extra)
	r := mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
		y, z, u := xs[0], xs[1], xs[2]
		if u == nil || z == nil {
			return []*tensor.Tensor{nil, z}
		}
		z2 := tensor.Add(z, u)
		x := scale(tensor.Sub(y, scale(z, 1-b1)), 1/b1)
		x = tensor.Add(scale(x, 1-c), scale(z2, c))
		y2 := tensor.Add(scale(x, b1), scale(z2, 1-b1))
		return []*tensor.Tensor{tensor.Sub(y2, y), withAxesOf(z2, z)}
	}, params, st.Z, bu)
	ref := st.StepCount
	return r[0], ScheduleFreeState{
		B1:        st.B1,
		WeightSum: scalarLike(total, ref),
		StepCount: incCount(st.StepCount, n),
		MaxLR:     scalarLike(maxLR, ref),
		BaseState: baseState,
		Z:         r[1],
	}
}

// ScheduleFreeEvalParams returns the parameters to evaluate a model trained
// with ScheduleFree at: the average x = (y - (1-b1)·z)/b1, from the
// training parameters y and the state (optax's
// schedule_free_eval_params). state may be the ScheduleFreeState itself
// or a ChainState holding one. Non-float leaves are those of params.
func ScheduleFreeEvalParams[M any](state State, params M) M {
	const op = "optim.ScheduleFreeEvalParams"
	st, ok := findState[ScheduleFreeState](state)
	if !ok {
		panic(fmt.Sprintf("%s: state is %T, which holds no ScheduleFreeState", op, state))
	}
	b1 := scalarState(op, "B1", st.B1)
	return pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		y, z := xs[0], xs[1]
		if z == nil {
			return y
		}
		return scale(tensor.Sub(y, scale(z, 1-b1)), 1/b1)
	}, any(params), st.Z).(M)
}

// findState returns the first state of type S in state, looking into
// ChainStates.
func findState[S any](state State) (S, bool) {
	switch s := state.(type) {
	case S:
		return s, true
	case ChainState:
		for _, x := range s {
			if r, ok := findState[S](x); ok {
				return r, true
			}
		}
	}
	var zero S
	return zero, false
}

// ScaleByRMS returns RMSProp's rescaling alone, g/sqrt(v + eps) with v the
// moving average of g² (optax.scale_by_rms), with the options of RMSProp
// that belong to it: Decay, Eps, EpsOutsideSqrt, InitialScale and
// BiasCorrection. Its state is an RMSPropState without Mu and Trace.
func ScaleByRMS(opts ...RMSPropOptions) Transform {
	const op = "optim.ScaleByRMS"
	o := oneOpt(op, opts)
	if o.Centered || o.Momentum != 0 || o.Nesterov {
		panic(op + ": Centered, Momentum and Nesterov are options of RMSProp")
	}
	r := &scaleByRMS{decay: orDefault(o.Decay, 0.9), eps: orDefault(o.Eps, 1e-8), init: orDefault(o.InitialScale, 0),
		outside: o.EpsOutsideSqrt, bias: o.BiasCorrection}
	checkUnit(op, "Decay", r.decay, false)
	checkNonNeg(op, "Eps", r.eps)
	checkNonNeg(op, "InitialScale", r.init)
	return r
}

type scaleByRMS struct {
	decay, eps, init float64
	outside, bias    bool
}

func (r *scaleByRMS) elementwise() bool { return true }

func (r *scaleByRMS) Init(params any) State {
	rejectHalf("optim.ScaleByRMS", "parameter", params)
	return RMSPropState{Count: newCount(), Nu: stateLike(params, r.init)}
}

func (r *scaleByRMS) Update(grads any, state State, _ any) (any, State) {
	const op = "optim.ScaleByRMS"
	rejectHalf(op, "gradient", grads)
	st := stateAs[RMSPropState](op, state)
	n := countValue(op, st.Count)
	bc := 1.0
	if r.bias {
		bc = biasCorrection(r.decay, n+1)
	}
	u, s := leafStep(op, grads, []any{st.Nu}, nil, func(g *tensor.Tensor, s, _ []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		nu := ema(s[0], tensor.Square(g), r.decay)
		v := scale(nu, 1/bc)
		if r.outside {
			return tensor.Div(g, tensor.AddScalar(tensor.Sqrt(v), float32(r.eps))), []*tensor.Tensor{nu}
		}
		return tensor.Mul(g, tensor.Rsqrt(tensor.AddScalar(v, float32(r.eps)))), []*tensor.Tensor{nu}
	})
	return u, RMSPropState{Count: incCount(st.Count, n), Nu: s[0]}
}
