package data

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestStandardScaler(t *testing.T) {
	// Two features, hand-worked: column 0 = 1,2,3,6 (mean 3, var (4+1+0+9)/4
	// = 3.5), column 1 constant 5 (std forced to 1).
	x := tensor.FromFloat32([]float32{1, 5, 2, 5, 3, 5, 6, 5}, 4, 2)
	s := FitStandardScaler(x)
	assert.Equal(t, []int{2}, s.Mean.Shape())
	assert.InDeltaSlice(t, []float32{3, 5}, s.Mean.Float32s(), 1e-6)
	assert.InDeltaSlice(t, []float32{float32(math.Sqrt(3.5)), 1}, s.Std.Float32s(), 1e-6)
	got := s.Transform(x).Float32s()
	sd := math.Sqrt(3.5)
	want := []float64{-2 / sd, 0, -1 / sd, 0, 0, 0, 3 / sd, 0}
	for i := range want {
		assert.InDelta(t, want[i], got[i], 1e-6, "element %d", i)
	}

	// A scalar feature per example keeps a scalar mean.
	s1 := FitStandardScaler(tensor.FromFloat32([]float32{2, 4}))
	assert.Equal(t, 0, s1.Mean.Rank())
	assert.InDelta(t, 3, s1.Mean.Item(), 0)
	assert.InDelta(t, 1, s1.Std.Item(), 0)
}

func TestStandardizeUsesTrainOnly(t *testing.T) {
	// f32[N,2,2] features; the test split has a very different distribution.
	train := FromTensors(tensor.Normal(tensor.NewKey(1), 500, 2, 2), tensor.Zeros(tensor.Int32, 500))
	test := FromTensors(tensor.AddScalar(tensor.MulScalar(tensor.Normal(tensor.NewKey(2), 100, 2, 2), 10), 50), tensor.Zeros(tensor.Int32, 100))
	trS, teS, s := Standardize(train, test)
	assert.Equal(t, []int{2, 2}, s.Mean.Shape())
	// Train comes out standardised.
	m := tensor.Mean(trS.X, 0).Float32s()
	v := tensor.Mean(tensor.Square(trS.X), 0).Float32s()
	for i := range m {
		assert.InDelta(t, 0, m[i], 1e-5)
		assert.InDelta(t, 1, v[i], 1e-4)
	}
	// Test is scaled by train's statistics: its mean ends up near
	// (50 - mean_train)/std_train, far from 0; a scaler fitted on test would
	// have given 0.
	mt := tensor.Mean(teS.X, 0).Float32s()
	ref := s.Transform(test.X).Float32s()
	assert.Equal(t, ref, teS.X.Float32s())
	for i := range mt {
		assert.Greater(t, mt[i], float32(20))
	}
	assert.Same(t, train.Y, trS.Y)
	_, none, _ := Standardize(train, nil)
	assert.Nil(t, none)
}

func TestMinMaxScaler(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 7, 3, 7, 5, 7}, 3, 2)
	s := FitMinMaxScaler(x)
	assert.Equal(t, []float32{1, 7}, s.Min.Float32s())
	assert.Equal(t, []float32{0.25, 1}, s.Scale.Float32s())
	assert.Equal(t, []float32{0, 0, 0.5, 0, 1, 0}, s.Transform(x).Float32s())

	train := FromTensors(x, nil)
	test := FromTensors(tensor.FromFloat32([]float32{9, 8}, 1, 2), nil)
	trS, teS, _ := Normalize(train, test)
	assert.Equal(t, []float32{0, 0, 0.5, 0, 1, 0}, trS.X.Float32s())
	assert.Equal(t, []float32{2, 1}, teS.X.Float32s(), "test values outside the train range are not clipped")
}

func TestScalerPanics(t *testing.T) {
	assert.PanicsWithValue(t, "data.FitStandardScaler: features must be float32 with at least one row, got i32[3]",
		func() { FitStandardScaler(tensor.Arange(3)) })
	assert.PanicsWithValue(t, "data.FitMinMaxScaler: features must be float32 with at least one row, got f32[0,4]",
		func() { FitMinMaxScaler(tensor.Zeros(tensor.Float32, 0, 4)) })
	require.NotPanics(t, func() { FitMinMaxScaler(tensor.Zeros(tensor.Float32, 1, 4)) })
}
