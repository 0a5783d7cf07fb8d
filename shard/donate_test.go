package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Donating a Map output gives its storage back: the next psum and
// all_gather results reuse it (the allocator cache serves them), and the
// values stay right.
func TestDonatedMapOutputsAreReused(t *testing.T) {
	n := len(shard.Devices()) // every device, of every process under mpirun
	m := shard.NewMesh([]int{n}, []string{"d"})
	host := tensor.AsType(tensor.Arange(n*256), tensor.Float32)
	x := shard.Put(host, shard.NewSharding(m, shard.P("d")))
	psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
	gather := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.AllGatherInvariant(b, shard.Axes{"d"}, 0, true)
	})
	want := make([]float32, 256)
	for i := range want {
		for d := range n {
			want[i] += float32(d*256 + i)
		}
	}
	// sync.Pool may drop what it is given (always under -race, at random),
	// so reuse is asked of several rounds, not of each one. Reading a
	// replicated result on the host hands its block out (Gather), which
	// keeps it from the cache: the values are read after the rounds, from
	// results computed into recycled storage.
	hits := tensor.CacheHits()
	for range 20 {
		tensor.Donate(psum(x))
		tensor.Donate(gather(x))
	}
	assert.Greater(t, tensor.CacheHits(), hits, "no Map output was reused")
	assert.Equal(t, want, psum(x).Float32s())
	assert.Equal(t, host.Float32s(), gather(x).Float32s())
}

// Blocks handed out (shard.Blocks, Gather of a replicated array, a second
// header such as WithLogicalAxes) are never donated with the array: they
// keep their values.
func TestDonateKeepsSharedBlocks(t *testing.T) {
	m := shard.NewMesh([]int{4}, []string{"d"})
	x := shard.Put(tensor.AsType(tensor.Arange(4*64), tensor.Float32), shard.NewSharding(m, shard.P("d")))
	psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
	want := psum(x).Float32s()
	cases := []struct {
		name string
		keep func(y *tensor.Tensor) *tensor.Tensor // a value that must outlive Donate(y)
	}{
		{"Blocks", func(y *tensor.Tensor) *tensor.Tensor { return shard.Blocks(y)[0] }},
		{"Gather of a replicated array", shard.Gather},
		{"WithLogicalAxes", func(y *tensor.Tensor) *tensor.Tensor { return tensor.WithLogicalAxes(y, "x") }},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			y := psum(x)
			kept := tc.keep(y)
			tensor.Donate(y)
			assert.Panics(t, func() { y.Float32s() })
			for range 3 { // fresh results that could take the storage
				tensor.Donate(psum(x))
			}
			require.False(t, kept.IsDonated())
			assert.Equal(t, want, kept.Float32s())
		})
	}
}

// The blocks fn receives are valid only during the Map call, like JAX's
// tracers: one kept aside panics when used after the call, while the
// outputs and the inputs themselves stay valid. Map's own headers over an
// input's blocks do not keep them from the cache: donating the input after
// the call recycles its storage.
func TestMapInputBlocksEndWithTheCall(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"d"})
	host := tensor.AsType(tensor.Arange(2*512), tensor.Float32)
	s := shard.NewSharding(m, shard.P("d"))
	var kept *tensor.Tensor
	double := shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		if c.AxisIndex("d") == 0 {
			kept = b
		}
		return tensor.MulScalar(b, 2)
	})
	x := shard.Put(host, s)
	y := double(x)
	assert.PanicsWithValue(t, "Tensor.Float32s: operand "+kept.String()+" was donated (tensor.Donate)", func() { kept.Float32s() })
	assert.Equal(t, host.Float32s(), x.Float32s())
	want := tensor.MulScalar(host, 2).Float32s()
	assert.Equal(t, want, y.Float32s())

	// Donated inputs come back as the next inputs' (and outputs') storage.
	// The outputs are kept, so only the inputs can feed the cache.
	var outs []*tensor.Tensor
	hits := tensor.CacheHits()
	for range 20 {
		x := shard.Put(host, s)
		outs = append(outs, double(x))
		tensor.Donate(x)
	}
	// sync.Pool may drop what it is given (always under -race, at random):
	// two blocks per round could come back, half of them is asked.
	assert.GreaterOrEqual(t, tensor.CacheHits()-hits, int64(20), "donated inputs were not reused")
	for _, y := range outs {
		assert.Equal(t, want, y.Float32s())
	}
}

// Sharding propagation recycles what a step no longer needs: the blocks
// of placed intermediates (autodiff.RecycleIntermediates), the
// cotangents of the backward pass, the copies and sums an op's rule moves
// its operands into, and donated gradients. Steps computed into recycled
// storage give bit for bit the numbers of the first, which match the host,
// and the parameters keep their values.
func TestPropagationRecycles(t *testing.T) {
	m := shard.NewMesh([]int{2, 2}, []string{"dp", "tp"})
	r := rand.New(rand.NewPCG(7, 7))
	xh, w1h, w2h := randT(r, 8, 64), randT(r, 64, 128), randT(r, 128, 32)
	f := func(p [2]*tensor.Tensor, x *tensor.Tensor) *tensor.Tensor {
		h := tensor.Tanh(tensor.MatMul(x, p[0]))
		return tensor.Sum(tensor.Square(tensor.MatMul(h, p[1])))
	}
	wantL, wantG := autodiff.ValueAndGradWith(f)([2]*tensor.Tensor{w1h, w2h}, xh)
	cases := []struct {
		name   string
		w1, w2 shard.Spec
	}{
		// Weights gathered where used, gradients reduce-scattered.
		{"fsdp", shard.P([]string{"dp", "tp"}, nil), shard.P([]string{"dp", "tp"}, nil)},
		// Column- then row-parallel: a pending sum over tp.
		{"tp", shard.P(nil, "tp"), shard.P("tp", nil)},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x := shard.Put(xh, shard.NewSharding(m, shard.P("dp", nil)))
			p := [2]*tensor.Tensor{shard.Put(w1h, shard.NewSharding(m, c.w1)), shard.Put(w2h, shard.NewSharding(m, c.w2))}
			step := autodiff.ValueAndGradWith(f, autodiff.RecycleIntermediates())
			var first [][]float32
			hits := tensor.CacheHits()
			for i := range 10 {
				l, g := step(p, x)
				got := [][]float32{l.Float32s(), g[0].Float32s(), g[1].Float32s()}
				if i == 0 {
					first = got
					requireClose(t, wantL, l, 1e-5, "loss")
					requireClose(t, wantG[0], g[0], 1e-5, "gradient of w1")
					requireClose(t, wantG[1], g[1], 1e-5, "gradient of w2")
				} else {
					require.Equal(t, first, got, "step %d", i)
				}
				tensor.Donate(l, g[0], g[1])
			}
			assert.Greater(t, tensor.CacheHits()-hits, int64(10), "propagation recycled nothing")
			assert.Equal(t, w1h.Float32s(), p[0].Float32s())
			assert.Equal(t, w2h.Float32s(), p[1].Float32s())
			assert.Equal(t, xh.Float32s(), x.Float32s())
		})
	}
}

// A placed array with a second header (WithLogicalAxes) keeps its blocks
// until both headers are donated; then they are recycled.
func TestPlacedHeadersCountAsHolders(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"d"})
	host := tensor.AsType(tensor.Arange(2*512), tensor.Float32)
	s := shard.NewSharding(m, shard.P("d"))
	x := shard.Put(host, s)
	y := tensor.WithLogicalAxes(x, "n")
	tensor.Donate(x)
	for range 3 { // fresh arrays that could take the storage
		tensor.Donate(shard.Put(tensor.ZerosLike(host), s))
	}
	assert.Equal(t, host.Float32s(), y.Float32s())

	hits := tensor.CacheHits()
	for range 20 {
		x := shard.Put(host, s)
		y := tensor.WithLogicalAxes(x, "n")
		tensor.Donate(x, y)
	}
	assert.Greater(t, tensor.CacheHits()-hits, int64(20), "blocks of donated headers were not reused")
}

// A backward pass inside Map recycles the cotangents that pass through a
// reshape (and the blocks of a ragged all-to-all's cotangent), as on the
// host: both ops declare SyncVJP, so the pass donates a device's
// cotangent once their VJPs have consumed it. Before, every cotangent an
// attention layer's or a linear layer's reshapes consumed on a device
// took fresh storage each step (an examples/moe step on one device of a
// mesh allocated 67 MB against 2 MB on the host).
func TestMapBackwardRecyclesThroughReshape(t *testing.T) {
	const rows, cols = 256, 128 // 32 768 elements: the cache's free lists
	m := shard.NewMesh([]int{2}, []string{"d"})
	r := rand.New(rand.NewPCG(3, 4))
	xh, wh := randT(r, 2*rows, cols), randT(r, cols, cols)
	f := func(w, x *tensor.Tensor) *tensor.Tensor {
		h := tensor.Reshape(tensor.MatMul(x, w), rows, 8, cols/8)
		h = tensor.Reshape(tensor.Tanh(h), rows, cols)
		return tensor.Sum(tensor.Square(tensor.MatMul(h, w)))
	}
	x := shard.Put(xh, shard.NewSharding(m, shard.P("d")))
	w := shard.Put(wh, shard.NewSharding(m, shard.P()))
	step := shard.Map(m, shard.Specs{"X": shard.P("d"), "W": shard.P()}, shard.P(), func(c *shard.Ctx, in xw) *tensor.Tensor {
		// The gradient of this device's rows alone, summed below.
		g := autodiff.GradWith(f, autodiff.RecycleIntermediates())(c.Vary(in.W, "d"), in.X)
		s := c.Psum(g, "d")
		tensor.Donate(g)
		return s
	})
	want := step(xw{X: x, W: w}).Float32s()
	for range 3 {
		tensor.Donate(step(xw{X: x, W: w}))
	}
	before := tensor.ReadCacheStats().FreshBytes
	const steps = 5
	var got []float32
	for i := range steps {
		g := step(xw{X: x, W: w})
		if i == steps-1 {
			got = g.Float32s()
		}
		tensor.Donate(g)
	}
	perStep := (tensor.ReadCacheStats().FreshBytes - before) / steps
	t.Logf("%d fresh bytes a step", perStep)
	assert.Less(t, perStep, int64(rows*cols*4), "fresh bytes a step: a cotangent of the activations went to the collector")
	assert.Equal(t, want, got)
}
