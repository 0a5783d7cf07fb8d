package shard_test

// Exhaustive tests of placement: Put, Gather, Reshard, Blocks and
// FilterShard against a reference computed here from the definition of a
// PartitionSpec, type notation, divisibility errors and device memory
// accounting.

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// meshCase describes a mesh over the first devices of the pool.
type meshCase struct {
	name  string
	sizes []int
	names []string
}

var meshCases = []meshCase{
	{"8", []int{8}, []string{"x"}},
	{"4x2", []int{4, 2}, []string{"dp", "tp"}},
	{"2x2x2", []int{2, 2, 2}, []string{"a", "b", "c"}},
}

func (c meshCase) mesh() *shard.Mesh { return shard.NewMesh(c.sizes, c.names) }

// allSpecs returns every spec of a rank-r tensor over the given mesh axes:
// each axis unused or on one dimension, in every order within a dimension.
// Trailing replicated dimensions are dropped, so no two specs are Equal.
func allSpecs(axes []string, rank int) []shard.Spec {
	var out []shard.Spec
	var rec func(dim int, used map[string]bool, cur shard.Spec)
	rec = func(dim int, used map[string]bool, cur shard.Spec) {
		if dim == rank {
			s := slices.Clone(cur)
			for len(s) > 0 && len(s[len(s)-1]) == 0 {
				s = s[:len(s)-1]
			}
			out = append(out, s)
			return
		}
		// Every ordered selection of unused axes for this dimension.
		var pick func(sel shard.DimSpec)
		pick = func(sel shard.DimSpec) {
			rec(dim+1, used, append(cur, slices.Clone(sel)))
			for _, a := range axes {
				if used[a] {
					continue
				}
				used[a] = true
				pick(append(sel, a))
				used[a] = false
			}
		}
		pick(nil)
	}
	rec(0, map[string]bool{}, nil)
	return out
}

func TestAllSpecsCount(t *testing.T) {
	// One axis, rank 1: P(), P(a). Two axes, rank 1: P(), P(a), P(b),
	// P((a,b)), P((b,a)). Two axes, rank 2: 11 (3 ways per axis, plus the
	// two orders when both share a dimension).
	assert.Len(t, allSpecs([]string{"a"}, 1), 2)
	assert.Len(t, allSpecs([]string{"a", "b"}, 1), 5)
	assert.Len(t, allSpecs([]string{"a", "b"}, 2), 11)
	seen := map[string]bool{}
	for _, s := range allSpecs([]string{"a", "b", "c"}, 3) {
		require.False(t, seen[s.String()], "%v twice", s)
		seen[s.String()] = true
	}
}

// expectedBlock computes the block of host that device dev (mesh index)
// holds under spec, from the definition: along each dimension the device's
// block index counts over the dimension's mesh axes, the first most
// significant.
func expectedBlock(m *shard.Mesh, spec shard.Spec, host *tensor.Tensor, dev int) *tensor.Tensor {
	shape := host.Shape()
	coords := m.Coords(dev)
	names, sizes := m.AxisNames(), m.Shape()
	lo := make([]int, len(shape))
	hi := make([]int, len(shape))
	for i, n := range shape {
		b, parts := 0, 1
		if i < len(spec) {
			for _, a := range spec[i] {
				k := slices.Index(names, a)
				b = b*sizes[k] + coords[k]
				parts *= sizes[k]
			}
		}
		lo[i], hi[i] = b*n/parts, (b+1)*n/parts
	}
	return tensor.Slice(host, lo, hi)
}

// expectedType prints the JAX type of host placed by spec.
func expectedType(spec shard.Spec, host *tensor.Tensor) string {
	dims := make([]string, host.Rank())
	for i, n := range host.Shape() {
		dims[i] = fmt.Sprint(n)
		if i < len(spec) && len(spec[i]) > 0 {
			if len(spec[i]) == 1 {
				dims[i] += "@" + spec[i][0]
			} else {
				dims[i] += "@(" + strings.Join(spec[i], ",") + ")"
			}
		}
	}
	return fmt.Sprintf("%s[%s]", dtypeName(host.DType()), strings.Join(dims, ","))
}

func dtypeName(dt tensor.DType) string {
	switch dt {
	case tensor.Float32:
		return "float32"
	case tensor.Int32:
		return "int32"
	default:
		return "bool"
	}
}

func values(x *tensor.Tensor) any {
	switch x.DType() {
	case tensor.Float32:
		return x.Float32s()
	case tensor.Int32:
		return x.Int32s()
	default:
		return x.Bools()
	}
}

// testData returns a tensor of the given dtype and shape whose elements
// are all different (for Bool, a pattern that is not periodic in blocks).
func testData(dt tensor.DType, shape ...int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	switch dt {
	case tensor.Float32:
		v := make([]float32, n)
		for i := range v {
			v[i] = float32(i) + 0.5
		}
		return tensor.FromFloat32(v, shape...)
	case tensor.Int32:
		v := make([]int32, n)
		for i := range v {
			v[i] = int32(i*7 - 3)
		}
		return tensor.FromInt32(v, shape...)
	default:
		v := make([]bool, n)
		for i := range v {
			v[i] = (i*i+i/3)%5 < 2
		}
		return tensor.FromBool(v, shape...)
	}
}

// requirePlaced checks that y is host placed on mesh m by spec: its
// sharding, type, every device's block, and the gathered whole.
func requirePlaced(t *testing.T, y *tensor.Tensor, m *shard.Mesh, spec shard.Spec, host *tensor.Tensor) {
	t.Helper()
	sh, ok := shard.ShardingOf(y)
	require.True(t, ok, "%v is not sharded", y)
	require.True(t, sh.Equal(shard.NewSharding(m, spec)), "sharding %v, want spec %v on %v", sh, spec, m)
	require.Equal(t, host.Shape(), y.Shape())
	require.Equal(t, host.DType(), y.DType())
	require.Equal(t, expectedType(spec, host), y.Type())
	blocks := shard.Blocks(y)
	require.Len(t, blocks, m.Size())
	for d, b := range blocks {
		want := expectedBlock(m, spec, host, d)
		require.Equal(t, want.Shape(), b.Shape(), "device %d block shape", d)
		require.Equal(t, values(want), values(b), "device %d (%v) block of %v", d, m.Coords(d), spec)
		require.Nil(t, b.Layout(), "device %d block is a host tensor", d)
	}
	require.Equal(t, values(host), values(shard.Gather(y)), "Gather of %v", spec)
}

// shapes used for each rank: every dimension divisible by up to 8 devices.
var rankShapes = map[int][]int{1: {16}, 2: {8, 16}, 3: {8, 8, 16}}

func TestPutGatherEverySpec(t *testing.T) {
	for _, mc := range meshCases {
		m := mc.mesh()
		for rank := 1; rank <= 3; rank++ {
			specs := allSpecs(mc.names, rank)
			t.Run(fmt.Sprintf("mesh=%s/rank=%d", mc.name, rank), func(t *testing.T) {
				for _, dt := range []tensor.DType{tensor.Float32, tensor.Int32, tensor.Bool} {
					host := testData(dt, rankShapes[rank]...)
					for _, spec := range specs {
						y := shard.Put(host, shard.NewSharding(m, spec))
						requirePlaced(t, y, m, spec, host)
						require.Nil(t, host.Layout(), "Put changed its input")
					}
				}
			})
		}
	}
}

func TestPutScalar(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := tensor.Scalar(2.5)
	y := shard.Put(x, shard.Replicated(m))
	assert.Equal(t, "float32[]", y.Type())
	for _, b := range shard.Blocks(y) {
		assert.Equal(t, []float32{2.5}, b.Float32s())
	}
	assert.Equal(t, []float32{2.5}, shard.Gather(y).Float32s())
}

func TestPutIsIdempotent(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	y := shard.Put(testData(tensor.Float32, 8, 16), shard.NewSharding(m, shard.P("dp")))
	// The same placement, written with a trailing None, is the same sharding.
	assert.Same(t, y, shard.Put(y, shard.NewSharding(m, shard.P("dp", nil))))
	assert.Same(t, y, shard.Reshard(y, shard.NewSharding(m, shard.P("dp"))))
}

func TestReshardEveryPair(t *testing.T) {
	cases := []struct {
		mesh  meshCase
		shape []int
	}{
		{meshCases[1], []int{8, 16}},
		{meshCases[2], []int{8, 8}},
	}
	for _, c := range cases {
		m := c.mesh.mesh()
		host := testData(tensor.Float32, c.shape...)
		specs := allSpecs(c.mesh.names, len(c.shape))
		t.Run(fmt.Sprintf("mesh=%s/%v/%d specs", c.mesh.name, c.shape, len(specs)), func(t *testing.T) {
			placed := make([]*tensor.Tensor, len(specs))
			for i, s := range specs {
				placed[i] = shard.Put(host, shard.NewSharding(m, s))
			}
			for i, from := range specs {
				for _, to := range specs {
					y := shard.Reshard(placed[i], shard.NewSharding(m, to))
					requirePlaced(t, y, m, to, host)
					// The source is untouched.
					sh, _ := shard.ShardingOf(placed[i])
					require.True(t, sh.Spec().Equal(from))
				}
			}
		})
	}
}

func TestReshardAcrossDisjointMeshes(t *testing.T) {
	devs := shard.Devices()
	require.GreaterOrEqual(t, len(devs), 8)
	teacherShapes := []meshCase{
		{"4", []int{4}, []string{"tp"}},
		{"2x2", []int{2, 2}, []string{"a", "b"}},
	}
	studentShapes := []meshCase{
		{"4", []int{4}, []string{"dp"}},
		{"2x2", []int{2, 2}, []string{"p", "q"}},
	}
	host := testData(tensor.Float32, 8, 4)
	for _, tc := range teacherShapes {
		for _, sc := range studentShapes {
			a := shard.NewMeshOn(devs[:4], tc.sizes, tc.names)
			b := shard.NewMeshOn(devs[4:8], sc.sizes, sc.names)
			require.False(t, a.Overlaps(b))
			t.Run(tc.name+"->"+sc.name, func(t *testing.T) {
				for _, sa := range allSpecs(tc.names, 2) {
					x := shard.Put(host, shard.NewSharding(a, sa))
					for _, sb := range allSpecs(sc.names, 2) {
						y := shard.Reshard(x, shard.NewSharding(b, sb))
						requirePlaced(t, y, b, sb, host)
						ids := []int{}
						sh, _ := shard.ShardingOf(y)
						for _, d := range sh.Mesh().Devices() {
							ids = append(ids, d.ID())
						}
						require.Equal(t, []int{4, 5, 6, 7}, ids)
						// And back.
						z := shard.Reshard(y, shard.NewSharding(a, sa))
						requirePlaced(t, z, a, sa, host)
					}
				}
			})
		}
	}
}

func TestGuideTypeNotation(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	shardDP := shard.NewSharding(m, shard.P("dp", nil))
	shardTP := shard.NewSharding(m, shard.P(nil, "tp"))
	x := shard.Put(tensor.Normal(tensor.NewKey(0), 1024, 4096), shardDP)
	assert.Equal(t, "float32[1024@dp,4096]", x.Type())
	assert.Equal(t, "f32[1024@dp,4096]", x.String())
	w := shard.Put(tensor.Normal(tensor.NewKey(1), 4096, 256), shardTP)
	assert.Equal(t, "float32[4096,256@tp]", w.Type())
	assert.Equal(t, "f32[4096,256@tp]", w.String())
	v := shard.Put(tensor.Arange(8), shard.NewSharding(m, shard.P([]string{"dp", "tp"})))
	assert.Equal(t, "int32[8@(dp,tp)]", v.Type())
	f := shard.Put(tensor.Zeros(tensor.Float32, 8), shard.NewSharding(m, shard.P([]string{"dp", "tp"})))
	assert.Equal(t, "float32[8@(dp,tp)]", f.Type())
	// The guide's reshards of y = x @ w.
	y := shard.Put(tensor.Zeros(tensor.Float32, 1024, 256), shard.NewSharding(m, shard.P("dp", "tp")))
	assert.Equal(t, "float32[1024@dp,256@tp]", y.Type())
	assert.Equal(t, "float32[1024,256]", shard.Reshard(y, shard.Replicated(m)).Type())
	assert.Equal(t, "float32[1024@tp,256@dp]", shard.Reshard(y, shard.NewSharding(m, shard.P("tp", "dp"))).Type())
	// NamedSharding and PartitionSpec print as JAX prints them.
	assert.Equal(t, "NamedSharding(mesh=Mesh('dp': 4, 'tp': 2), spec=PartitionSpec('dp', None))", shardDP.String())
	assert.Equal(t, "PartitionSpec(('dp', 'tp'),)", shard.P([]string{"dp", "tp"}).String())
	assert.Equal(t, "PartitionSpec()", shard.P().String())
}

func TestUnevenDimensions(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	require.PanicsWithValue(t, "shard.Put: f32[6,4]: dim 0 (6) is not divisible by dp=4", func() {
		shard.Put(tensor.Zeros(tensor.Float32, 6, 4), shard.NewSharding(m, shard.P("dp")))
	})
	require.PanicsWithValue(t, "shard.Put: f32[8,6]: dim 1 (6) is not divisible by (dp,tp)=8", func() {
		shard.Put(tensor.Zeros(tensor.Float32, 8, 6), shard.NewSharding(m, shard.P(nil, []string{"dp", "tp"})))
	})
	// Resharding a sharded tensor to an uneven layout names it the same way.
	x := shard.Put(tensor.Zeros(tensor.Float32, 6, 4), shard.NewSharding(m, shard.P("tp")))
	require.PanicsWithValue(t, "shard.Put: f32[6@tp,4]: dim 0 (6) is not divisible by dp=4", func() {
		shard.Reshard(x, shard.NewSharding(m, shard.P("dp")))
	})
	// FilterShard names the leaf.
	model := mlpModel()
	require.PanicsWithValue(t, "shard.FilterShard: Layers[1].B f32[4]: dim 0 (4) is not divisible by (dp,tp)=8", func() {
		shard.FilterShard(model, m, shard.Specs{"Layers[*].W": shard.P(), "Layers[*].B": shard.P([]string{"dp", "tp"})})
	})
}

// linear and mlp are a model in the Equinox style: tensors and static data.
type linear struct {
	W, B *tensor.Tensor
	Act  string
}

type mlp struct {
	Layers []linear
	Scale  float64
}

// mlpModel returns an MLP 16 -> 32 -> 4 with logical axis names on its
// parameters, as nn constructors set them.
func mlpModel() mlp {
	k := tensor.NewKey(7)
	ks := k.Split(4)
	return mlp{
		Layers: []linear{
			{W: tensor.WithLogicalAxes(tensor.Normal(ks[0], 16, 32), "embed", "mlp"),
				B: tensor.WithLogicalAxes(tensor.Normal(ks[1], 32), "mlp"), Act: "relu"},
			{W: tensor.WithLogicalAxes(tensor.Normal(ks[2], 32, 4), "mlp", "embed"),
				B: tensor.WithLogicalAxes(tensor.Normal(ks[3], 4), "embed"), Act: "none"},
		},
		Scale: 0.5,
	}
}

func specOf(t *testing.T, x *tensor.Tensor) shard.Spec {
	t.Helper()
	s, ok := shard.ShardingOf(x)
	require.True(t, ok, "%v is not sharded", x)
	return s.Spec()
}

func TestFilterShardSingleSpec(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	model := mlpModel()
	for _, spec := range []shard.Spec{shard.P(), shard.P("tp")} {
		got := shard.FilterShard(model, m, spec)
		paths, leaves := pytree.LeavesWithPath(got)
		_, hosts := pytree.LeavesWithPath(model)
		require.Len(t, leaves, 4)
		for i, x := range leaves {
			requirePlaced(t, x, m, spec, hosts[i])
			assert.Equal(t, hosts[i].LogicalAxes(), x.LogicalAxes(), "%v keeps its logical axes", paths[i])
		}
		// Static data is kept and the input is untouched.
		assert.Equal(t, "relu", got.Layers[0].Act)
		assert.Equal(t, 0.5, got.Scale)
		assert.Nil(t, model.Layers[0].W.Layout())
	}
}

func TestFilterShardSpecsPrefixTree(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	model := mlpModel()
	specs := shard.Specs{
		"Layers[*].W": shard.P(nil, "tp"),
		"Layers[0]":   shard.P("tp"), // Layers[0].B: the longest matching key is this one
		"":            shard.P(),
	}
	got := shard.FilterShard(model, m, specs)
	assert.Equal(t, shard.P(nil, "tp"), specOf(t, got.Layers[0].W))
	assert.Equal(t, shard.P("tp"), specOf(t, got.Layers[0].B))
	assert.Equal(t, shard.P(nil, "tp"), specOf(t, got.Layers[1].W))
	assert.True(t, specOf(t, got.Layers[1].B).Equal(shard.P()))
	requirePlaced(t, got.Layers[1].W, m, shard.P(nil, "tp"), model.Layers[1].W)
	assert.Equal(t,
		"mlp{Layers: [linear{W: f32[16,32@tp], B: f32[32@tp], Act: \"relu\"}, linear{W: f32[32,4@tp], B: f32[4], Act: \"none\"}], Scale: 0.5}",
		strings.Join(strings.Fields(pytree.FormatWidth(got, 1000)), " "))

	// Resharding an already placed model moves only the leaves that change.
	again := shard.FilterShard(got, m, specs)
	assert.Same(t, got.Layers[0].W, again.Layers[0].W)

	// A leaf no key matches is an error naming it.
	assert.PanicsWithValue(t, `shard.FilterShard: no spec for "Layers[0].B" (keys: "Layers[*].W")`, func() {
		shard.FilterShard(model, m, shard.Specs{"Layers[*].W": shard.P()})
	})
}

// waitMemory polls until every device of devs reports want bytes, running
// the garbage collector, or fails after a deadline: blocks are released by
// cleanups that run asynchronously after a collection.
func waitMemory(t *testing.T, devs []*shard.Device, want []int64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	var got []int64
	for {
		got = memory(devs)
		if slices.Equal(got, want) {
			return
		}
		if time.Now().After(deadline) {
			break
		}
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("device memory %v, want %v", got, want)
}

func memory(devs []*shard.Device) []int64 {
	out := make([]int64, len(devs))
	for i, d := range devs {
		out[i] = d.MemoryBytes()
	}
	return out
}

// settleMemory collects garbage until device memory stops changing, so that
// blocks left by earlier tests do not disturb a measurement.
func settleMemory(t *testing.T) []int64 {
	t.Helper()
	devs := shard.Devices()
	prev := memory(devs)
	stable := 0
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
		cur := memory(devs)
		if slices.Equal(cur, prev) {
			stable++
			if stable == 3 {
				return cur
			}
		} else {
			stable = 0
		}
		prev = cur
	}
	t.Fatal("device memory did not settle")
	return nil
}

func TestDeviceMemoryAccounting(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	devs := shard.Devices()
	const rows, cols = 64, 32 // 8 KiB of float32
	total := int64(rows * cols * 4)
	cases := []struct {
		spec  shard.Spec
		bytes int64 // per device
	}{
		{shard.P(), total},
		{shard.P("dp"), total / 4},
		{shard.P(nil, "tp"), total / 2},
		{shard.P("dp", "tp"), total / 8},
		{shard.P([]string{"dp", "tp"}), total / 8},
		{shard.P("tp", "dp"), total / 8},
	}
	for _, c := range cases {
		t.Run(c.spec.String(), func(t *testing.T) {
			base := settleMemory(t)
			x := shard.Put(testData(tensor.Float32, rows, cols), shard.NewSharding(m, c.spec))
			want := slices.Clone(base)
			for i := range m.Size() {
				want[i] += c.bytes
			}
			assert.Equal(t, want, memory(devs), "after Put")
			runtime.KeepAlive(x)
			x = nil
			waitMemory(t, devs, base)
		})
	}
}

func TestDeviceMemoryAcrossMeshes(t *testing.T) {
	devs := shard.Devices()
	a := shard.NewMeshOn(devs[:4], []int{4}, []string{"tp"})
	b := shard.NewMeshOn(devs[4:8], []int{2, 2}, []string{"p", "q"})
	base := settleMemory(t)
	x := shard.Put(testData(tensor.Float32, 16, 16), shard.NewSharding(a, shard.P("tp"))) // 1 KiB
	y := shard.Reshard(x, shard.NewSharding(b, shard.P("p", "q")))
	want := slices.Clone(base)
	for i := range 4 {
		want[i] += 256
		want[4+i] += 256
	}
	assert.Equal(t, want, memory(devs))
	runtime.KeepAlive(x)
	x = nil
	for i := range 4 {
		want[i] -= 256
	}
	waitMemory(t, devs, want)
	runtime.KeepAlive(y)
	y = nil
	waitMemory(t, devs, base)
}

// A Map output block that shares storage with an already-placed input
// block (fn returns its input) is not charged to the device a second time:
// once the input is dropped, the device reports the bytes it holds once.
func TestDeviceMemoryMapOutputSharingInput(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	devs := shard.Devices()
	base := settleMemory(t)
	x := shard.Put(testData(tensor.Float32, 64, 32), shard.NewSharding(m, shard.P("dp"))) // 2 KiB per device
	identity := shard.Map(m, shard.P("dp"), shard.P("dp"), func(_ *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return b })
	y := identity(x)
	runtime.KeepAlive(x)
	x = nil
	want := slices.Clone(base)
	for i := range m.Size() {
		want[i] += 2048
	}
	waitMemory(t, devs, want) // y holds one 2048-byte block per device
	runtime.KeepAlive(y)
}

// The error for a leaf no Specs key matches lists the keys in map order,
// so the message changes from run to run.
func TestSpecsNoMatchMessageIsDeterministic(t *testing.T) {
	specs := shard.Specs{"A": shard.P(), "B": shard.P(), "C": shard.P(), "D": shard.P()}
	seen := map[string]bool{}
	for range 50 {
		_, err := specs.SpecFor(pytree.MustParsePath("E"), tensor.Zeros(tensor.Float32, 2))
		require.Error(t, err)
		seen[err.Error()] = true
	}
	assert.Len(t, seen, 1, "messages: %v", seen)
	assert.True(t, seen[`no spec for "E" (keys: "A", "B", "C", "D")`])
}
