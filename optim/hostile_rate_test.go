package optim_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// panicOf returns what f panics with, or nil.
func panicOf(f func()) (r any) {
	defer func() { r = recover() }()
	f()
	return nil
}

// rateOptimizers builds each optimizer family that takes a learning rate
// schedule, with the name its panics carry.
var rateOptimizers = []struct {
	op  string
	new func(optim.Schedule) optim.Transform
}{
	{"optim.SGD", func(s optim.Schedule) optim.Transform { return optim.SGD(s) }},
	{"optim.SGD", func(s optim.Schedule) optim.Transform { return optim.SGD(s, optim.SGDOptions{Momentum: 0.9}) }},
	{"optim.Adam", func(s optim.Schedule) optim.Transform { return optim.Adam(s) }},
	{"optim.AdamW", func(s optim.Schedule) optim.Transform { return optim.AdamW(s) }},
	{"optim.AMSGrad", func(s optim.Schedule) optim.Transform { return optim.AMSGrad(s) }},
	{"optim.Adamax", func(s optim.Schedule) optim.Transform { return optim.Adamax(s) }},
	{"optim.AdamaxW", func(s optim.Schedule) optim.Transform { return optim.AdamaxW(s) }},
	{"optim.RAdam", func(s optim.Schedule) optim.Transform { return optim.RAdam(s) }},
	{"optim.AdaBelief", func(s optim.Schedule) optim.Transform { return optim.AdaBelief(s) }},
	{"optim.Yogi", func(s optim.Schedule) optim.Transform { return optim.Yogi(s) }},
	{"optim.NAdam", func(s optim.Schedule) optim.Transform { return optim.NAdam(s) }},
	{"optim.NAdamW", func(s optim.Schedule) optim.Transform { return optim.NAdamW(s) }},
	{"optim.Adagrad", func(s optim.Schedule) optim.Transform { return optim.Adagrad(s) }},
	{"optim.Adadelta", func(s optim.Schedule) optim.Transform { return optim.Adadelta(s) }},
	{"optim.RMSProp", func(s optim.Schedule) optim.Transform { return optim.RMSProp(s) }},
	{"optim.Lion", func(s optim.Schedule) optim.Transform { return optim.Lion(s) }},
	{"optim.Novograd", func(s optim.Schedule) optim.Transform { return optim.Novograd(s) }},
	{"optim.Adafactor", func(s optim.Schedule) optim.Transform { return optim.Adafactor(s) }},
	{"optim.Lamb", func(s optim.Schedule) optim.Transform { return optim.Lamb(s) }},
	{"optim.Lars", func(s optim.Schedule) optim.Transform { return optim.Lars(s) }},
	{"optim.Muon", func(s optim.Schedule) optim.Transform { return optim.Muon(s) }},
	{"optim.ScheduleFree", func(s optim.Schedule) optim.Transform { return optim.ScheduleFree(optim.SGD(optim.Constant(1)), s) }},
	{"optim.ScaleByLearningRate", func(s optim.Schedule) optim.Transform { return optim.ScaleByLearningRate(s) }},
	{"optim.ScaleBySchedule", func(s optim.Schedule) optim.Transform { return optim.ScaleBySchedule(s) }},
}

// A constant rate that is NaN or infinite panics in optim.Constant; one a
// schedule produces at some step panics at that step's update, naming the
// optimizer, the value and the step. Both used to be accepted, and the
// parameters became NaN. The constructors do not call the schedule.
func TestHostileNonFiniteLearningRate(t *testing.T) {
	params := hostileTree{A: tensor.Ones(tensor.Float32, 3, 4), B: tensor.Ones(tensor.Float32, 4)}
	grads := hostileTree{A: tensor.Full(tensor.Float32, 0.5, 3, 4), B: tensor.Full(tensor.Float32, -0.5, 4)}
	for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		assert.Equal(t, fmt.Sprintf("optim.Constant: %v, want a finite value", bad),
			panicOf(func() { optim.Constant(bad) }), "constant")
	}
	for _, c := range rateOptimizers {
		for _, bad := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
			t.Run(fmt.Sprintf("%s/%v", c.op, bad), func(t *testing.T) {
				calls := 0
				c.new(func(int) float64 { calls++; return bad })
				assert.Zero(t, calls, "the constructor calls the schedule")

				// Finite for two updates, then bad.
				tx := c.new(func(step int) float64 {
					if step >= 2 {
						return bad
					}
					return 0.01
				})
				state := tx.Init(params)
				p := params
				want := fmt.Sprintf("%s: learning rate schedule gave %v at step 2, want a finite rate", c.op, bad)
				// The step count the schedule sees starts at 0 (1 for
				// ScheduleFree, as in optax): step until it reaches 2.
				var got any
				for range 3 {
					if got = panicOf(func() { optim.Step(tx, p, grads, state) }); got != nil {
						break
					}
					p, state = optim.Step(tx, p, grads, state)
					for _, x := range []*tensor.Tensor{p.A, p.B} {
						for _, v := range x.Float64s() {
							require.False(t, math.IsNaN(v) || math.IsInf(v, 0), "a good step")
						}
					}
				}
				assert.Equal(t, want, got, "Step")
				assert.Equal(t, want, panicOf(func() { tx.Update(grads, state, p) }), "Update")
			})
		}
	}
}

// A negative learning rate is accepted, as in optax (PyTorch's optimizers
// reject it): SGD then ascends the gradient.
func TestNegativeLearningRateAscends(t *testing.T) {
	tx := optim.SGD(optim.Constant(-0.5))
	p := tensor.FromFloat64([]float64{1, 2}, 2)
	g := tensor.FromFloat64([]float64{1, -1}, 2)
	p2, _ := optim.Step(tx, p, g, tx.Init(p))
	assert.Equal(t, []float64{1.5, 1.5}, p2.Float64s())
}

type injectHP struct{ LR optim.Schedule }

// InjectHyperparams names the Schedule field and the step where it gives a
// NaN or an infinity; the optimizer its factory builds would otherwise
// report it as a rate "at step 0" (it sees a Constant).
func TestHostileInjectedNonFiniteRate(t *testing.T) {
	p := tensor.Ones(tensor.Float32, 3)
	tx := optim.InjectHyperparams(func(h injectHP) optim.Transform { return optim.Adam(h.LR) },
		injectHP{LR: func(step int) float64 { return 0.1 / float64(1-step) }})
	state := tx.Init(p)
	p, state = optim.Step(tx, p, p, state)
	assert.Equal(t, "optim.InjectHyperparams: Schedule field LR gave +Inf at step 1, want a finite value",
		panicOf(func() { optim.Step(tx, p, p, state) }))
}

// ScheduleFreeSGD and ScheduleFreeAdamW take the rate as a float64: a NaN
// or an infinity panics naming them, warmup or not.
func TestHostileScheduleFreeRate(t *testing.T) {
	for _, bad := range []float64{math.NaN(), math.Inf(1)} {
		assert.Equal(t, fmt.Sprintf("optim.ScheduleFreeSGD: learning rate %v, want a finite rate", bad),
			panicOf(func() { optim.ScheduleFreeSGD(bad, optim.ScheduleFreeSGDOptions{WarmupSteps: 10}) }))
		assert.Equal(t, fmt.Sprintf("optim.ScheduleFreeAdamW: learning rate %v, want a finite rate", bad),
			panicOf(func() { optim.ScheduleFreeAdamW(bad) }))
	}
}

// ScheduleFree's schedule sees the step count from 1, as in optax: a
// schedule undefined at 0 (1/step) trains; its constructor used to call it
// at 0 and panic on +Inf.
func TestScheduleFreeScheduleFromStepOne(t *testing.T) {
	var seen []int
	tx := optim.ScheduleFree(optim.SGD(optim.Constant(1)), func(step int) float64 {
		seen = append(seen, step)
		return 0.5 / float64(step)
	})
	p := tensor.FromFloat64([]float64{1, 2}, 2)
	g := tensor.FromFloat64([]float64{1, -1}, 2)
	state := tx.Init(p)
	for range 2 {
		require.Nil(t, panicOf(func() { optim.Step(tx, p, g, state) }))
		p, state = optim.Step(tx, p, g, state)
	}
	assert.Equal(t, []int{1, 1, 2, 2}, seen, "each Step above runs twice")
	for _, v := range p.Float64s() {
		assert.False(t, math.IsNaN(v) || math.IsInf(v, 0))
	}
}
