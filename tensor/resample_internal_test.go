package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule cases of resample and its transpose: reflect padding and a
// linear interpolation (two weighted taps along two axes), and the
// transpose of the interpolation.
var _ = addRuleCases(
	ruleCase{name: "resampleOp", op: &resampleOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{PadWith(x[0], [][2]int{{1, 2}, {2, 1}}, PadReflect),
				Interpolate(Reshape(x[0], 1, 1, 3, 4), InterpSpec{Mode: InterpLinear, Size: []int{5, 7}})}
		}},
	ruleCase{name: "resampleTOp", op: &resampleTOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 1, 2, 5, 7)) },
		f: func(x []*Tensor) []*Tensor {
			p := interpParams("test", Zeros(Float32, 1, 2, 3, 4), InterpSpec{Mode: InterpLinear, Size: []int{5, 7}, AlignCorners: true})
			return []*Tensor{Apply(resampleTOp, p, x[0])}
		}},
)

// The rule cases of unfold and fold: 2-D blocks with padding, stride
// and dilation, and 1-D overlapping blocks.
var _ = addRuleCases(
	ruleCase{name: "unfoldOp", op: &unfoldOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 2, 4, 5)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{Unfold(x[0], UnfoldSpec{Kernel: []int{2, 3}, Padding: []int{1, 0}, Stride: []int{2, 1}, Dilation: []int{1, 2}}),
				Unfold(Reshape(x[0], 2, 4, 10), UnfoldSpec{Kernel: []int{3}})}
		}},
	ruleCase{name: "foldOp", op: &foldOp, in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 6, 12)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{Fold(x[0], []int{4, 5}, UnfoldSpec{Kernel: []int{1, 3}, Padding: []int{0, 1}, Stride: []int{1, 2}}),
				Fold(SliceAxis(x[0], 2, 0, 8), []int{10}, UnfoldSpec{Kernel: []int{3}})}
		}},
)

// TestResampleParallel: with the parallel threshold lowered, the kernels
// split the first axis over goroutines and give the serial bits, forward
// and transposed, weighted and gathered.
func TestResampleParallel(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	x := rF(r, 6, 3, 9, 7)
	x64 := Convert(x, Float64)
	lin := InterpSpec{Mode: InterpLinear, Size: []int{13, 4}}
	pads := [][2]int{{0, 0}, {1, 2}, {3, 1}, {2, 2}}
	g := rF(r, 6, 3, 13, 4)
	// Replicate padding of the first axis: its transpose adds several
	// result positions into one, and stays serial.
	rep := &resampleParams{axes: append([]axisMap{{n: 6, m: 9, k: 1, idx: []int{0, 0, 0, 1, 2, 3, 4, 5, 5}}}, identityMaps([]int{3, 9, 7})...)}
	gRep := rF(r, 9, 3, 9, 7)
	transpose := func(g *Tensor) *Tensor {
		return Apply(resampleTOp, interpParams("test", Zeros(g.dtype, 6, 3, 9, 7), lin), g)
	}
	run := func() []*Tensor {
		return []*Tensor{Interpolate(x, lin), Interpolate(x64, lin), PadWith(x, pads, PadReflect),
			PadWith(AsType(MulScalar(x, 9), Int32), pads, PadCircular), transpose(g), transpose(Convert(g, Float64)),
			PadWith(x, [][2]int{{2, 1}, {0, 0}, {0, 0}, {0, 0}}, PadReplicate), Apply(resampleTOp, rep, gRep)}
	}
	serial := run()
	old := parallelMinWork
	parallelMinWork = 16
	defer func() { parallelMinWork = old }()
	before := parallelSpawned.Load()
	par := run()
	require.Greater(t, parallelSpawned.Load(), before, "the parallel path ran")
	for i := range serial {
		require.Equal(t, serial[i].Float64s(), par[i].Float64s(), "result %d", i)
	}
}
