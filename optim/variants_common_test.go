package optim_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// newOptimizers returns one of each optimizer added after the first set
// (Adagrad ... Lars, Muon, schedule-free), configured so that every kind
// of state exists.
// psum is passed to those that take one (nil outside shard.Map).
func newOptimizers(psum optim.PsumFunc) map[string]optim.Transform {
	lr := optim.Constant(0.01)
	return map[string]optim.Transform{
		"Adagrad":   optim.Adagrad(lr),
		"Adadelta":  optim.Adadelta(lr, optim.AdadeltaOptions{WeightDecay: 0.1}),
		"AMSGrad":   optim.AMSGrad(lr),
		"Adamax":    optim.Adamax(lr),
		"AdamaxW":   optim.AdamaxW(lr, optim.AdamaxOptions{WeightDecay: 0.1}),
		"RAdam":     optim.RAdam(lr, optim.RAdamOptions{B2: 0.8, Threshold: 4}),
		"AdaBelief": optim.AdaBelief(lr, optim.AdaBeliefOptions{WeightDecay: 0.1}),
		"Yogi":      optim.Yogi(lr),
		"NAdam":     optim.NAdam(lr),
		"Novograd":  optim.Novograd(lr, optim.NovogradOptions{WeightDecay: 0.1, Psum: psum}),
		"Lamb":      optim.Lamb(lr, optim.LambOptions{WeightDecay: 0.1, Psum: psum}),
		"Lars":      optim.Lars(lr, optim.LarsOptions{WeightDecay: 0.1, Psum: psum}),
		"Muon":      optim.Muon(lr, optim.MuonOptions{WeightDecay: 0.1}),

		"ScheduleFreeAdamW": optim.ScheduleFreeAdamW(0.01, optim.ScheduleFreeAdamWOptions{WeightDecay: 0.1, WarmupSteps: 2}),
		"ScheduleFreeSGD":   optim.ScheduleFreeSGD(0.01),
	}
}

// Every state leaf that mirrors a parameter keeps its logical axes through
// updates; integer leaves get no state; a nil gradient gives a nil update
// and keeps that leaf's state.
func TestVariantsStateAndFrozenLeaves(t *testing.T) {
	for name, tx := range newOptimizers(nil) {
		t.Run(name, func(t *testing.T) {
			params := newModel()
			state := tx.Init(params)
			for step := range 3 {
				for path, x := range stateLeaves(state) {
					assert.NotContains(t, path, "Ids", "integer leaves get no state")
					switch {
					case x.DType() == tensor.Int32 || x.Rank() == 0:
						assert.Equal(t, 0, x.Rank(), "%s: counters and per-leaf scalars", path)
					case strings.HasSuffix(path, ".W"):
						assert.Equal(t, []string{"in", "out"}, x.LogicalAxes(), "step %d %s", step, path)
					case strings.HasSuffix(path, ".B"):
						assert.Equal(t, []string{"out"}, x.LogicalAxes(), "step %d %s", step, path)
					default:
						t.Errorf("unexpected state leaf %s %v", path, x)
					}
				}
				_, state = tx.Update(gradsAt(step), state, params)
			}
			before := stateLeaves(state)
			g := gradsAt(3)
			g.B = nil
			u, after := tx.Update(g, state, params)
			assert.Nil(t, u.(model).B)
			assert.Nil(t, u.(model).Ids)
			require.NotNil(t, u.(model).W)
			for path, x := range stateLeaves(after) {
				if strings.HasSuffix(path, ".B") {
					assert.Same(t, before[path], x, "state of the frozen leaf %s is unchanged", path)
				}
			}
			p := optim.Apply(params, u)
			assert.Same(t, params.B, p.B)
			assert.NotEqual(t, params.W.Float32s(), p.W.Float32s())
		})
	}
}

func TestVariantsRejectHalf(t *testing.T) {
	for name, tx := range newOptimizers(nil) {
		t.Run(name, func(t *testing.T) {
			params := halfModel{W: tensor.FromFloat32([]float32{1, 2, 3}, 3), E: tensor.Convert(tensor.Ones(tensor.Float32, 2, 3), tensor.BFloat16)}
			msg := func() (msg string) {
				defer func() { msg = fmt.Sprint(recover()) }()
				tx.Init(params)
				return ""
			}()
			op := "optim." + name
			assert.Equal(t, op+": parameter E is "+params.E.Type()+": optimizers update float32 parameters only; keep float32 master weights and compute in bfloat16 with nn.Policy, convert the leaf with tensor.Convert, or freeze it (optim.Masked and a nil gradient)", msg)
		})
	}
}

// A state saved by package checkpoint and restored continues exactly as
// the one kept in memory.
func TestVariantsCheckpoint(t *testing.T) {
	for name, tx := range newOptimizers(nil) {
		t.Run(name, func(t *testing.T) {
			params := newModel()
			state := tx.Init(params)
			for step := range 2 {
				params, state = optim.Step(tx, params, gradsAt(step), state)
			}
			dir := t.TempDir()
			require.NoError(t, checkpoint.Save(dir, 2, state))
			restored, err := checkpoint.Restore(dir, 2, tx.Init(params), checkpoint.OnHost())
			require.NoError(t, err)
			require.NoError(t, pytree.Diff(state, restored, 0, 0))
			p1, s1 := optim.Step(tx, params, gradsAt(2), state)
			p2, s2 := optim.Step(tx, params, gradsAt(2), restored)
			require.NoError(t, pytree.Diff(p1, p2, 0, 0))
			require.NoError(t, pytree.Diff(s1, s2, 0, 0))
		})
	}
}

// On parameters placed on a mesh (FSDP-style, by logical axes) every
// optimizer keeps its state placed like the parameters and computes what it
// computes on the host.
func TestVariantsOnPlacedParams(t *testing.T) {
	mesh, params, grads := shardedSetup()
	for name, tx := range newOptimizers(nil) {
		t.Run(name, func(t *testing.T) {
			hp, hs := params, tx.Init(params)
			pp := shard.FilterShard(params, mesh, byAxes)
			ps := tx.Init(pp)
			pg := shard.FilterShard(grads, mesh, byRank)
			for step := range 3 {
				g := wb{W: tensor.MulScalar(grads.W, float32(1+step)), B: grads.B}
				hp, hs = optim.Step(tx, hp, g, hs)
				pg := wb{W: tensor.MulScalar(pg.W, float32(1+step)), B: pg.B}
				pp, ps = optim.Step(tx, pp, pg, ps)
			}
			assert.Equal(t, "f32[8@dp,4]", pp.W.String())
			closeTo(t, hp.W.Float64s(), shard.Gather(pp.W).Float64s(), 1e-5, 1e-6, "W")
			closeTo(t, hp.B.Float64s(), shard.Gather(pp.B).Float64s(), 1e-5, 1e-6, "B")
			for path, x := range stateLeaves(ps) {
				if x.Rank() == 2 {
					s, ok := shard.ShardingOf(x)
					require.True(t, ok, "state leaf %s %v is not placed", path, x)
					assert.Equal(t, shard.P("dp", nil), s.Spec(), path)
				}
			}
			require.NoError(t, pytree.Diff(hs, gatherTree(ps), 1e-5, 1e-6))
		})
	}
}

// Inside shard.Map each device updates its blocks; Lamb, Lars and Novograd,
// whose norms span a whole parameter, psum them over the blocks with the
// Psum option and compute what they compute on the host.
func TestVariantsInsideShardMap(t *testing.T) {
	mesh, params, grads := shardedSetup()
	type in struct {
		P, G  wb
		State optim.State
	}
	for name, tx := range newOptimizers(nil) {
		if name == "Muon" {
			continue // refuses sharded blocks: TestMuonSharded
		}
		t.Run(name, func(t *testing.T) {
			hp, hs := params, tx.Init(params)
			for range 2 {
				hp, hs = optim.Step(tx, hp, grads, hs)
			}
			step := shard.Map(mesh, byRank, byRank, func(c *shard.Ctx, x in) in {
				tx := newOptimizers(c.Psum)[name]
				p, s := optim.Step(tx, x.P, x.G, x.State)
				return in{P: p, G: x.G, State: s}
			})
			x := in{P: shard.FilterShard(params, mesh, byAxes), G: grads, State: tx.Init(shard.FilterShard(params, mesh, byAxes))}
			for range 2 {
				x = step(x)
			}
			closeTo(t, hp.W.Float64s(), shard.Gather(x.P.W).Float64s(), 1e-5, 1e-6, "W")
			closeTo(t, hp.B.Float64s(), shard.Gather(x.P.B).Float64s(), 1e-5, 1e-6, "B")
			require.NoError(t, pytree.Diff(hs, gatherTree(x.State), 1e-5, 1e-6))
		})
	}
}

// gatherTree gathers every placed leaf of a tree to the host.
func gatherTree(tree any) any {
	return pytree.Map(tree, func(x *tensor.Tensor) *tensor.Tensor {
		if _, ok := shard.ShardingOf(x); ok {
			return shard.Gather(x)
		}
		return x
	})
}

// The elementwise optimizers split over a flat vector (ZeRO) and give what
// Step gives on the whole tree.
func TestVariantsZeRO(t *testing.T) {
	lr := optim.Constant(0.01)
	for name, tx := range map[string]optim.Transform{
		"Adagrad":   optim.Adagrad(lr),
		"Adadelta":  optim.Adadelta(lr, optim.AdadeltaOptions{WeightDecay: 0.1}),
		"AMSGrad":   optim.AMSGrad(lr),
		"Adamax":    optim.Adamax(lr),
		"AdamaxW":   optim.AdamaxW(lr),
		"RAdam":     optim.RAdam(lr, optim.RAdamOptions{B2: 0.8, Threshold: 4}),
		"AdaBelief": optim.AdaBelief(lr),
		"Yogi":      optim.Yogi(lr),
		"NAdam":     optim.NAdam(lr),
	} {
		t.Run(name, func(t *testing.T) {
			require.True(t, optim.Elementwise(tx))
			params := newZeroModel(0.5)
			z := optim.NewZeRO(tx, params, 4)
			states := make([]optim.State, 4)
			for i := range states {
				states[i] = z.InitShard()
			}
			want, wantState := params, tx.Init(params)
			got := params
			for step := range 4 {
				grads := newZeroModel(3 + float64(step))
				grads.Ids = nil
				want, wantState = optim.Step(tx, want, grads, wantState)
				got, states = zeroStep(z, got, grads, states)
			}
			closeTo(t, want.W.Float64s(), got.W.Float64s(), 1e-6, 1e-7, "W")
			closeTo(t, want.B.Float64s(), got.B.Float64s(), 1e-6, 1e-7, "B")
			closeTo(t, want.C.Float64s(), got.C.Float64s(), 1e-6, 1e-7, "C")
		})
	}
	// Norms over whole parameters, and masks, are not elementwise.
	for _, tx := range []optim.Transform{optim.Lamb(lr), optim.Lars(lr), optim.Novograd(lr),
		optim.AdaBelief(lr, optim.AdaBeliefOptions{WeightDecay: 0.1, WeightDecayMask: pytree.PathGlob("W")})} {
		assert.False(t, optim.Elementwise(tx))
		assert.Panics(t, func() { optim.NewZeRO(tx, newZeroModel(0), 2) })
	}
}
