package tensor_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

var srtCumsums = []struct {
	name               string
	f                  func(x *tensor.Tensor, axis int) *tensor.Tensor
	reverse, exclusive bool
}{
	{"Cumsum", tensor.Cumsum, false, false},
	{"CumsumExclusive", tensor.CumsumExclusive, false, true},
	{"CumsumReverse", tensor.CumsumReverse, true, false},
}

func TestCumsumHandWorked(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4})
	assert.Equal(t, []float32{1, 3, 6, 10}, tensor.Cumsum(x, 0).Float32s())
	assert.Equal(t, []float32{0, 1, 3, 6}, tensor.CumsumExclusive(x, 0).Float32s())
	assert.Equal(t, []float32{10, 9, 7, 4}, tensor.CumsumReverse(x, -1).Float32s())

	// MoE group offsets: jnp.cumsum(jnp.pad(sizes[:-1], (1, 0))).
	sizes := tensor.FromInt32([]int32{3, 0, 2, 5})
	offsets := tensor.CumsumExclusive(sizes, 0)
	assert.Equal(t, tensor.Int32, offsets.DType())
	assert.Equal(t, []int32{0, 3, 3, 5}, offsets.Int32s())

	m := tensor.FromInt32([]int32{1, 2, 3, 4, 5, 6}, 2, 3)
	assert.Equal(t, []int32{1, 2, 3, 5, 7, 9}, tensor.Cumsum(m, 0).Int32s())
	assert.Equal(t, []int32{1, 3, 6, 4, 9, 15}, tensor.Cumsum(m, 1).Int32s())
	assert.Equal(t, []int32{0, 1, 3, 0, 4, 9}, tensor.CumsumExclusive(m, -1).Int32s())
	assert.Equal(t, []int32{5, 7, 9, 4, 5, 6}, tensor.CumsumReverse(m, 0).Int32s())
}

func TestCumsumMatchesLoop(t *testing.T) {
	shapes := [][]int{{7}, {3, 4}, {2, 3, 5}, {4, 0, 2}, {1, 1}}
	for si, shape := range shapes {
		for axis := range shape {
			for _, c := range srtCumsums {
				for _, dt := range []tensor.DType{tensor.Float32, tensor.Int32} {
					t.Run(fmt.Sprintf("%s/%v/%d/%v", c.name, shape, axis, dt), func(t *testing.T) {
						x := srtRandn(uint64(si), shape...)
						if dt == tensor.Int32 {
							x = tensor.AsType(tensor.MulScalar(x, 10), tensor.Int32)
						}
						xv := x.Float64s()
						want := make([]float64, len(xv))
						for _, lane := range srtLaneOffsets(shape, axis) {
							n := len(lane)
							for j := range lane {
								s := 0.0
								for i := 0; i < n; i++ {
									in := i <= j
									switch {
									case c.reverse && c.exclusive:
										in = i > j
									case c.reverse:
										in = i >= j
									case c.exclusive:
										in = i < j
									}
									if in {
										s += xv[lane[i]]
									}
								}
								want[lane[j]] = s
							}
						}
						got := c.f(x, axis)
						require.Equal(t, dt, got.DType())
						require.Equal(t, shape, got.Shape())
						assert.InDeltaSlice(t, want, got.Float64s(), 1e-5)
					})
				}
			}
		}
	}
}

func TestCumsumAccumulatesInFloat64(t *testing.T) {
	// 1e8 followed by ones: float32 running sums would stay at 1e8.
	d := make([]float32, 101)
	d[0] = 1e8
	for i := 1; i < len(d); i++ {
		d[i] = 1
	}
	got := tensor.Cumsum(tensor.FromFloat32(d), 0).Float32s()
	assert.Equal(t, float32(1e8+100), got[100])
}

func TestCumsumVJP(t *testing.T) {
	for _, c := range srtCumsums {
		for _, axis := range []int{0, 1, -1} {
			t.Run(fmt.Sprintf("%s/%d", c.name, axis), func(t *testing.T) {
				x := srtRandn(3, 3, 4, 2)
				f := func(xs []*tensor.Tensor) *tensor.Tensor { return c.f(xs[0], axis) }
				srtCheckGrad(t, f, x)
				sq := func(xs []*tensor.Tensor) *tensor.Tensor {
					y := c.f(xs[0], axis)
					return tensor.Mul(y, y)
				}
				srtCheckGrad(t, srtGradFn(sq, 0), x)
			})
		}
	}
	// The VJP of Cumsum is a reverse cumsum.
	g := srtGrad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.Cumsum(x, 0) },
		tensor.Zeros(tensor.Float32, 4), tensor.FromFloat32([]float32{1, 2, 3, 4}))
	assert.Equal(t, []float32{10, 9, 7, 4}, g.Float32s())
	g = srtGrad(func(x *tensor.Tensor) *tensor.Tensor { return tensor.CumsumExclusive(x, 0) },
		tensor.Zeros(tensor.Float32, 4), tensor.FromFloat32([]float32{1, 2, 3, 4}))
	assert.Equal(t, []float32{9, 7, 4, 0}, g.Float32s())
}

func TestCumsumPanics(t *testing.T) {
	require.PanicsWithValue(t, "tensor.Cumsum: bool[3]: not defined for bool; convert with tensor.AsType",
		func() { tensor.Cumsum(tensor.Zeros(tensor.Bool, 3), 0) })
	require.PanicsWithValue(t, "tensor.CumsumExclusive: axis 2 out of range for f32[2,2]",
		func() { tensor.CumsumExclusive(tensor.Zeros(tensor.Float32, 2, 2), 2) })
	require.PanicsWithValue(t, "tensor.CumsumReverse: axis 0 out of range for f32[]",
		func() { tensor.CumsumReverse(tensor.Scalar(1), 0) })
}
