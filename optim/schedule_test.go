package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/optim"
)

func TestSchedules(t *testing.T) {
	cosine := func(init, alpha float64, step, steps int) float64 {
		c := float64(min(step, steps))
		return init * ((1-alpha)*0.5*(1+math.Cos(math.Pi*c/float64(steps))) + alpha)
	}
	type at struct {
		step int
		want float64
	}
	for _, tc := range []struct {
		name string
		s    optim.Schedule
		at   []at
	}{
		{"Constant", optim.Constant(3e-4), []at{{0, 3e-4}, {1 << 30, 3e-4}}},
		{"Linear", optim.Linear(1, 0.01, 100, 0), []at{
			{0, 1}, {1, 1 - 0.99/100}, {50, 0.505}, {99, 0.01 + 0.99/100}, {100, 0.01}, {500, 0.01}, {-3, 1}}},
		{"Linear with begin", optim.Linear(0, 2, 10, 5), []at{
			{0, 0}, {5, 0}, {6, 0.2}, {15, 2}, {20, 2}}},
		{"Linear without steps is constant", optim.Linear(0.5, 2, 0, 3), []at{{0, 0.5}, {100, 0.5}}},
		// optax.polynomial_schedule's docstring prints these rounded to
		// 0.9803 and 0.0101: (1-0.01)·(1-c/100)² + 0.01.
		{"Polynomial (optax docstring)", optim.Polynomial(1, 0.01, 2, 100, 5), []at{
			{0, 1}, {5, 1}, {6, 0.99*0.99*0.99 + 0.01}, {104, 0.99*0.01*0.01 + 0.01}, {105, 0.01}, {110, 0.01}}},
		{"CosineDecay", optim.CosineDecay(2, 100, 0.1), []at{
			{0, 2}, {25, cosine(2, 0.1, 25, 100)}, {50, 2 * (0.9*0.5 + 0.1)}, {100, 0.2}, {150, 0.2}}},
		{"CosineDecay to zero", optim.CosineDecay(1, 10, 0), []at{{0, 1}, {5, 0.5}, {10, 0}, {11, 0}}},
		// warmup_cosine_decay_schedule: decay_steps counts the warmup, so the
		// cosine runs over decay-warmup steps and ends at end_value.
		{"WarmupCosineDecay", optim.WarmupCosineDecay(0, 1, 10, 110, 0.1), []at{
			{0, 0}, {1, 0.1}, {5, 0.5}, {9, 0.9}, {10, 1}, {11, cosine(1, 0.1, 1, 100)},
			{60, 0.55}, {109, cosine(1, 0.1, 99, 100)}, {110, 0.1}, {1000, 0.1}}},
		{"WarmupCosineDecay without warmup", optim.WarmupCosineDecay(0.3, 1, 0, 4, 0), []at{
			{0, 1}, {2, 0.5}, {4, 0}}},
		{"WarmupCosineDecay peak 0", optim.WarmupCosineDecay(1, 0, 2, 4, 0.5), []at{
			{0, 1}, {1, 0.5}, {2, 0}, {10, 0}}},
		{"Exponential", optim.Exponential(1, 10, 0.5), []at{
			{0, 1}, {5, math.Sqrt(0.5)}, {10, 0.5}, {15, math.Pow(0.5, 1.5)}, {30, 0.125}}},
		{"Exponential staircase", optim.Exponential(1, 10, 0.5, optim.ExponentialOptions{Staircase: true}), []at{
			{0, 1}, {9, 1}, {10, 0.5}, {19, 0.5}, {20, 0.25}}},
		{"Exponential begin and end", optim.Exponential(1, 10, 0.5, optim.ExponentialOptions{TransitionBegin: 5, HasEnd: true, End: 0.3}), []at{
			{0, 1}, {5, 1}, {10, math.Sqrt(0.5)}, {15, 0.5}, {25, 0.3}, {1000, 0.3}}},
		{"Exponential growing with end", optim.Exponential(1, 10, 2, optim.ExponentialOptions{HasEnd: true, End: 3}), []at{
			{0, 1}, {10, 2}, {20, 3}, {100, 3}}},
		{"Exponential end 0 is a bound", optim.Exponential(-1, 10, 0.5, optim.ExponentialOptions{HasEnd: true}), []at{
			{0, 0}, {10, 0}}},
		{"Exponential rate 0 is constant", optim.Exponential(0.7, 10, 0), []at{{0, 0.7}, {50, 0.7}}},
		// The values in optax.piecewise_constant_schedule's docstring.
		{"PiecewiseConstant", optim.PiecewiseConstant(1, map[int]float64{100: 0.1, 200: 0.01}), []at{
			{0, 1}, {50, 1}, {99, 1}, {100, 0.1}, {150, 0.1}, {200, 0.001}, {250, 0.001}}},
		{"PiecewiseConstant empty", optim.PiecewiseConstant(2, nil), []at{{0, 2}, {1000, 2}}},
		{"Join", optim.Join([]optim.Schedule{optim.Constant(1), optim.Linear(2, 0, 10, 0), optim.Constant(7)}, []int{5, 20}), []at{
			{0, 1}, {4, 1}, {5, 2}, {10, 1}, {15, 0}, {19, 0}, {20, 7}, {100, 7}}},
		{"Join equal boundaries", optim.Join([]optim.Schedule{optim.Constant(1), optim.Constant(2), optim.Constant(3)}, []int{5, 5}), []at{
			{4, 1}, {5, 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, a := range tc.at {
				assert.InDelta(t, a.want, tc.s(a.step), 1e-12, "step %d", a.step)
			}
		})
	}
}

func TestScheduleReachesOptimizer(t *testing.T) {
	// The optimizer calls the schedule with the number of updates made so
	// far: 0 for the first. SGD's update is -lr(step)·g.
	var seen []int
	s := optim.Schedule(func(step int) float64 { seen = append(seen, step); return float64(step + 1) })
	opt := optim.SGD(s)
	assert.Empty(t, seen, "the constructor does not call the schedule")
	g := f32([]float64{1}, 1)
	state := opt.Init(g)
	for want := range 3 {
		u, st := opt.Update(g, state, nil)
		state = st
		assert.InDelta(t, -float64(want+1), u.(interface{ Item() float64 }).Item(), 0)
	}
	assert.Equal(t, []int{0, 1, 2}, seen)
}
