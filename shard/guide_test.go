package shard_test

// These tests run the programs of the JAX sharding guide
// (shared/reference/jax-sharding-zero-to-hero.md) written with gonox, and
// compare with the outputs the guide prints. JAX prints the varying axes
// of a block in its own order ({tp,dp}); gonox prints them in mesh order
// ({dp,tp}).

import (
	"iter"
	"maps"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func guideMesh() *shard.Mesh { return shard.NewMesh([]int{4, 2}, []string{"dp", "tp"}) }

// typeLog records the types fn saw on the first device of this process
// (device 0 in one process).
type typeLog struct {
	mu    sync.Mutex
	types []string
}

func (l *typeLog) add(c *shard.Ctx, xs ...*tensor.Tensor) {
	if c.Device() != shard.LocalDevices()[0] {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, x := range xs {
		l.types = append(l.types, x.Type())
	}
}

func ints(x *tensor.Tensor) []int { return shard.Gather(x).Ints() }

func arange2(r, c int) *tensor.Tensor { return tensor.Reshape(tensor.Arange(r*c), r, c) }

type pair struct{ A, B *tensor.Tensor }

func TestGuideRingShiftOneAxis(t *testing.T) {
	m := guideMesh()
	for _, tc := range []struct {
		name        string
		x           *tensor.Tensor
		spec        shard.Spec
		fwd, bwd    []int
		blockType   string
		globalShape string
	}{
		{"P(tp,dp)", arange2(2, 4), shard.P("tp", "dp"),
			[]int{3, 0, 1, 2, 7, 4, 5, 6}, []int{1, 2, 3, 0, 5, 6, 7, 4}, "int32[1,1]{dp,tp}", "int32[2@tp,4@dp]"},
		{"P(dp,tp)", arange2(4, 2), shard.P("dp", "tp"),
			[]int{6, 7, 0, 1, 2, 3, 4, 5}, []int{2, 3, 4, 5, 6, 7, 0, 1}, "int32[1,1]{dp,tp}", "int32[4@dp,2@tp]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log typeLog
			// ring_shift_simple_version: a ppermute over dp.
			simple := func(c *shard.Ctx, x *tensor.Tensor, offset int) *tensor.Tensor {
				n := c.AxisSize("dp")
				perm := make([][2]int, n)
				for i := range perm {
					perm[i] = [2]int{i, ((i+offset)%n + n) % n}
				}
				return c.Ppermute(x, shard.Axes{"dp"}, perm)
			}
			f := shard.Map(m, tc.spec, tc.spec, func(c *shard.Ctx, x *tensor.Tensor) pair {
				log.add(c, x)
				return pair{simple(c, x, 1), simple(c, x, -1)}
			})
			out := f(tc.x)
			assert.Equal(t, tc.fwd, ints(out.A))
			assert.Equal(t, tc.bwd, ints(out.B))
			assert.Equal(t, tc.globalShape, out.A.Type())
			assert.Equal(t, []string{tc.blockType}, log.types)
			// RingShift agrees on one axis.
			g := shard.Map(m, tc.spec, tc.spec, func(c *shard.Ctx, x *tensor.Tensor) pair {
				return pair{c.RingShift(x, shard.Axes{"dp"}, 1), c.RingShift(x, shard.Axes{"dp"}, -1)}
			})(tc.x)
			assert.Equal(t, tc.fwd, ints(g.A))
			assert.Equal(t, tc.bwd, ints(g.B))
		})
	}
}

func TestGuideRingShiftTwoAxes(t *testing.T) {
	m := guideMesh()
	spec := shard.P([]string{"tp", "dp"})
	y := tensor.Arange(8)
	// The simple version numbers devices by ppermute's (mesh-order) index,
	// which is not the order of the tp-major blocks: the guide's "Why?".
	simple := shard.Map(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) pair {
		n := c.AxisSize("tp", "dp")
		fwd := make([][2]int, n)
		bwd := make([][2]int, n)
		for i := range n {
			fwd[i] = [2]int{i, (i + 1) % n}
			bwd[i] = [2]int{i, (i - 1 + n) % n}
		}
		return pair{c.Ppermute(x, shard.Axes{"tp", "dp"}, fwd), c.Ppermute(x, shard.Axes{"tp", "dp"}, bwd)}
	})(y)
	assert.Equal(t, []int{7, 4, 5, 6, 0, 1, 2, 3}, ints(simple.A))
	assert.Equal(t, []int{4, 5, 6, 7, 1, 2, 3, 0}, ints(simple.B))
	assert.Equal(t, "int32[8@(tp,dp)]", simple.A.Type())

	ring := shard.Map(m, spec, spec, func(c *shard.Ctx, x *tensor.Tensor) pair {
		return pair{c.RingShift(x, shard.Axes{"tp", "dp"}, 1), c.RingShift(x, shard.Axes{"tp", "dp"}, -1)}
	})(y)
	assert.Equal(t, []int{7, 0, 1, 2, 3, 4, 5, 6}, ints(ring.A))
	assert.Equal(t, []int{1, 2, 3, 4, 5, 6, 7, 0}, ints(ring.B))
}

func TestGuideReduceScatter(t *testing.T) {
	m := guideMesh()
	for _, tc := range []struct {
		name      string
		x         *tensor.Tensor
		in, out   shard.Spec
		dim       int
		tiled     bool
		want      []int
		blockType string
		outType   string
	}{
		{"1d tiled", tensor.Arange(4), shard.P("tp"), shard.P("tp"), 0, true, []int{2, 4}, "int32[1]{tp}", "int32[2@tp]"},
		{"dim0 tiled", arange2(2, 4), shard.P(nil, "tp"), shard.P("tp"), 0, true, []int{2, 4, 10, 12}, "int32[1,2]{tp}", "int32[2@tp,2]"},
		{"dim1 tiled", arange2(2, 4), shard.P(nil, "tp"), shard.P(nil, "tp"), 1, true, []int{2, 4, 10, 12}, "int32[2,1]{tp}", "int32[2,2@tp]"},
		{"dim0 untiled", arange2(2, 4), shard.P(nil, "tp"), shard.P("tp"), 0, false, []int{2, 4, 10, 12}, "int32[2]{tp}", "int32[4@tp]"},
		{"dim1 tiled into dim0", arange2(2, 4), shard.P(nil, "tp"), shard.P("tp"), 1, true, []int{2, 10, 4, 12}, "int32[2,1]{tp}", "int32[4@tp,1]"},
		{"dim1 untiled", arange2(2, 4), shard.P(nil, "tp"), shard.P("tp"), 1, false, []int{2, 10, 4, 12}, "int32[2]{tp}", "int32[4@tp]"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var log typeLog
			y := shard.Map(m, tc.in, tc.out, func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
				r := c.PsumScatter(x, shard.Axes{"tp"}, tc.dim, tc.tiled)
				log.add(c, r)
				return r
			})(tc.x)
			assert.Equal(t, tc.want, ints(y))
			assert.Equal(t, tc.outType, y.Type())
			assert.Equal(t, []string{tc.blockType}, log.types)
		})
	}
}

func TestGuideAllGather(t *testing.T) {
	m := guideMesh()
	x := tensor.Arange(4)
	for _, tc := range []struct {
		name      string
		axis      int
		tiled     bool
		want      []int
		outType   string
		blockType string
	}{
		{"tiled", 0, true, []int{0, 1, 2, 3}, "int32[4]", "int32[4]"},
		{"stacked axis 0", 0, false, []int{0, 1, 2, 3}, "int32[2,2]", "int32[2,2]"},
		{"stacked axis 1", 1, false, []int{0, 2, 1, 3}, "int32[2,2]", "int32[2,2]"},
	} {
		t.Run("invariant "+tc.name, func(t *testing.T) {
			var log typeLog
			y := shard.Map(m, shard.P("tp"), shard.P(), func(c *shard.Ctx, w *tensor.Tensor) *tensor.Tensor {
				g := c.AllGatherInvariant(w, shard.Axes{"tp"}, tc.axis, tc.tiled)
				log.add(c, w, g)
				return g
			})(x)
			assert.Equal(t, tc.want, ints(y))
			assert.Equal(t, tc.outType, y.Type())
			assert.Equal(t, []string{"int32[2]{tp}", tc.blockType}, log.types)
		})
	}
	var log typeLog
	y := shard.Map(m, shard.P("tp"), shard.P("tp"), func(c *shard.Ctx, w *tensor.Tensor) *tensor.Tensor {
		g := c.AllGather(w, shard.Axes{"tp"}, 0, true)
		log.add(c, g)
		return g
	})(x)
	assert.Equal(t, []int{0, 1, 2, 3, 0, 1, 2, 3}, ints(y))
	assert.Equal(t, "int32[8@tp]", y.Type())
	assert.Equal(t, []string{"int32[4]{tp}"}, log.types)

	// A varying all-gather cannot be returned as replicated (check_vma).
	assert.PanicsWithValue(t,
		"shard.Map: output (root) i32[4]{tp} varies over tp but out spec PartitionSpec() does not shard it over tp; reduce it first (Psum, Pmean, AllGatherInvariant) or shard it",
		func() {
			shard.Map(m, shard.P("tp"), shard.P(), func(c *shard.Ctx, w *tensor.Tensor) *tensor.Tensor {
				return c.AllGather(w, shard.Axes{"tp"}, 0, true)
			})(x)
		})
}

func TestGuideAllReduce(t *testing.T) {
	m := guideMesh()
	var log typeLog
	x := tensor.Sub(tensor.Arange(8), tensor.ScalarInt(1))
	y := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		b = tensor.Add(b, tensor.ScalarInt(1))
		s := c.Psum(b, "dp")
		log.add(c, b, s)
		return s
	})(x)
	assert.Equal(t, []int{0 + 2 + 4 + 6, 1 + 3 + 5 + 7}, ints(y))
	assert.Equal(t, []string{"int32[2]{dp}", "int32[2]"}, log.types)

	// all_reduce_2d, with smaller matrices than the guide.
	r := rand.New(rand.NewPCG(1, 1))
	xm, wm := randT(r, 64, 32), randT(r, 32, 16)
	var log2 typeLog
	z := shard.Map(m, shard.Specs{"A": shard.P("dp"), "B": shard.P(nil, "tp")}, shard.P(), func(c *shard.Ctx, in pair) *tensor.Tensor {
		yb := tensor.MatMul(in.A, in.B)
		s := c.Psum(yb, "dp", "tp")
		log2.add(c, in.A, in.B, yb, s)
		return s
	})(pair{xm, wm})
	assert.Equal(t, []string{"float32[16,32]{dp}", "float32[32,8]{tp}", "float32[16,8]{dp,tp}", "float32[16,8]"}, log2.types)
	// Reference: the sum over dp and tp of the local products.
	want := tensor.Zeros(tensor.Float32, 16, 8)
	for i := 0; i < 4; i++ {
		for j := 0; j < 2; j++ {
			want = tensor.Add(want, tensor.MatMul(tensor.SliceAxis(xm, 0, i*16, i*16+16), tensor.SliceAxis(wm, 1, j*8, j*8+8)))
		}
	}
	assert.InDeltaSlice(t, want.Float64s(), shard.Gather(z).Float64s(), 1e-4)
}

func TestGuideAllToAll(t *testing.T) {
	m := guideMesh()
	x := tensor.Add(tensor.Mul(tensor.ScalarInt(10), tensor.Reshape(tensor.Arange(8), 8, 1)), tensor.Reshape(tensor.Arange(8), 1, 8))
	xt := tensor.Transpose(x).Ints()

	var log typeLog
	spec := shard.P([]string{"dp", "tp"})
	y := shard.Map(m, spec, spec, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		r := c.AllToAll(b, shard.Axes{"dp", "tp"}, 0, 0, true)
		log.add(c, b, r)
		return r
	})(tensor.Reshape(x, 64))
	assert.Equal(t, xt, ints(y))
	assert.Equal(t, "int32[64@(dp,tp)]", y.Type())
	assert.Equal(t, []string{"int32[8]{dp,tp}", "int32[8]{dp,tp}"}, log.types)

	var log2 typeLog
	z := shard.Map(m, shard.P("dp", "tp"), shard.P([]string{"tp", "dp"}), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		r := c.AllToAll(b, shard.Axes{"dp"}, 1, 0, false)
		log2.add(c, b, r)
		return tensor.Reshape(r, 1, -1)
	})(x)
	assert.Equal(t, xt, ints(z))
	assert.Equal(t, "int32[8@(tp,dp),8]", z.Type())
	assert.Equal(t, []string{"int32[2,4]{dp,tp}", "int32[4,2]{dp,tp}"}, log2.types)
}

func TestGuideMatMuls(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(2, 2))
	x, w := randT(r, 64, 128), randT(r, 128, 16)
	want := tensor.MatMul(x, w).Float64s()

	var log typeLog
	y := shard.Map(m, shard.Specs{"A": shard.P("dp", nil), "B": shard.P(nil, "tp")}, shard.P("dp", "tp"), func(c *shard.Ctx, in pair) *tensor.Tensor {
		yb := tensor.MatMul(in.A, in.B)
		log.add(c, in.A, in.B, yb)
		return yb
	})(pair{x, w})
	assert.Equal(t, "float32[64@dp,16@tp]", y.Type())
	assert.Equal(t, []string{"float32[16,128]{dp}", "float32[128,8]{tp}", "float32[16,8]{dp,tp}"}, log.types)
	assert.InDeltaSlice(t, want, shard.Gather(y).Float64s(), 1e-4)

	// Cases run in a fixed order: under mpirun every process must issue
	// the same Map calls in the same order (a map's order is random).
	fsdp := shard.Specs{"A": shard.P("dp", nil), "B": shard.P("dp", nil)}
	for name, f := range sortedCases(map[string]func(c *shard.Ctx, in pair) *tensor.Tensor{
		"all-gather": func(c *shard.Ctx, in pair) *tensor.Tensor {
			return shard.AllGatherMatMul(c, in.A, in.B, shard.Axes{"dp"})
		},
		"ring": func(c *shard.Ctx, in pair) *tensor.Tensor {
			return shard.AllGatherMatMulRing(c, in.A, in.B, shard.Axes{"dp"}, false)
		},
		"ring bidirectional": func(c *shard.Ctx, in pair) *tensor.Tensor {
			return shard.AllGatherMatMulRing(c, in.A, in.B, shard.Axes{"dp"}, true)
		},
	}) {
		t.Run("fsdp "+name, func(t *testing.T) {
			y := shard.Map(m, fsdp, shard.P("dp", nil), f)(pair{x, w})
			assert.InDeltaSlice(t, want, shard.Gather(y).Float64s(), 1e-4)
		})
	}
	rs := shard.Specs{"A": shard.P(nil, []string{"dp", "tp"}), "B": shard.P([]string{"dp", "tp"}, nil)}
	for name, f := range sortedCases(map[string]func(c *shard.Ctx, in pair) *tensor.Tensor{
		"psum-scatter": func(c *shard.Ctx, in pair) *tensor.Tensor {
			return shard.MatMulReduceScatter(c, in.A, in.B, shard.Axes{"dp", "tp"})
		},
		"ring": func(c *shard.Ctx, in pair) *tensor.Tensor {
			return shard.MatMulReduceScatterRing(c, in.A, in.B, shard.Axes{"dp", "tp"}, false)
		},
		"ring bidirectional": func(c *shard.Ctx, in pair) *tensor.Tensor {
			return shard.MatMulReduceScatterRing(c, in.A, in.B, shard.Axes{"dp", "tp"}, true)
		},
	}) {
		t.Run("reduce-scatter "+name, func(t *testing.T) {
			y := shard.Map(m, rs, shard.P([]string{"dp", "tp"}, nil), f)(pair{x, w})
			assert.Equal(t, "float32[64@(dp,tp),16]", y.Type())
			assert.InDeltaSlice(t, want, shard.Gather(y).Float64s(), 1e-4)
		})
	}
}

// sortedCases iterates over a map of cases in key order.
func sortedCases[V any](m map[string]V) iter.Seq2[string, V] {
	return func(yield func(string, V) bool) {
		for _, k := range slices.Sorted(maps.Keys(m)) {
			if !yield(k, m[k]) {
				return
			}
		}
	}
}

func randT(r *rand.Rand, shape ...int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return tensor.FromFloat32(d, shape...)
}

func TestExplicitShardingTypes(t *testing.T) {
	m := guideMesh()
	x := shard.Put(tensor.Zeros(tensor.Float32, 1024, 4096), shard.NewSharding(m, shard.P("dp", nil)))
	w := shard.Put(tensor.Zeros(tensor.Float32, 4096, 256), shard.NewSharding(m, shard.P(nil, "tp")))
	require.Equal(t, "float32[1024@dp,4096]", x.Type())
	require.Equal(t, "float32[4096,256@tp]", w.Type())
	v := shard.Put(tensor.Arange(8), shard.NewSharding(m, shard.P([]string{"dp", "tp"})))
	require.Equal(t, "int32[8@(dp,tp)]", v.Type())
	require.Equal(t, "i32[8@(dp,tp)]", v.String())
}

func TestLikeConstructorsKeepSharding(t *testing.T) {
	m := guideMesh()
	s := shard.NewSharding(m, shard.P("dp", "tp"))
	x := shard.Put(tensor.Ones(tensor.Float32, 8, 4), s)
	for _, z := range []*tensor.Tensor{tensor.ZerosLike(x), tensor.OnesLike(x), tensor.FullLike(x, 3)} {
		got, ok := shard.ShardingOf(z)
		require.True(t, ok, "%v", z)
		assert.True(t, got.Equal(s))
		assert.Equal(t, "float32[8@dp,4@tp]", z.Type())
	}
	assert.Equal(t, float64(3*32), tensor.Sum(shard.Gather(tensor.FullLike(x, 3))).Item())
}
