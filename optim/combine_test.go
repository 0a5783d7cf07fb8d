package optim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func vec(v ...float64) *tensor.Tensor { return f32(v, len(v)) }

func TestChainOrder(t *testing.T) {
	g := vec(0.8, -0.3)
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		want []float64
	}{
		// scale first: 1.6 is clipped to 1; clip first: 0.8 passes, then 1.6.
		{"scale then clip", optim.Chain(optim.Scale(2), optim.Clip(1)), []float64{1, -0.6}},
		{"clip then scale", optim.Chain(optim.Clip(0.5), optim.Scale(2)), []float64{1, -0.6}},
		{"clip then scale, loose", optim.Chain(optim.Clip(1), optim.Scale(2)), []float64{1.6, -0.6}},
		{"empty chain", optim.Chain(), []float64{0.8, -0.3}},
		{"identity", optim.Chain(optim.Identity(), optim.Identity()), []float64{0.8, -0.3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, _ := tc.tx.Update(g, tc.tx.Init(g), g)
			assert.InDeltaSlice(t, tc.want, u.(*tensor.Tensor).Float64s(), 1e-6)
		})
	}
}

func TestChainStateAndSchedules(t *testing.T) {
	// Each link keeps its own state; ScaleByLearningRate counts its own
	// steps, so the schedule sees 0, 1, 2 through the chain.
	tx := optim.Chain(optim.ClipByGlobalNorm(100), optim.Trace(0.5, false), optim.ScaleByLearningRate(optim.Linear(1, 0, 4, 0)))
	g := vec(1)
	state := tx.Init(g)
	require.IsType(t, optim.ChainState{}, state)
	require.Len(t, state, 3)
	assert.IsType(t, optim.EmptyState{}, state.(optim.ChainState)[0])
	// trace: 1, 1.5, 1.75; lr: 1, 0.75, 0.5
	for i, want := range []float64{-1, -1.5 * 0.75, -1.75 * 0.5} {
		u, st := tx.Update(g, state, nil)
		state = st
		assert.InDelta(t, want, u.(*tensor.Tensor).Item(), 1e-6, "step %d", i)
	}
	assert.Equal(t, int32(3), state.(optim.ChainState)[2].(optim.ScheduleState).Count.Int32s()[0])
}

func TestMasked(t *testing.T) {
	params := newModel()
	g := gradsAt(0)

	// A stateless inner transform: W is scaled, B passes through as is.
	tx := optim.Masked(optim.Scale(10), pytree.PathGlob("W"))
	u, st := tx.Update(g, tx.Init(params), params)
	um := u.(model)
	closeTo(t, tensor.MulScalar(g.W, 10).Float64s(), um.W.Float64s(), 1e-6, 0, "W")
	assert.Same(t, g.B, um.B, "unmasked updates pass through unchanged")
	assert.Nil(t, um.Ids)
	assert.IsType(t, optim.MaskedState{}, st)

	// A stateful inner transform keeps state for the selected leaves only.
	adam := optim.Masked(optim.Adam(optim.Constant(0.1)), pytree.PathGlob("B"))
	state := adam.Init(params)
	inner := state.(optim.MaskedState).Inner.(optim.AdamState)
	assert.Nil(t, inner.Mu.(model).W)
	assert.NotNil(t, inner.Mu.(model).B)
	ref := adamRef(optim.Constant(0.1), 0.9, 0.999, 1e-8, 0, false, 0, nil)
	for step := range 3 {
		g := gradsAt(step)
		u, st := adam.Update(g, state, params)
		state = st
		um := u.(model)
		assert.Same(t, g.W, um.W)
		closeTo(t, ref(step, "B", []int{4}, g.B.Float64s(), nil), um.B.Float64s(), 2e-5, 1e-7, "step %d", step)
	}

	// Without params the mask is evaluated on the updates.
	u, _ = tx.Update(g, tx.Init(params), nil)
	closeTo(t, tensor.MulScalar(g.W, 10).Float64s(), u.(model).W.Float64s(), 1e-6, 0, "W without params")

	// A predicate on logical axes (params carry them; gradients need not).
	hasIn := func(_ pytree.Path, x *tensor.Tensor) bool {
		ax := x.LogicalAxes()
		return len(ax) > 0 && ax[0] == "in"
	}
	tx = optim.Masked(optim.Scale(-1), hasIn)
	u, _ = tx.Update(g, tx.Init(params), params)
	closeTo(t, tensor.Neg(g.W).Float64s(), u.(model).W.Float64s(), 0, 0, "W by logical axes")
	assert.Same(t, g.B, u.(model).B)
}

func TestMultiSteps(t *testing.T) {
	params := newModel()
	const k = 3
	for _, sum := range []bool{false, true} {
		tx := optim.MultiSteps(optim.SGD(optim.Constant(0.5)), k, optim.MultiStepsOptions{Sum: sum})
		state := tx.Init(params)
		var acc [16]float64
		for step := range 2*k + 1 {
			g := gradsAt(step)
			gv := append(g.W.Float64s(), g.B.Float64s()...)
			for i := range acc {
				acc[i] += gv[i]
			}
			u, st := tx.Update(g, state, params)
			state = st
			ms := st.(optim.MultiStepsState)
			um := u.(model)
			got := append(um.W.Float64s(), um.B.Float64s()...)
			if (step+1)%k != 0 {
				// k-1 zero updates of the gradients' shapes
				assert.Equal(t, make([]float64, 16), got, "sum=%v step %d", sum, step)
				assert.False(t, ms.HasUpdated())
				continue
			}
			want := make([]float64, 16)
			for i := range acc {
				if sum {
					want[i] = -0.5 * acc[i]
				} else {
					want[i] = -0.5 * acc[i] / k
				}
			}
			closeTo(t, want, got, 1e-5, 1e-7, "sum=%v step %d", sum, step)
			assert.True(t, ms.HasUpdated())
			assert.Equal(t, int32((step+1)/k), ms.GradientStep.Int32s()[0])
			assert.Equal(t, int32(0), ms.MiniStep.Int32s()[0])
			acc = [16]float64{}
		}
	}
}

func TestMultiStepsInnerStateAdvancesOnlyOnEmit(t *testing.T) {
	params := newModel()
	tx := optim.MultiSteps(optim.Adam(optim.Constant(0.1)), 2)
	state := tx.Init(params)
	counts := []int32{}
	for step := range 4 {
		_, st := tx.Update(gradsAt(step), state, params)
		state = st
		counts = append(counts, st.(optim.MultiStepsState).Inner.(optim.AdamState).Count.Int32s()[0])
	}
	assert.Equal(t, []int32{0, 1, 1, 2}, counts)

	// Accumulating two gradients with MultiSteps equals Adam on their mean.
	tx = optim.MultiSteps(optim.Adam(optim.Constant(0.1)), 2)
	state = tx.Init(params)
	_, state = tx.Update(gradsAt(0), state, params)
	u, _ := tx.Update(gradsAt(1), state, params)
	mean := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		if xs[0] == nil {
			return nil
		}
		return tensor.MulScalar(tensor.Add(xs[0], xs[1]), 0.5)
	}, gradsAt(0), gradsAt(1))
	adam := optim.Adam(optim.Constant(0.1))
	want, _ := adam.Update(mean, adam.Init(params), params)
	require.NoError(t, pytree.Diff(want, u, 1e-5, 1e-7))
}

func TestEMA(t *testing.T) {
	p0, p1, p2 := newModel(), newModel(), newModel()
	p1.W, p1.B = tensor.MulScalar(p0.W, 2), tensor.MulScalar(p0.B, 2)
	p2.W, p2.B, p2.Ids = tensor.MulScalar(p0.W, -1), tensor.MulScalar(p0.B, -1), tensor.FromInts([]int{1, 2}, 2)
	w0 := p0.W.Float64s()
	at := func(f func(w float64) float64) []float64 {
		out := make([]float64, len(w0))
		for i, w := range w0 {
			out[i] = f(w)
		}
		return out
	}
	const d = 0.9

	// Without debiasing the average starts at the parameters.
	e := optim.NewEMA(p0, d, false)
	closeTo(t, w0, e.Params().W.Float64s(), 0, 0, "initial")
	e = e.Update(p1).Update(p2)
	closeTo(t, at(func(w float64) float64 { return d*(d*w+(1-d)*2*w) + (1-d)*-w }), e.Params().W.Float64s(), 1e-6, 1e-7, "no debias")
	assert.Equal(t, []int{1, 2}, e.Params().Ids.Ints(), "integer leaves follow the latest params")
	assert.Equal(t, []string{"in", "out"}, e.Mu.W.LogicalAxes())
	assert.Equal(t, int32(2), e.Count.Int32s()[0])

	// With debiasing (optax.ema): zero start, divided by 1-d^t, which is the
	// normalised weighted mean of what was seen.
	e = optim.NewEMA(p0, d, true)
	closeTo(t, make([]float64, 12), e.Params().W.Float64s(), 0, 0, "debiased initial")
	e = e.Update(p1)
	closeTo(t, at(func(w float64) float64 { return 2 * w }), e.Params().W.Float64s(), 1e-6, 1e-7, "one debiased update is the params")
	e = e.Update(p2)
	want := at(func(w float64) float64 { return (d*(1-d)*2*w + (1-d)*-w) / (1 - d*d) })
	closeTo(t, want, e.Params().W.Float64s(), 1e-6, 1e-7, "debiased")
	closeTo(t, at(func(w float64) float64 { return d*(1-d)*2*w + (1-d)*-w }), e.Mu.W.Float64s(), 1e-6, 1e-7, "Mu is the biased average")

	// The EMA is a pytree: its leaves are Count and the averages.
	assert.Len(t, pytree.Leaves(e), 1+3)
}
