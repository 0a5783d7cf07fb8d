package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func TestSetToZeroAndFreeze(t *testing.T) {
	params := newModel()
	g := gradsAt(0)
	u, st := optim.SetToZero().Update(g, optim.SetToZero().Init(params), params)
	assert.Equal(t, optim.EmptyState{}, st)
	assert.Equal(t, make([]float32, 12), u.(model).W.Float32s())
	assert.Equal(t, make([]float32, 4), u.(model).B.Float32s())
	assert.Nil(t, u.(model).Ids)

	// Freeze zeros W's updates after Adam and passes B's.
	lr := optim.Constant(0.1)
	opt := optim.Chain(optim.Adam(lr), optim.Freeze(pytree.PathGlob("W")))
	p, _ := optim.Step(opt, params, g, opt.Init(params))
	assert.Equal(t, params.W.Float32s(), p.W.Float32s(), "W is frozen")
	ap, _ := optim.Step(optim.Adam(lr), params, g, optim.Adam(lr).Init(params))
	assert.Equal(t, ap.B.Float32s(), p.B.Float32s(), "B takes Adam's step")

	// SelectiveTransform keeps no Adam state for the frozen leaf.
	sel := optim.SelectiveTransform(optim.Adam(lr), pytree.PathGlob("W"))
	sst := sel.Init(params).(optim.PartitionState)
	adamState := sst.Inner["train"].(optim.AdamState)
	assert.Nil(t, adamState.Mu.(model).W)
	assert.NotNil(t, adamState.Mu.(model).B)
	p2, _ := optim.Step(sel, params, g, sel.Init(params))
	require.NoError(t, pytree.Diff(p, p2, 0, 0))
}

// Partition gives each group the optimizer its label names: the result
// equals running each optimizer on its own leaves alone.
func TestPartition(t *testing.T) {
	params := newModel()
	lr := optim.Constant(0.05)
	label := func(_ pytree.Path, x *tensor.Tensor) string {
		if x.Rank() == 2 {
			return "matrix"
		}
		return "vector"
	}
	txs := map[string]optim.Transform{"matrix": optim.Lion(lr), "vector": optim.SGD(lr, optim.SGDOptions{Momentum: 0.9})}
	opt := optim.Partition(txs, label)
	st := opt.Init(params)
	require.IsType(t, optim.PartitionState{}, st)
	lionState := st.(optim.PartitionState).Inner["matrix"].(optim.LionState)
	assert.Nil(t, lionState.Mu.(model).B, "the matrix group keeps state for W only")

	wantW, wantB := params, params
	sW, sB := txs["matrix"].Init(params), txs["vector"].Init(params)
	p := params
	for step := range 4 {
		g := gradsAt(step)
		p, st = optim.Step(opt, p, g, st)
		wantW, sW = optim.Step(txs["matrix"], wantW, model{W: g.W}, sW)
		wantB, sB = optim.Step(txs["vector"], wantB, model{B: g.B}, sB)
	}
	assert.Equal(t, wantW.W.Float32s(), p.W.Float32s())
	assert.Equal(t, wantB.B.Float32s(), p.B.Float32s())
	assert.Equal(t, []string{"in", "out"}, p.W.LogicalAxes())

	// MultiTransform is the same thing.
	mt := optim.MultiTransform(txs, label)
	p2, _ := optim.Step(mt, params, gradsAt(0), mt.Init(params))
	p1, _ := optim.Step(opt, params, gradsAt(0), opt.Init(params))
	require.NoError(t, pytree.Diff(p1, p2, 0, 0))

	// The state survives a checkpoint.
	dir := t.TempDir()
	require.NoError(t, checkpoint.Save(dir, 1, st))
	back, err := checkpoint.Restore(dir, 1, opt.Init(params), checkpoint.OnHost())
	require.NoError(t, err)
	require.NoError(t, pytree.Diff(st, back, 0, 0))

	require.PanicsWithValue(t, `optim.Partition: parameter W has label "other", which names no transform (labels: matrix, vector)`, func() {
		optim.Partition(txs, func(pytree.Path, *tensor.Tensor) string { return "other" }).Init(params)
	})
	require.PanicsWithValue(t, "optim.Partition: no transforms or nil label function", func() { optim.Partition(nil, label) })
}

// ApplyIfFinite skips updates with a NaN or an infinity, keeping the inner
// state, until more than maxConsecutiveErrors come in a row.
func TestApplyIfFinite(t *testing.T) {
	params := newModel()
	lr := optim.Constant(0.1)
	opt := optim.ApplyIfFinite(optim.Adam(lr), 2)
	st := opt.Init(params)
	bad := gradsAt(1)
	bad.B = tensor.FromFloat32([]float32{1, float32(math.NaN()), 0, 0}, 4)
	inf := gradsAt(2)
	inf.W = tensor.MulScalar(inf.W, float32(math.Inf(1)))

	// step: grads, applied?, consecutive, total, last finite
	for i, tc := range []struct {
		g          model
		applied    bool
		run, total int32
	}{
		{gradsAt(0), true, 0, 0},
		{bad, false, 1, 1},
		{inf, false, 2, 2},
		{gradsAt(3), true, 0, 2},
		{bad, false, 1, 3},
		{bad, false, 2, 4},
		{bad, true, 3, 5}, // more than 2 in a row: applied anyway
	} {
		before := st.(optim.ApplyIfFiniteState)
		var u any
		u, st = opt.Update(tc.g, st, params)
		s := st.(optim.ApplyIfFiniteState)
		assert.Equal(t, tc.run, s.NotFiniteCount.Int32s()[0], "step %d", i)
		assert.Equal(t, tc.total, s.TotalNotFinite.Int32s()[0], "step %d", i)
		assert.Equal(t, tc.run == 0, s.LastFinite.Bools()[0], "step %d", i)
		adamCount := s.Inner.(optim.AdamState).Count.Int32s()[0]
		if tc.applied {
			assert.Equal(t, before.Inner.(optim.AdamState).Count.Int32s()[0]+1, adamCount, "step %d: inner stepped", i)
		} else {
			assert.Same(t, before.Inner.(optim.AdamState).Mu.(model).W, s.Inner.(optim.AdamState).Mu.(model).W, "step %d: inner kept", i)
			assert.Equal(t, make([]float32, 12), u.(model).W.Float32s(), "step %d: zero update", i)
		}
	}
	require.PanicsWithValue(t, "optim.ApplyIfFinite: maxConsecutiveErrors -1, want >= 0", func() { optim.ApplyIfFinite(optim.Adam(lr), -1) })
}

// Inside shard.Map, a NaN in one device's block makes every device skip
// when they count together through Psum.
func TestApplyIfFiniteInsideShardMap(t *testing.T) {
	mesh, params, grads := shardedSetup()
	w := grads.W.Float32s()
	w[30] = float32(math.NaN()) // in the last device's rows
	grads.W = tensor.FromFloat32(w, 8, 4)
	type in struct {
		P, G  wb
		State optim.State
	}
	tx := optim.ApplyIfFinite(optim.SGD(optim.Constant(0.1)), 1)
	step := shard.Map(mesh, byRank, byRank, func(c *shard.Ctx, x in) in {
		tx := optim.ApplyIfFinite(optim.SGD(optim.Constant(0.1)), 1, optim.ApplyIfFiniteOptions{Psum: c.Psum})
		p, s := optim.Step(tx, x.P, x.G, x.State)
		return in{P: p, G: x.G, State: s}
	})
	out := step(in{P: params, G: grads, State: tx.Init(params)})
	assert.Equal(t, params.W.Float32s(), shard.Gather(out.P.W).Float32s(), "every device skipped")
	assert.Equal(t, params.B.Float32s(), shard.Gather(out.P.B).Float32s())
	assert.False(t, shard.Gather(out.State.(optim.ApplyIfFiniteState).LastFinite).Bools()[0])
}

type adamHP struct {
	LR     optim.Schedule
	B1, B2 float64
	Eps    float32
	Steps  int // static
}

func adamFactory(h adamHP) optim.Transform {
	return optim.Adam(h.LR, optim.AdamOptions{B1: h.B1, B2: h.B2, Eps: float64(h.Eps)})
}

// InjectHyperparams is the inner optimizer, with its hyperparameters in the
// state: readable, settable between steps, saved by checkpoints.
func TestInjectHyperparams(t *testing.T) {
	params := newModel()
	sched := optim.Linear(0.1, 0.01, 4, 0)
	hp := adamHP{LR: sched, B1: 0.5, B2: 0.875, Eps: 1e-3, Steps: 7} // exact in float32
	opt := optim.InjectHyperparams(adamFactory, hp)
	plain := optim.Adam(sched, optim.AdamOptions{B1: 0.5, B2: 0.875, Eps: 1e-3})
	st, pst := opt.Init(params), plain.Init(params)
	s0 := st.(optim.InjectHyperparamsState[adamHP])
	assert.Equal(t, 0.5, s0.Hyperparams().B1)
	assert.InDelta(t, 0.1, s0.Hyperparams().LR(123), 1e-8, "the schedule's value at step 0")
	assert.Equal(t, 7, s0.Hyperparams().Steps, "static fields come from the transform")
	assert.ElementsMatch(t, []string{"LR", "B1", "B2", "Eps"}, keys(s0.Values))

	p, pp := params, params
	for step := range 3 {
		p, st = optim.Step(opt, p, gradsAt(step), st)
		pp, pst = optim.Step(plain, pp, gradsAt(step), pst)
		assert.InDelta(t, sched(step), st.(optim.InjectHyperparamsState[adamHP]).Hyperparams().LR(0), 1e-8, "step %d", step)
	}
	require.NoError(t, pytree.Diff(pp, p, 1e-6, 1e-7), "the same steps as the plain optimizer")

	// Change B1 and the learning rate's... B1 only (the LR is scheduled).
	s := st.(optim.InjectHyperparamsState[adamHP])
	h := s.Hyperparams()
	h.B1, h.LR = 0.25, optim.Constant(5) // the LR is ignored: it is scheduled
	st = s.WithHyperparams(h)
	assert.Equal(t, 0.25, st.(optim.InjectHyperparamsState[adamHP]).Hyperparams().B1)

	// Saved and restored, the state goes on as the one in memory.
	dir := t.TempDir()
	require.NoError(t, checkpoint.Save(dir, 3, st))
	back, err := checkpoint.Restore(dir, 3, opt.Init(params).(optim.InjectHyperparamsState[adamHP]), checkpoint.OnHost())
	require.NoError(t, err)
	assert.Equal(t, 0.25, back.Hyperparams().B1)
	assert.Equal(t, 7, back.Hyperparams().Steps)
	p1, _ := optim.Step(opt, p, gradsAt(3), st)
	p2, _ := optim.Step(opt, p, gradsAt(3), optim.State(back))

	// What B1 = 0.25 from step 3 on means, written with the plain
	// optimizer's state: Adam's moments with the new decay.
	ast := st.(optim.InjectHyperparamsState[adamHP]).Inner.(optim.AdamState)
	want, _ := optim.Step(optim.Adam(optim.Constant(sched(3)), optim.AdamOptions{B1: 0.25, B2: 0.875, Eps: 1e-3}), p, gradsAt(3), optim.State(ast))
	require.NoError(t, pytree.Diff(want, p1, 1e-6, 1e-7))
	require.NoError(t, pytree.Diff(p1, p2, 0, 0))

	require.PanicsWithValue(t, "optim.InjectHyperparams: hyperparameters are float64, want a struct", func() {
		optim.InjectHyperparams(func(float64) optim.Transform { return nil }, 1.0)
	})
}

func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// Lookahead against its definition as two loops: k fast SGD steps from the
// slow weights, then slow += α(fast - slow) and fast = slow.
func TestLookahead(t *testing.T) {
	const k, alpha, lr = 3, 0.5, 0.1
	params := newModel()
	opt := optim.Lookahead(optim.SGD(optim.Constant(lr)), k, alpha)
	lp := optim.NewLookaheadParams(params)
	st := opt.Init(lp)

	slow := map[string][]float64{"W": params.W.Float64s(), "B": params.B.Float64s()}
	fast := map[string][]float64{"W": params.W.Float64s(), "B": params.B.Float64s()}
	for step := range 2*k + 1 {
		g := gradsAt(step)
		lp, st = optim.Step(opt, lp, optim.LookaheadParams[model]{Fast: g}, st)
		for name, gv := range map[string][]float64{"W": g.W.Float64s(), "B": g.B.Float64s()} {
			for i := range gv {
				fast[name][i] -= lr * gv[i]
			}
			if (step+1)%k == 0 {
				for i := range gv {
					slow[name][i] += alpha * (fast[name][i] - slow[name][i])
					fast[name][i] = slow[name][i]
				}
			}
		}
		closeTo(t, fast["W"], lp.Fast.W.Float64s(), 1e-5, 1e-6, "step %d fast W", step)
		closeTo(t, slow["W"], lp.Slow.W.Float64s(), 1e-5, 1e-6, "step %d slow W", step)
		closeTo(t, slow["B"], lp.Slow.B.Float64s(), 1e-5, 1e-6, "step %d slow B", step)
		assert.Equal(t, int32((step+1)%k), st.(optim.LookaheadState).StepsSinceSync.Int32s()[0])
	}
	assert.Equal(t, []int{7, 9}, lp.Slow.Ids.Ints())
	assert.Equal(t, []string{"in", "out"}, lp.Slow.W.LogicalAxes())

	// Gradients of the fast model's own type work as well; ResetState
	// restarts the fast optimizer at every synchronisation.
	reset := optim.Lookahead(optim.Adam(optim.Constant(lr)), 2, alpha, optim.LookaheadOptions{ResetState: true})
	lp2 := optim.NewLookaheadParams(params)
	rs := reset.Init(lp2)
	var u any
	for step := range 2 {
		u, rs = reset.Update(gradsAt(step), rs, lp2)
		lp2 = optim.Apply(lp2, u)
	}
	assert.Equal(t, int32(0), rs.(optim.LookaheadState).FastState.(optim.AdamState).Count.Int32s()[0], "reset at the sync")
	require.PanicsWithValue(t, "optim.Lookahead: params are optim_test.model, want optim.LookaheadParams (see NewLookaheadParams)", func() {
		reset.Update(gradsAt(0), rs, params)
	})
	require.PanicsWithValue(t, "optim.Lookahead: syncPeriod 0, want >= 1", func() { optim.Lookahead(optim.Adam(optim.Constant(lr)), 0, 0.5) })
}

// ReduceOnPlateau against a sequence worked out by hand from optax's rule.
func TestReduceOnPlateau(t *testing.T) {
	params := newModel()
	opt := optim.Chain(optim.SGD(optim.Constant(1)), optim.ReduceOnPlateau(optim.ReduceOnPlateauOptions{
		Factor: 0.5, Patience: 2, Cooldown: 1, RTol: optim.Zero, ATol: 0.01, MinScale: 0.2}))
	st := opt.Init(params)
	for i, tc := range []struct {
		loss, scale float32
	}{
		{1.0, 1},     // best 1
		{0.995, 1},   // not 0.01 better: plateau 1
		{0.999, 0.5}, // plateau 2 = patience: halve, cooldown 1
		{0.999, 0.5}, // cooldown: plateau 0, cooldown 0
		{0.98, 0.5},  // improves: best 0.98
		{0.98, 0.5},  // plateau 1
		{0.98, 0.25}, // plateau 2: halve
		{0.98, 0.25}, // cooldown
		{0.98, 0.25}, // plateau 1
		{0.98, 0.2},  // plateau 2: halve, floored at MinScale
	} {
		var u any
		u, st = optim.UpdateExtra(opt, gradsAt(0), st, params, optim.Extra{Value: tensor.Scalar(tc.loss)})
		closeTo(t, tensor.MulScalar(gradsAt(0).W, -tc.scale).Float64s(), u.(model).W.Float64s(), 1e-6, 0, "step %d", i)
	}
	rs := st.(optim.ChainState)[1].(optim.ReduceOnPlateauState)
	assert.InDelta(t, 0.98, rs.BestValue.Item(), 1e-7)

	// AccumulationSize averages the losses: two steps of 3 and 1 count as
	// one value 2.
	acc := optim.ReduceOnPlateau(optim.ReduceOnPlateauOptions{AccumulationSize: 2})
	ast := acc.Init(params)
	_, ast = optim.UpdateExtra(acc, gradsAt(0), ast, params, optim.Extra{Value: tensor.Scalar(3)})
	assert.Equal(t, 3.0, ast.(optim.ReduceOnPlateauState).AvgValue.Item())
	assert.True(t, math.IsInf(ast.(optim.ReduceOnPlateauState).BestValue.Item(), 1))
	_, ast = optim.UpdateExtra(acc, gradsAt(0), ast, params, optim.Extra{Value: tensor.Scalar(1)})
	assert.Equal(t, 2.0, ast.(optim.ReduceOnPlateauState).BestValue.Item())
	assert.Equal(t, int32(0), ast.(optim.ReduceOnPlateauState).Count.Int32s()[0])

	require.PanicsWithValue(t, "optim.ReduceOnPlateau: Update needs the loss: call optim.UpdateExtra or optim.StepExtra with optim.Extra{Value: loss}",
		func() { opt.Update(gradsAt(0), st, params) })
	require.PanicsWithValue(t, "optim.ReduceOnPlateau: Factor 1 outside (0, 1)", func() { optim.ReduceOnPlateau(optim.ReduceOnPlateauOptions{Factor: 1}) })
	require.PanicsWithValue(t, "optim.ReduceOnPlateau: RTol and ATol are both 0: at least one must be positive",
		func() { optim.ReduceOnPlateau(optim.ReduceOnPlateauOptions{RTol: optim.Zero}) })
}

// Extra reaches a transform that reads the loss through MultiSteps, on the
// call that applies the inner transform.
func TestMultiStepsPassesExtra(t *testing.T) {
	params := newModel()
	opt := optim.MultiSteps(optim.Chain(optim.SGD(optim.Constant(1)), optim.ReduceOnPlateau(optim.ReduceOnPlateauOptions{Patience: 1, Factor: 0.5})), 2)
	st := opt.Init(params)
	var u any
	for i, loss := range []float32{1, 1, 1, 1} {
		u, st = optim.UpdateExtra(opt, gradsAt(0), st, params, optim.Extra{Value: tensor.Scalar(loss)})
		if i == 3 {
			// the second applied step saw no improvement: scale ½
			closeTo(t, tensor.MulScalar(gradsAt(0).W, -0.5).Float64s(), u.(model).W.Float64s(), 1e-6, 0, "scaled")
		}
	}
}
