package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// clipModel has a gradient of global norm sqrt(12·1 + 4·4) = sqrt(28).
func clipGrads() model {
	return model{W: tensor.Ones(tensor.Float32, 3, 4), B: tensor.Full(tensor.Float32, 2, 4)}
}

func TestGlobalNorm(t *testing.T) {
	assert.InDelta(t, math.Sqrt(28), optim.GlobalNorm(clipGrads(), nil).Item(), 1e-6)
	// Integer and nil leaves do not count.
	g := clipGrads()
	g.Ids = tensor.FromInts([]int{100, 100}, 2)
	assert.InDelta(t, math.Sqrt(28), optim.GlobalNorm(g, nil).Item(), 1e-6)
	assert.Equal(t, 0.0, optim.GlobalNorm(model{}, nil).Item())
}

func TestClipByGlobalNorm(t *testing.T) {
	n := math.Sqrt(28)
	for _, tc := range []struct {
		name    string
		max     float64
		factor  float64
		same    bool // the gradients pass through untouched
		nanGrad bool
	}{
		{"below", 10, 1, true, false},
		{"just below", n + 1e-4, 1, true, false},
		{"at the threshold", n, 1, false, false},
		{"above", 1, 1 / n, false, false},
		{"far above", 1e-3, 1e-3 / n, false, false},
		{"NaN norm gives NaN", 1, math.NaN(), false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := clipGrads()
			if tc.nanGrad {
				g.B = vec(math.NaN(), 0, 0, 0)
			}
			tx := optim.ClipByGlobalNorm(tc.max)
			u, st := tx.Update(g, tx.Init(g), nil)
			assert.Equal(t, optim.EmptyState{}, st)
			um := u.(model)
			if tc.same {
				assert.Same(t, g.W, um.W)
				assert.Same(t, g.B, um.B)
				return
			}
			if tc.nanGrad {
				assert.True(t, math.IsNaN(um.W.Float64s()[0]))
				return
			}
			closeTo(t, tensor.MulScalar(g.W, float32(tc.factor)).Float64s(), um.W.Float64s(), 1e-6, 0, "W")
			closeTo(t, tensor.MulScalar(g.B, float32(tc.factor)).Float64s(), um.B.Float64s(), 1e-6, 0, "B")
			assert.InDelta(t, math.Min(tc.max, n), optim.GlobalNorm(u, nil).Item(), 1e-5*n)
		})
	}
}

func TestClipAndBlockRMS(t *testing.T) {
	u, _ := optim.Clip(0.5).Update(vec(-2, 0.25, 0.5, 3), optim.EmptyState{}, nil)
	assert.Equal(t, []float64{-0.5, 0.25, 0.5, 0.5}, u.(*tensor.Tensor).Float64s())

	// rms([3, 4]) = sqrt(12.5); clipped to rms 1, then left alone.
	u, _ = optim.ClipByBlockRMS(1).Update(vec(3, 4), optim.EmptyState{}, nil)
	closeTo(t, []float64{3 / math.Sqrt(12.5), 4 / math.Sqrt(12.5)}, u.(*tensor.Tensor).Float64s(), 1e-6, 0, "clipped")
	u, _ = optim.ClipByBlockRMS(10).Update(vec(3, 4), optim.EmptyState{}, nil)
	assert.Equal(t, []float64{3, 4}, u.(*tensor.Tensor).Float64s())
}

// wb is a model without integer leaves, for shard.Map.
type wb struct{ W, B *tensor.Tensor }

// byAxes shards a leaf over dp when its first logical axis is "in": the
// way sharding rules place parameters and, through the logical axes the
// optimizer state keeps, the state too (ZeRO/FSDP).
var byAxes = shard.SpecFunc(func(_ pytree.Path, x *tensor.Tensor) shard.Spec {
	if ax := x.LogicalAxes(); len(ax) > 0 && ax[0] == "in" {
		return shard.P("dp", nil)
	}
	return shard.P()
})

// byRank shards matrices over dp. shard.Map drops logical axes from the
// blocks and results it handles (reported to the shard package), so specs
// for Map's outputs cannot be read from the axes yet.
var byRank = shard.SpecFunc(func(_ pytree.Path, x *tensor.Tensor) shard.Spec {
	if x.Rank() == 2 {
		return shard.P("dp", nil)
	}
	return shard.P()
})

func shardedSetup() (mesh *shard.Mesh, params, grads wb) {
	mesh = shard.NewMesh([]int{4}, []string{"dp"})
	params = wb{
		W: tensor.WithLogicalAxes(f32(wave(32, 0.5), 8, 4), "in", "out"),
		B: tensor.WithLogicalAxes(f32(wave(4, 0.6), 4), "out"),
	}
	grads = wb{W: tensor.MulScalar(f32(wave(32, 1.5), 8, 4), 3), B: f32(wave(4, 2.5), 4)}
	return
}

func TestGlobalNormInsideShardMap(t *testing.T) {
	mesh, _, grads := shardedSetup()
	want := optim.GlobalNorm(grads, nil).Item()

	norm := shard.Map(mesh, byRank, shard.P(), func(c *shard.Ctx, g wb) *tensor.Tensor {
		return optim.GlobalNorm(g, c.Psum)
	})(grads)
	assert.InDelta(t, want, shard.Gather(norm).Item(), 1e-5)

	// The clipped updates equal those computed on the host.
	clip := optim.ClipByGlobalNorm(1, optim.ClipOptions{Psum: nil})
	hostU, _ := clip.Update(grads, clip.Init(grads), nil)
	u := shard.Map(mesh, byRank, byRank, func(c *shard.Ctx, g wb) wb {
		clip := optim.ClipByGlobalNorm(1, optim.ClipOptions{Psum: c.Psum})
		u, _ := clip.Update(g, clip.Init(g), nil)
		return u.(wb)
	})(grads)
	closeTo(t, hostU.(wb).W.Float64s(), shard.Gather(u.W).Float64s(), 1e-6, 1e-7, "W")
	closeTo(t, hostU.(wb).B.Float64s(), shard.Gather(u.B).Float64s(), 1e-6, 1e-7, "B")
}

// TestAdamInsideShardMap runs the optimizer the way sharded training does:
// parameters, gradients and optimizer state sharded alike (the state by the
// logical axes Init copied from the params), one Adam step per device on
// its blocks inside shard.Map, with the gradient clipped by the global norm.
// The result equals the same step on the host.
func TestAdamInsideShardMap(t *testing.T) {
	mesh, params, grads := shardedSetup()
	opt := optim.Chain(optim.ClipByGlobalNorm(1), optim.AdamW(optim.Constant(0.1), optim.AdamWOptions{WeightDecay: 0.1}))
	state := opt.Init(params)

	// On the host, two steps.
	hp, hs := params, state
	for range 2 {
		hp, hs = optim.Step(opt, hp, grads, hs)
	}

	type in struct {
		P, G  wb
		State optim.State
	}
	// On the host the state mirrors the params' logical axes, so the rules
	// that shard the params shard the state alike.
	for path, x := range stateLeaves(state) {
		spec, err := byAxes.SpecFor(nil, x)
		require.NoError(t, err)
		want := shard.P()
		if x.Rank() == 2 {
			want = shard.P("dp", nil)
		}
		assert.Equal(t, want, spec, path)
	}
	// Init on sharded params gives state sharded like them.
	sharded := shard.FilterShard(params, mesh, byAxes)
	shardedState := opt.Init(sharded)
	mu := shardedState.(optim.ChainState)[1].(optim.AdamState).Mu.(wb)
	assert.Equal(t, "f32[8@dp,4]", mu.W.String())
	assert.Equal(t, []string{"in", "out"}, mu.W.LogicalAxes())
	assert.Equal(t, "f32[4]", mu.B.String())

	step := shard.Map(mesh, byRank, byRank, func(c *shard.Ctx, x in) in {
		opt := optim.Chain(optim.ClipByGlobalNorm(1, optim.ClipOptions{Psum: c.Psum}),
			optim.AdamW(optim.Constant(0.1), optim.AdamWOptions{WeightDecay: 0.1}))
		p, s := optim.Step(opt, x.P, x.G, x.State)
		return in{P: p, G: x.G, State: s}
	})
	x := in{P: sharded, G: grads, State: shardedState}
	for range 2 {
		x = step(x)
	}
	assert.Equal(t, "f32[8@dp,4]", x.P.W.String())
	adamState := x.State.(optim.ChainState)[1].(optim.AdamState)
	assert.Equal(t, "f32[8@dp,4]", adamState.Mu.(wb).W.String(), "state is sharded like its parameter")
	closeTo(t, hp.W.Float64s(), shard.Gather(x.P.W).Float64s(), 1e-5, 1e-6, "W")
	closeTo(t, hp.B.Float64s(), shard.Gather(x.P.B).Float64s(), 1e-5, 1e-6, "B")
	hMu := hs.(optim.ChainState)[1].(optim.AdamState).Nu.(wb).W
	closeTo(t, hMu.Float64s(), shard.Gather(adamState.Nu.(wb).W).Float64s(), 1e-5, 1e-9, "Nu")
	require.Equal(t, int32(2), int32(shard.Gather(adamState.Count).Item()))
}
