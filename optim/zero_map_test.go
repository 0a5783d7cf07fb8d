package optim_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// zeroMapIn is what each device of a ZeRO data-parallel step gets: the
// replicated flat parameters, its own gradient (here: given per device, as
// a backward pass would compute it) and its shard of the optimizer state.
type zeroMapIn struct {
	P     *tensor.Tensor // f32[Len], replicated
	G     *tensor.Tensor // f32[n·Len], block i = device i's gradient
	State optim.AdamState
}

// TestZeROInMap runs the recipe of the ZeRO doc comment inside shard.Map
// (reduce-scatter, update of the own shard, all-gather) and checks it
// against optim.Step on the host with the summed gradient, bit for bit.
func TestZeROInMap(t *testing.T) {
	const n = 4
	tx := optim.AdamW(optim.Constant(0.01), optim.AdamWOptions{WeightDecay: 0.1})
	params := newZeroModel(0.5)
	z := optim.NewZeRO(tx, params, n)
	mesh := shard.NewMesh([]int{n}, []string{"dp"})
	spec := shard.SpecFunc(func(path pytree.Path, x *tensor.Tensor) shard.Spec {
		if path.String() == "P" || x.Rank() == 0 {
			return shard.P() // replicated parameters, the step count
		}
		return shard.P("dp") // gradients, moments
	})
	step := shard.Map(mesh, spec, spec, func(c *shard.Ctx, in zeroMapIn) zeroMapIn {
		i, s := c.AxisIndex("dp"), z.ShardLen()
		g := c.PsumScatter(in.G, shard.Axes{"dp"}, 0, true)        // f32[ShardLen], summed
		p := tensor.SliceAxis(in.P, 0, i*s, (i+1)*s)               // own parameters
		p2, st := z.UpdateShard(p, g, in.State)                    // own update
		all := c.AllGatherInvariant(p2, shard.Axes{"dp"}, 0, true) // f32[Len]
		return zeroMapIn{P: all, G: in.G, State: st.(optim.AdamState)}
	})

	in := zeroMapIn{P: z.Flatten(params), State: z.Init().(optim.AdamState)}
	want, wantState := params, tx.Init(params)
	for k := range 3 {
		// Device d's gradient: a different tree per device; their sum is
		// what the host step sees.
		var blocks []*tensor.Tensor
		var sum zeroModel
		for d := range n {
			g := newZeroModel(3 + float64(k) + 0.25*float64(d))
			g.Ids = nil
			blocks = append(blocks, z.Flatten(g))
			if d == 0 {
				sum = g
			} else {
				sum = zeroModel{W: tensor.Add(sum.W, g.W), B: tensor.Add(sum.B, g.B), C: tensor.Add(sum.C, g.C)}
			}
		}
		in.G = tensor.Concat(0, blocks...)
		in = step(in)
		want, wantState = optim.Step(tx, want, sum, wantState)
	}
	got := z.Unflatten(shard.Gather(in.P), params).(zeroModel)
	// The psum adds the devices' values in a different order than the
	// chain of Adds above, so compare within float32 rounding.
	require.InDeltaSlice(t, f64(want.W), f64(got.W), 1e-5)
	require.InDeltaSlice(t, f64(want.B), f64(got.B), 1e-5)
	require.InDeltaSlice(t, f64(want.C), f64(got.C), 1e-5)
	assert.NotEqual(t, params.W.Float32s(), got.W.Float32s())
	mu := in.State.Mu.(*tensor.Tensor)
	assert.Equal(t, []int{z.Len()}, mu.Shape(), "the moments stay split over dp, one shard per device")
}

func f64(x *tensor.Tensor) []float64 { return x.Float64s() }
