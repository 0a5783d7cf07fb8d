package optim

import (
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Scale returns a transform that multiplies the updates by factor
// (optax.scale). Its state is EmptyState.
func Scale(factor float64) Transform {
	return Stateless(func(u, _ any) any {
		rejectHalf("optim.Scale", "update", u)
		return scaleTree(u, factor)
	})
}

// ScheduleState is the state of ScaleBySchedule and ScaleByLearningRate.
type ScheduleState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
}

// ScaleBySchedule returns a transform that multiplies the updates by
// s(count), count being the number of updates made before
// (optax.scale_by_schedule).
func ScaleBySchedule(s Schedule) Transform {
	needSchedule("optim.ScaleBySchedule", s)
	return &bySchedule{op: "optim.ScaleBySchedule", s: s, sign: 1}
}

// ScaleByLearningRate returns a transform that multiplies the updates by
// -lr(count): the last link of a chain that descends the gradient
// (optax.scale_by_learning_rate). Adam is
//
//	optim.Chain(optim.ScaleByAdam(), optim.ScaleByLearningRate(lr))
func ScaleByLearningRate(lr Schedule) Transform {
	needSchedule("optim.ScaleByLearningRate", lr)
	return &bySchedule{op: "optim.ScaleByLearningRate", s: lr, sign: -1}
}

type bySchedule struct {
	op   string
	s    Schedule
	sign float64
}

func (b *bySchedule) Init(any) State { return ScheduleState{Count: newCount()} }

func (b *bySchedule) Update(grads any, state State, _ any) (any, State) {
	rejectHalf(b.op, "update", grads)
	st := stateAs[ScheduleState](b.op, state)
	n := countValue(b.op, st.Count)
	return scaleTree(grads, b.sign*rateAt(b.op, b.s, n)), ScheduleState{Count: incCount(st.Count, n)}
}

// AddDecayedWeights returns a transform that adds weightDecay·param to the
// updates of the parameters mask selects (all float parameters when mask is
// nil): optax.add_decayed_weights. Placed before ScaleByLearningRate it is
// decoupled weight decay scaled by the learning rate, as in AdamW. Its state
// is EmptyState; Update needs params.
func AddDecayedWeights(weightDecay float64, mask pytree.Predicate) Transform {
	const op = "optim.AddDecayedWeights"
	checkNonNeg(op, "weightDecay", weightDecay)
	return Stateless(func(u, params any) any {
		rejectHalf(op, "update", u)
		if weightDecay == 0 {
			return u
		}
		needParams(op, params)
		rejectHalf(op, "parameter", selected(params, mask))
		return addDecayed(u, selected(params, mask), weightDecay)
	})
}
