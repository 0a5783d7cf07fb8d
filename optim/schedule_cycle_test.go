package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
)

// values evaluates s at the given steps.
func values(s optim.Schedule, steps ...int) []float64 {
	out := make([]float64, len(steps))
	for i, n := range steps {
		out[i] = s(n)
	}
	return out
}

// The values below are worked out by hand from optax's formulas
// (optax/schedules/_schedule.py at 2edbcbe).
func TestCycleSchedules(t *testing.T) {
	cosHalf := func(start, end, pct float64) float64 { return end + (start-end)/2*(math.Cos(math.Pi*pct)+1) }
	for _, tc := range []struct {
		name  string
		s     optim.Schedule
		steps []int
		want  []float64
	}{
		{"WarmupConstant", optim.WarmupConstant(0.1, 1, 4), []int{0, 1, 2, 4, 100}, []float64{0.1, 0.325, 0.55, 1, 1}},
		{"WarmupConstant no warmup", optim.WarmupConstant(0.1, 1, 0), []int{0, 5}, []float64{0.1, 0.1}},
		// Warmup over 2 steps to 1, then 1·0.5^((n-2)/2).
		{"WarmupExponentialDecay", optim.WarmupExponentialDecay(0, 1, 2, 2, 0.5), []int{0, 1, 2, 3, 4, 6},
			[]float64{0, 0.5, 1, math.Sqrt(0.5), 0.5, 0.25}},
		// Staircase from step 2+1, bounded below by 0.3.
		{"WarmupExponentialDecay options", optim.WarmupExponentialDecay(0, 1, 2, 2, 0.5, optim.ExponentialOptions{TransitionBegin: 1, Staircase: true, End: 0.3, HasEnd: true}),
			[]int{2, 3, 4, 5, 7, 9}, []float64{1, 1, 1, 0.5, 0.3, 0.3}},
		// init 1, ×10 at 10, ×0.1 at 20: up linearly, down linearly, then 1.
		{"PiecewiseInterpolate linear", optim.PiecewiseInterpolate(optim.InterpolateLinear, 1, map[int]float64{10: 10, 20: 0.1}),
			[]int{0, 5, 10, 15, 20, 50}, []float64{1, 5.5, 10, 5.5, 1, 1}},
		{"PiecewiseInterpolate cosine", optim.PiecewiseInterpolate(optim.InterpolateCosine, 2, map[int]float64{4: 0.5}),
			[]int{0, 1, 2, 4, 9}, []float64{2, cosHalf(2, 1, 0.25), 1.5, 1, 1}},
		{"PiecewiseInterpolate empty", optim.PiecewiseInterpolate(optim.InterpolateLinear, 3, nil), []int{0, 7}, []float64{3, 3}},
		// 100 steps, peak 1: 0.04 → 1 at 30 → 0.04 at 85 → 4e-6 at 100.
		{"LinearOneCycle", optim.LinearOneCycle(100, 1), []int{0, 15, 30, 85, 100, 200},
			[]float64{0.04, 0.52, 1, 0.04, 4e-6, 4e-6}},
		{"LinearOneCycle options", optim.LinearOneCycle(10, 2, optim.OneCycleOptions{PctStart: 0.25, PctFinal: 0.5, DivFactor: 4, FinalDivFactor: 10}),
			[]int{0, 1, 2, 5, 10}, []float64{0.5, 1.25, 2, 0.5, 0.05}},
		// 10 steps: rises on [0, 3) by a half cosine from 0.04 to 1, falls
		// on [3, 10) to 0.04/1e4.
		{"CosineOneCycle", optim.CosineOneCycle(10, 1), []int{0, 1, 3, 6, 10, 11},
			[]float64{0.04, cosHalf(0.04, 1, 1.0/3), 1, cosHalf(1, 4e-6, 3.0/7), 4e-6, 4e-6}},
		// Two cycles: 0 → 1 over 2 steps then cosine to 0 at step 4; then
		// 0.5 flat-start cosine to 0.1 over 4 steps.
		{"SGDR", optim.SGDR(optim.SGDRCycle{Init: 0, Peak: 1, WarmupSteps: 2, DecaySteps: 4},
			optim.SGDRCycle{Init: 0.5, Peak: 0.5, WarmupSteps: 0, DecaySteps: 4, End: 0.1}),
			[]int{0, 1, 2, 3, 4, 5, 6, 8, 20}, []float64{0, 0.5, 1, 0.5, 0.5, 0.1 + 0.4*0.5*(1+math.Cos(math.Pi/4)), 0.3, 0.1, 0.1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			closeTo(t, tc.want, values(tc.s, tc.steps...), 1e-12, 1e-12, "%s", tc.name)
		})
	}
}

func TestCycleSchedulePanics(t *testing.T) {
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"scale", func() { optim.PiecewiseInterpolate(optim.InterpolateLinear, 1, map[int]float64{3: -1}) }, "optim.PiecewiseInterpolate: scale -1 at step 3 is negative"},
		{"kind", func() { optim.PiecewiseInterpolate(optim.Interpolation(7), 1, nil) }, "optim.PiecewiseInterpolate: unknown Interpolation(7)"},
		{"onecycle steps", func() { optim.LinearOneCycle(0, 1) }, "optim.LinearOneCycle: transitionSteps 0, want > 0"},
		{"onecycle div", func() { optim.CosineOneCycle(5, 1, optim.OneCycleOptions{DivFactor: -1}) },
			"optim.CosineOneCycle: DivFactor -1 and FinalDivFactor 10000 must be positive"},
		{"sgdr empty", func() { optim.SGDR() }, "optim.SGDR: no cycles"},
		{"sgdr cycle", func() { optim.SGDR(optim.SGDRCycle{WarmupSteps: 3, DecaySteps: 3}) },
			"optim.WarmupCosineDecay: warmupSteps 3, decaySteps 3: want 0 <= warmupSteps < decaySteps (decaySteps includes the warmup)"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.PanicsWithValue(t, tc.want, tc.f) })
	}
	assert.Equal(t, "cosine", optim.InterpolateCosine.String())
}
