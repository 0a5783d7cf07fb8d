package checkpoint

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// specCases are the ways a f32[16,8] weight can be laid on a dp=4,tp=2 mesh.
var specCases = []struct {
	name string
	spec shard.Spec
}{
	{"replicated", shard.P()},
	{"rows@dp", shard.P("dp", nil)},
	{"cols@tp", shard.P(nil, "tp")},
	{"rows@dp,cols@tp", shard.P("dp", "tp")},
	{"rows@tp,cols@dp", shard.P("tp", "dp")},
	{"rows@(dp,tp)", shard.P([]string{"dp", "tp"}, nil)},
	{"rows@(tp,dp)", shard.P([]string{"tp", "dp"}, nil)},
	{"cols@(tp,dp)", shard.P(nil, []string{"tp", "dp"})},
	{"rows@tp", shard.P("tp")},
}

func TestRoundTripSpecsAndMeshes(t *testing.T) {
	save := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	dp2 := shard.NewMesh([]int{2}, []string{"dp"})
	dp2tp1 := shard.NewMeshOn(shard.Devices()[5:7], []int{2, 1}, []string{"dp", "tp"})
	one := shard.NewMeshOn(shard.Devices()[3:4], []int{1}, []string{"dp"})
	targets := []struct {
		name string
		to   func(like state) Placement
		mesh *shard.Mesh // expected mesh of the W leaf, nil for host
	}{
		{"same sharding (AsLike)", func(state) Placement { return AsLike() }, save},
		{"host", func(state) Placement { return OnHost() }, nil},
		{"nil placement is host", func(state) Placement { return nil }, nil},
		{"dp=2 rows", func(state) Placement { return OnMesh(dp2, fitSpec(dp2, shard.P("dp"))) }, dp2},
		{"dp=2 cols", func(state) Placement {
			return OnMesh(dp2, shard.SpecFunc(func(_ pytree.Path, x *tensor.Tensor) shard.Spec {
				if x.Rank() == 2 && x.Dim(1)%2 == 0 {
					return shard.P(nil, "dp")
				}
				return shard.P()
			}))
		}, dp2},
		{"dp=2,tp=1 other devices", func(state) Placement { return OnMesh(dp2tp1, fitSpec(dp2tp1, shard.P("dp", "tp"))) }, dp2tp1},
		{"one device", func(state) Placement { return OnMesh(one, fitSpec(one, shard.P("dp"))) }, one},
	}
	for _, sc := range specCases {
		for _, chunk := range []int{64, defaultChunkBytes} {
			st := newState(1)
			st.Params.W = shard.Put(st.Params.W, shard.NewSharding(save, sc.spec))
			st.Opt.Mu.W = shard.Put(st.Opt.Mu.W, shard.NewSharding(save, shard.P("dp", "tp")))
			st.Params.Emb[0] = shard.Put(st.Params.Emb[0], shard.NewSharding(save, shard.P(nil, "tp")))
			st.Step = shard.Put(st.Step, shard.Replicated(save))
			dir := t.TempDir()
			require.NoError(t, Save(dir, 7, st, withChunkBytes(chunk)))
			for _, tg := range targets {
				t.Run(sc.name+"/"+tg.name, func(t *testing.T) {
					like := st
					if tg.name != "same sharding (AsLike)" {
						like = zerosLike(st)
					}
					got, err := Restore(dir, 7, like, tg.to(like))
					require.NoError(t, err)
					requireBitExact(t, st, got)
					require.Equal(t, "run", got.Name)
					s, ok := shard.ShardingOf(got.Params.W)
					if tg.mesh == nil {
						require.False(t, ok, "W should be a host tensor")
					} else {
						require.True(t, ok)
						require.Same(t, tg.mesh, s.Mesh())
					}
					if tg.name == "same sharding (AsLike)" {
						want, _ := shard.ShardingOf(st.Params.W)
						require.True(t, want.Equal(s), "%v vs %v", want, s)
					}
				})
			}
		}
	}
}

// fitSpec gives each leaf spec, cut to its rank, with dimensions that the
// mesh axes do not divide replicated.
func fitSpec(mesh *shard.Mesh, spec shard.Spec) shard.SpecFunc {
	return func(_ pytree.Path, x *tensor.Tensor) shard.Spec {
		out := shard.Spec{}
		for d := 0; d < min(len(spec), x.Rank()); d++ {
			if x.Dim(d)%mesh.AxisSize(spec[d]...) == 0 {
				out = append(out, spec[d])
			} else {
				out = append(out, nil)
			}
		}
		return out
	}
}

type edgeTree struct {
	Empty  *tensor.Tensor // f32[0,8]
	Scalar *tensor.Tensor // i32[]
	Mask   *tensor.Tensor // bool[8,4]
	Big    *tensor.Tensor // f32[1536,600]: several default chunks per block
	Named  *tensor.Tensor // f32[6,4] with logical axes
}

func TestRoundTripEdgeCases(t *testing.T) {
	save := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	k := tensor.NewKey(5).Split(3)
	tree := edgeTree{
		Empty:  shard.Put(tensor.Zeros(tensor.Float32, 0, 8), shard.NewSharding(save, shard.P("dp", "tp"))),
		Scalar: shard.Put(tensor.ScalarInt(-42), shard.Replicated(save)),
		Mask:   shard.Put(tensor.Less(tensor.Uniform(k[0], 8, 4), tensor.Scalar(0.5)), shard.NewSharding(save, shard.P("dp", "tp"))),
		Big:    shard.Put(tensor.Normal(k[1], 1536, 600), shard.NewSharding(save, shard.P("tp", nil))),
		Named:  tensor.WithLogicalAxes(tensor.Normal(k[2], 6, 4), "batch", "embed"),
	}
	dir := t.TempDir()
	require.NoError(t, Save(dir, 0, tree))
	three := shard.NewMeshOn(shard.Devices()[1:4], []int{3}, []string{"x"})
	for _, to := range []Placement{nil, AsLike(), OnMesh(three, fitSpec(three, shard.P("x")))} {
		got, err := Restore(dir, 0, zerosLike(tree), to)
		require.NoError(t, err)
		requireBitExact(t, tree, got)
		require.Equal(t, []string{"batch", "embed"}, got.Named.LogicalAxes(), "logical axes come from like")
	}
	m := loadManifest(t, dir, 0)
	require.Len(t, entryOf(m, "Scalar").Shards, 1, "a replicated tensor is written once")
	require.Len(t, entryOf(m, "Big").Shards, 2, "blocks replicated over dp are written once")
	require.Greater(t, len(entryOf(m, "Big").Shards[0].Chunks), 1)
	require.Equal(t, 8, len(entryOf(m, "Mask").Shards))
	// Each block is written by the first device holding it, in its own file.
	for _, s := range entryOf(m, "Big").Shards {
		require.Equal(t, fmt.Sprintf("d%04d.bin", s.Device), s.File)
	}
	require.Equal(t, []int{0, 1}, []int{entryOf(m, "Big").Shards[0].Device, entryOf(m, "Big").Shards[1].Device})
	require.Equal(t, -1, entryOf(m, "Named").Shards[0].Device)
}
