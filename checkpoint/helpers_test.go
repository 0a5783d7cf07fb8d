package checkpoint

import (
	"math"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// state is a training state as a user would write it: a model, optimizer
// moments, counters as int32 tensors, a PRNG key, and static data.
type state struct {
	Params model
	Opt    struct{ Mu, Nu model }
	Step   *tensor.Tensor // i32[]
	Key    *tensor.Tensor // i32[2]
	Loader *tensor.Tensor // i32[]
	Name   string         // static: not saved
}

type model struct {
	W    *tensor.Tensor // f32[16,8]
	B    *tensor.Tensor // f32[8]
	Emb  []*tensor.Tensor
	Mask *tensor.Tensor // bool[4,4]
	Act  func(*tensor.Tensor) *tensor.Tensor
}

// special holds float32 values whose bits must survive: negative zero,
// infinities, a NaN with a payload, denormals.
var special = []float32{
	float32(math.Copysign(0, -1)), float32(math.Inf(1)), float32(math.Inf(-1)),
	math.Float32frombits(0x7fc01234), math.Float32frombits(0x00000001), math.MaxFloat32,
}

func newModel(seed uint64) model {
	k := tensor.NewKey(seed).Split(4)
	w := tensor.Normal(k[0], 16, 8).Float32s()
	copy(w[3:], special)
	mask := tensor.Less(tensor.Uniform(k[3], 4, 4), tensor.Scalar(0.5))
	return model{
		W:    tensor.WrapFloat32(w, 16, 8),
		B:    tensor.Normal(k[1], 8),
		Emb:  []*tensor.Tensor{tensor.Normal(k[2], 8, 4), tensor.RandInt(k[2], -1000, 1000, 4, 2)},
		Mask: mask,
		Act:  tensor.Relu,
	}
}

func newState(seed uint64) state {
	s := state{Params: newModel(seed), Name: "run"}
	s.Opt.Mu = newModel(seed + 100)
	s.Opt.Nu = newModel(seed + 200)
	s.Step = tensor.ScalarInt(int32(seed))
	s.Key = KeyTensor(tensor.NewKey(seed + 7))
	s.Loader = tensor.ScalarInt(int32(3 * seed))
	return s
}

// zerosLike returns a tree of the same structure with zero host leaves.
func zerosLike[T any](tree T) T {
	return pytree.Map(tree, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Zeros(x.DType(), x.Shape()...) })
}

// requireBitExact checks that two trees have the same paths, dtypes,
// shapes and element bits (NaN payloads and signed zeros included).
func requireBitExact(t testing.TB, want, got any) {
	t.Helper()
	wp, wl := pytree.LeavesWithPath(want)
	gp, gl := pytree.LeavesWithPath(got)
	require.Equal(t, len(wp), len(gp), "leaf count")
	for i := range wl {
		require.True(t, wp[i].Equal(gp[i]), "path %v vs %v", wp[i], gp[i])
		require.Equal(t, wl[i].DType(), gl[i].DType(), "dtype of %v", wp[i])
		require.Equal(t, wl[i].Shape(), gl[i].Shape(), "shape of %v", wp[i])
		require.Equal(t, leafBits(wl[i]), leafBits(gl[i]), "values of %v", wp[i])
	}
}

func leafBits(x *tensor.Tensor) []uint32 {
	x = shard.Gather(x)
	switch x.DType() {
	case tensor.Float32:
		out := make([]uint32, x.Size())
		for i, v := range x.RawFloat32() {
			out[i] = math.Float32bits(v)
		}
		return out
	case tensor.BFloat16, tensor.Float16:
		out := make([]uint32, x.Size())
		for i, v := range x.Bits16() {
			out[i] = uint32(v)
		}
		return out
	case tensor.Int32:
		out := make([]uint32, x.Size())
		for i, v := range x.RawInt32() {
			out[i] = uint32(v)
		}
		return out
	default:
		out := make([]uint32, x.Size())
		for i, v := range x.RawBool() {
			if v {
				out[i] = 1
			}
		}
		return out
	}
}

// listDir returns the names in dir, sorted.
func listDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	require.NoError(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	slices.Sort(out)
	return out
}

func stepDir(dir string, step int) string { return filepath.Join(dir, stepName(step)) }
