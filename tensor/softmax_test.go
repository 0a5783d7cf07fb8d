package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// srtRefSoftmax computes softmax or log-softmax of each lane in float64
// the textbook way (shifted by the lane maximum).
func srtRefSoftmax(x *tensor.Tensor, axis int, log bool) []float64 {
	xv := x.Float64s()
	out := make([]float64, len(xv))
	for _, lane := range srtLaneOffsets(x.Shape(), axis) {
		m := math.Inf(-1)
		for _, o := range lane {
			m = math.Max(m, xv[o])
		}
		s := 0.0
		for _, o := range lane {
			s += math.Exp(xv[o] - m)
		}
		for _, o := range lane {
			if log {
				out[o] = xv[o] - m - math.Log(s)
			} else {
				out[o] = math.Exp(xv[o]-m) / s
			}
		}
	}
	return out
}

func TestSoftmaxHandWorked(t *testing.T) {
	// softmax([0, ln 2, ln 3]) = [1, 2, 3] / 6
	x := tensor.FromFloat64([]float64{0, math.Ln2, math.Log(3)})
	assert.InDeltaSlice(t, []float64{1.0 / 6, 2.0 / 6, 3.0 / 6}, tensor.Softmax(x, 0).Float64s(), 1e-7)
	assert.InDeltaSlice(t, []float64{math.Log(1.0 / 6), math.Log(2.0 / 6), math.Log(3.0 / 6)},
		tensor.LogSoftmax(x, -1).Float64s(), 1e-6)
	// Along axis 0 of a matrix: columns [0, ln 3] → [1/4, 3/4].
	m := tensor.FromFloat64([]float64{0, 5, math.Log(3), 5}, 2, 2)
	assert.InDeltaSlice(t, []float64{0.25, 0.5, 0.75, 0.5}, tensor.Softmax(m, 0).Float64s(), 1e-7)
}

func TestSoftmaxMatchesReference(t *testing.T) {
	shapes := [][]int{{9}, {4, 7}, {3, 4, 5}, {2, 1, 3}, {0, 3}, {3, 0}}
	for si, shape := range shapes {
		for axis := range shape {
			for _, log := range []bool{false, true} {
				t.Run(fmt.Sprintf("%v/%d/log=%v", shape, axis, log), func(t *testing.T) {
					x := tensor.MulScalar(srtRandn(uint64(si), shape...), 4)
					want := srtRefSoftmax(x, axis, log)
					var got *tensor.Tensor
					if log {
						got = tensor.LogSoftmax(x, axis)
					} else {
						got = tensor.Softmax(x, axis)
					}
					require.Equal(t, shape, got.Shape())
					g := got.Float64s()
					for i := range want {
						require.InDelta(t, want[i], g[i], 1e-6+1e-6*math.Abs(want[i]), "element %d", i)
					}
					// negative axis gives the same result
					if log {
						assert.Equal(t, got.Float32s(), tensor.LogSoftmax(x, axis-len(shape)).Float32s())
					} else {
						assert.Equal(t, got.Float32s(), tensor.Softmax(x, axis-len(shape)).Float32s())
					}
				})
			}
		}
	}
}

func TestSoftmaxLargeRowsInParallel(t *testing.T) {
	// Big enough to be split over goroutines, along the last axis and
	// along a middle one.
	x := tensor.MulScalar(srtRandn(8, 64, 3, 300), 3)
	for _, axis := range []int{2, 1} {
		want := srtRefSoftmax(x, axis, false)
		assert.InDeltaSlice(t, want, tensor.Softmax(x, axis).Float64s(), 1e-6)
		want = srtRefSoftmax(x, axis, true)
		assert.InDeltaSlice(t, want, tensor.LogSoftmax(x, axis).Float64s(), 1e-5)
	}
}

func TestSoftmaxStability(t *testing.T) {
	x := tensor.FromFloat32([]float32{1000, 0, -1000, 1000})
	assert.Equal(t, []float32{0.5, 0, 0, 0.5}, tensor.Softmax(x, 0).Float32s())
	ls := tensor.LogSoftmax(x, 0).Float32s()
	assert.InDeltaSlice(t, []float64{-math.Ln2, -1000 - math.Ln2, -2000 - math.Ln2, -math.Ln2}, srtF64(ls), 1e-3)

	y := tensor.FromFloat32([]float32{-1000, -1000})
	assert.Equal(t, []float32{0.5, 0.5}, tensor.Softmax(y, 0).Float32s())
	assert.InDeltaSlice(t, []float64{-math.Ln2, -math.Ln2}, srtF64(tensor.LogSoftmax(y, 0).Float32s()), 1e-6)

	// Rows sum to 1 for very spread logits.
	z := tensor.MulScalar(srtRandn(2, 16, 50), 300)
	s := tensor.Sum(tensor.Softmax(z, -1), -1).Float64s()
	for i, v := range s {
		assert.InDelta(t, 1, v, 1e-5, "row %d", i)
	}
	for _, v := range tensor.LogSoftmax(z, -1).Float32s() {
		assert.False(t, math.IsNaN(float64(v)) || math.IsInf(float64(v), 0))
	}
}

func srtF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, e := range v {
		out[i] = float64(e)
	}
	return out
}

func TestSoftmaxNonFinite(t *testing.T) {
	inf := float32(math.Inf(1))
	x := tensor.FromFloat32([]float32{
		0, float32(math.Inf(-1)), 0, // a -Inf logit gets probability 0
		srtNaN, 1, 2, // NaN poisons its row only
		-inf, -inf, -inf, // all -Inf: NaN, as in JAX
		1, 2, 3,
	}, 4, 3)
	sm := tensor.Softmax(x, 1).Float32s()
	assert.Equal(t, []float32{0.5, 0, 0.5}, sm[0:3])
	for _, v := range sm[3:9] {
		assert.True(t, math.IsNaN(float64(v)))
	}
	assert.InDeltaSlice(t, srtRefSoftmax(tensor.FromFloat32([]float32{1, 2, 3}), 0, false), srtF64(sm[9:]), 1e-7)
	ls := tensor.LogSoftmax(x, 1).Float32s()
	assert.Equal(t, []float32{-float32(math.Ln2), -inf, -float32(math.Ln2)}, ls[0:3])
	for _, v := range ls[3:9] {
		assert.True(t, math.IsNaN(float64(v)))
	}
	// The same along a leading axis (the strided kernel).
	xt := tensor.Transpose(x)
	srtSameFloats(t, tensor.Transpose(tensor.Softmax(x, 1)).Float32s(), tensor.Softmax(xt, 0).Float32s())
	srtSameFloats(t, tensor.Transpose(tensor.LogSoftmax(x, 1)).Float32s(), tensor.LogSoftmax(xt, 0).Float32s())
}

func TestSoftmaxVJP(t *testing.T) {
	for _, tt := range []struct {
		shape []int
		axis  int
	}{{[]int{5}, 0}, {[]int{3, 4}, 1}, {[]int{3, 4}, 0}, {[]int{2, 3, 4}, 1}, {[]int{2, 3, 4}, -1}} {
		for _, log := range []bool{false, true} {
			t.Run(fmt.Sprintf("%v/%d/log=%v", tt.shape, tt.axis, log), func(t *testing.T) {
				f := func(xs []*tensor.Tensor) *tensor.Tensor {
					if log {
						return tensor.LogSoftmax(xs[0], tt.axis)
					}
					return tensor.Softmax(xs[0], tt.axis)
				}
				x := srtRandn(11, tt.shape...)
				srtCheckGrad(t, f, x)
				// The fused backward op, differentiated with respect to its
				// output (y) and, through a nonlinear use of the result,
				// its incoming cotangent (g); and once more.
				srtCheckGrad(t, srtGradFn(f, 0), x)
				sq := func(xs []*tensor.Tensor) *tensor.Tensor {
					y := f(xs)
					return tensor.Mul(y, y)
				}
				srtCheckGrad(t, srtGradFn(sq, 0), x)
				srtCheckGrad(t, srtGradFn(srtGradFn(sq, 0), 0), x)
			})
		}
	}
}

func TestSoftmaxPanics(t *testing.T) {
	require.PanicsWithValue(t, "tensor.Softmax: i32[3]: not defined for int32", func() { tensor.Softmax(tensor.Zeros(tensor.Int32, 3), 0) })
	require.PanicsWithValue(t, "tensor.LogSoftmax: bool[3]: not defined for bool", func() { tensor.LogSoftmax(tensor.Zeros(tensor.Bool, 3), 0) })
	require.PanicsWithValue(t, "tensor.Softmax: axis 1 out of range for f32[3]", func() { tensor.Softmax(tensor.Zeros(tensor.Float32, 3), 1) })
	require.PanicsWithValue(t, "tensor.LogSoftmax: axis -1 out of range for f32[]", func() { tensor.LogSoftmax(tensor.Scalar(1), -1) })
}

func BenchmarkSoftmax(b *testing.B) {
	x := srtRandn(1, 1024, 1000)
	for _, log := range []bool{false, true} {
		name := "Softmax/1024x1000"
		f := tensor.Softmax
		if log {
			name, f = "LogSoftmax/1024x1000", tensor.LogSoftmax
		}
		b.Run(name, func(b *testing.B) {
			// Bytes moved: read the input, write the output.
			bytes := float64(2 * x.Bytes())
			for b.Loop() {
				f(x, -1)
			}
			srtReport(b, bytes)
		})
	}
	b.Run("Softmax/1024x1000/axis0", func(b *testing.B) {
		bytes := float64(2 * x.Bytes())
		for b.Loop() {
			tensor.Softmax(x, 0)
		}
		srtReport(b, bytes)
	})
	// The MoE router's rows: the probabilities over 8 experts, the gates
	// over the top 2, and the z-loss's LogSumExp of the logits.
	for _, c := range []int{2, 8} {
		r := srtRandn(2, 2048, c)
		b.Run(fmt.Sprintf("Softmax/2048x%d", c), func(b *testing.B) {
			bytes := float64(2 * r.Bytes())
			for b.Loop() {
				tensor.Softmax(r, -1)
			}
			srtReport(b, bytes)
		})
	}
	r := srtRandn(2, 2048, 8)
	b.Run("LogSumExp/2048x8", func(b *testing.B) {
		bytes := float64(r.Bytes())
		for b.Loop() {
			tensor.LogSumExp(r, -1)
		}
		srtReport(b, bytes)
	})
}
