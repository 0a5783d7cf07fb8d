package tensor_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestBincountHandWorked(t *testing.T) {
	x := tensor.FromInt32([]int32{0, 1, 1, 3, 2, 1, 7})
	tests := []struct {
		name    string
		weights *tensor.Tensor
		length  int
		dtype   tensor.DType
		want    []float64
	}{
		{"counts, 7 dropped", nil, 5, tensor.Int32, []float64{1, 3, 1, 1, 0}},
		{"counts, all kept", nil, 8, tensor.Int32, []float64{1, 3, 1, 1, 0, 0, 0, 1}},
		{"counts, length 2", nil, 2, tensor.Int32, []float64{1, 3}},
		{"length 0", nil, 0, tensor.Int32, []float64{}},
		{"float weights", tensor.FromFloat32([]float32{0.5, 1, 2, 4, 8, 16, 32}), 4, tensor.Float32, []float64{0.5, 19, 8, 4}},
		{"int weights", tensor.FromInt32([]int32{1, -1, 2, 3, 5, 10, 100}), 4, tensor.Int32, []float64{1, 11, 5, 3}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tensor.Bincount(x, tt.weights, tt.length)
			assert.Equal(t, tt.dtype, got.DType())
			assert.Equal(t, []int{tt.length}, got.Shape())
			assert.Equal(t, tt.want, got.Float64s())
		})
	}
	empty := tensor.Bincount(tensor.FromInt32(nil), nil, 3)
	assert.Equal(t, []int32{0, 0, 0}, empty.Int32s())
}

func TestBincountMatchesLoop(t *testing.T) {
	for seed := uint64(0); seed < 10; seed++ {
		rng := rand.New(rand.NewPCG(seed, 5))
		n, length := rng.IntN(500), 1+rng.IntN(40)
		xs := make([]int32, n)
		ws := make([]float32, n)
		wantC := make([]int32, length)
		wantW := make([]float64, length)
		for i := range xs {
			xs[i] = int32(rng.IntN(length + 10)) // some dropped
			ws[i] = float32(rng.NormFloat64())
			if int(xs[i]) < length {
				wantC[xs[i]]++
				wantW[xs[i]] += float64(ws[i])
			}
		}
		x := tensor.FromInt32(xs)
		assert.Equal(t, wantC, tensor.Bincount(x, nil, length).Int32s(), "seed %d", seed)
		assert.InDeltaSlice(t, wantW, tensor.Bincount(x, tensor.FromFloat32(ws), length).Float64s(), 1e-5, "seed %d", seed)
	}
}

func TestBincountVJP(t *testing.T) {
	x := tensor.FromInt32([]int32{0, 4, 1, 1, 9, 3, 1, 0})
	for _, length := range []int{0, 3, 5} {
		t.Run(fmt.Sprint(length), func(t *testing.T) {
			w := srtRandn(uint64(length), 8)
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Bincount(xs[0], xs[1], length) }
			srtCheckGrad(t, f, x, w)
			// A nonlinear function of the counts: the second derivative
			// runs the gather's VJP (a bincount again).
			sq := func(xs []*tensor.Tensor) *tensor.Tensor {
				b := tensor.Bincount(xs[0], xs[1], length)
				return tensor.Mul(b, b)
			}
			srtCheckGrad(t, sq, x, w)
			srtCheckGrad(t, srtGradFn(sq, 1), x, w)
		})
	}
	// The gradient of weight i is the cotangent of bin x[i], 0 if dropped.
	g := srtGrad(func(w *tensor.Tensor) *tensor.Tensor { return tensor.Bincount(x, w, 5) },
		tensor.Ones(tensor.Float32, 8), tensor.FromFloat32([]float32{10, 20, 30, 40, 50}))
	assert.Equal(t, []float32{10, 50, 20, 20, 0, 40, 20, 10}, g.Float32s())
}

func TestBincountIntIsNotTraced(t *testing.T) {
	tr := tensor.NewTrace()
	x := tensor.FromInt32([]int32{1, 1})
	assert.False(t, tensor.Bincount(x, tr.Leaf(tensor.FromInt32([]int32{2, 3})), 2).IsTraced())
	assert.True(t, tensor.Bincount(x, tr.Leaf(tensor.FromFloat32([]float32{2, 3})), 2).IsTraced())
}

func TestBincountPanics(t *testing.T) {
	x := tensor.FromInt32([]int32{0, -2, 1})
	require.PanicsWithValue(t, "tensor.Bincount: i32[3]: negative value -2 at index 1", func() { tensor.Bincount(x, nil, 3) })
	require.PanicsWithValue(t, "tensor.Bincount: f32[3]: x must be int32", func() { tensor.Bincount(tensor.Zeros(tensor.Float32, 3), nil, 3) })
	require.PanicsWithValue(t, "tensor.Bincount: i32[2,2]: x must be 1-D", func() { tensor.Bincount(tensor.Zeros(tensor.Int32, 2, 2), nil, 3) })
	require.PanicsWithValue(t, "tensor.Bincount: i32[]: x must be 1-D", func() { tensor.Bincount(tensor.ScalarInt(1), nil, 3) })
	require.PanicsWithValue(t, "tensor.Bincount: i32[2]: length -1 < 0", func() { tensor.Bincount(tensor.Zeros(tensor.Int32, 2), nil, -1) })
	require.PanicsWithValue(t, "tensor.Bincount: i32[2], f32[3]: weights must have the shape of x",
		func() { tensor.Bincount(tensor.Zeros(tensor.Int32, 2), tensor.Zeros(tensor.Float32, 3), 4) })
	require.PanicsWithValue(t, "tensor.Bincount: i32[2], bool[2]: weights must be float32, float64 or int32",
		func() { tensor.Bincount(tensor.Zeros(tensor.Int32, 2), tensor.Zeros(tensor.Bool, 2), 4) })
}
