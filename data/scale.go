package data

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// StandardScaler standardises features: each feature (each position of an
// example's feature tensor) has its mean subtracted and is divided by its
// standard deviation, as scikit-learn's StandardScaler does. Fit it on the
// training split only (FitStandardScaler, or Standardize for a train/test
// pair) and apply the same scaler to every split, so no statistic of the test
// data leaks into training.
type StandardScaler struct {
	// Mean and Std have the shape of one example's features. A feature that
	// is constant in the training data has Std 1, so it maps to 0.
	Mean, Std *tensor.Tensor
}

// FitStandardScaler computes the per-feature mean and population standard
// deviation of x (f32[N,...]) over its first dimension, accumulating in
// float64. It panics if x is not float32, is a scalar or has no rows.
func FitStandardScaler(x *tensor.Tensor) StandardScaler {
	n, f, fshape := featureLayout("data.FitStandardScaler", x)
	raw := x.RawFloat32()
	sum := make([]float64, f)
	for i := range n {
		for j, v := range raw[i*f : (i+1)*f] {
			sum[j] += float64(v)
		}
	}
	mean := make([]float32, f)
	for j := range sum {
		sum[j] /= float64(n)
		mean[j] = float32(sum[j])
	}
	sq := make([]float64, f)
	for i := range n {
		for j, v := range raw[i*f : (i+1)*f] {
			d := float64(v) - sum[j]
			sq[j] += d * d
		}
	}
	std := make([]float32, f)
	for j := range sq {
		s := math.Sqrt(sq[j] / float64(n))
		if s < 1e-12 {
			s = 1
		}
		std[j] = float32(s)
	}
	return StandardScaler{Mean: wrapFeatures(mean, fshape), Std: wrapFeatures(std, fshape)}
}

// Transform returns (x - Mean) / Std, broadcasting over the rows of x.
func (s StandardScaler) Transform(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Div(tensor.Sub(x, s.Mean), s.Std)
}

// TransformDataset returns d with its features transformed; targets are kept.
func (s StandardScaler) TransformDataset(d *InMemory) *InMemory {
	return &InMemory{X: s.Transform(d.X), Y: d.Y}
}

// Standardize fits a StandardScaler on train and applies it to train and
// test (test may be nil), returning the scaled sets and the scaler, which a
// program keeps to scale new inputs the same way.
func Standardize(train, test *InMemory) (trainScaled, testScaled *InMemory, s StandardScaler) {
	s = FitStandardScaler(train.X)
	trainScaled = s.TransformDataset(train)
	if test != nil {
		testScaled = s.TransformDataset(test)
	}
	return trainScaled, testScaled, s
}

// MinMaxScaler rescales each feature linearly so that its training range
// [Min, Max] maps to [0, 1], as scikit-learn's MinMaxScaler does. Values of
// other splits outside the training range map outside [0, 1]; they are not
// clipped. Fit it on the training split only.
type MinMaxScaler struct {
	// Min and Scale have the shape of one example's features; Transform
	// computes (x - Min) * Scale. A constant feature has Scale 1.
	Min, Scale *tensor.Tensor
}

// FitMinMaxScaler computes the per-feature minimum and range of x
// (f32[N,...]) over its first dimension. It panics if x is not float32, is a
// scalar or has no rows.
func FitMinMaxScaler(x *tensor.Tensor) MinMaxScaler {
	n, f, fshape := featureLayout("data.FitMinMaxScaler", x)
	raw := x.RawFloat32()
	lo := make([]float32, f)
	hi := make([]float32, f)
	copy(lo, raw[:f])
	copy(hi, raw[:f])
	for i := 1; i < n; i++ {
		for j, v := range raw[i*f : (i+1)*f] {
			lo[j] = min(lo[j], v)
			hi[j] = max(hi[j], v)
		}
	}
	scale := make([]float32, f)
	for j := range scale {
		r := float64(hi[j]) - float64(lo[j])
		if r > 0 {
			scale[j] = float32(1 / r)
		} else {
			scale[j] = 1
		}
	}
	return MinMaxScaler{Min: wrapFeatures(lo, fshape), Scale: wrapFeatures(scale, fshape)}
}

// Transform returns (x - Min) * Scale, broadcasting over the rows of x.
func (s MinMaxScaler) Transform(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Mul(tensor.Sub(x, s.Min), s.Scale)
}

// TransformDataset returns d with its features transformed; targets are kept.
func (s MinMaxScaler) TransformDataset(d *InMemory) *InMemory {
	return &InMemory{X: s.Transform(d.X), Y: d.Y}
}

// Normalize fits a MinMaxScaler on train and applies it to train and test
// (test may be nil).
func Normalize(train, test *InMemory) (trainScaled, testScaled *InMemory, s MinMaxScaler) {
	s = FitMinMaxScaler(train.X)
	trainScaled = s.TransformDataset(train)
	if test != nil {
		testScaled = s.TransformDataset(test)
	}
	return trainScaled, testScaled, s
}

// featureLayout returns the number of rows of x, the number of features per
// row and the shape of one row's features, panicking with what if x cannot
// be scaled.
func featureLayout(what string, x *tensor.Tensor) (n, f int, fshape []int) {
	if x == nil || x.DType() != tensor.Float32 || x.Rank() == 0 || x.Dim(0) == 0 {
		panic(fmt.Sprintf("%s: features must be float32 with at least one row, got %v", what, x))
	}
	shape := x.Shape()
	n = shape[0]
	f = x.Size() / n
	return n, f, shape[1:]
}

// wrapFeatures returns v as a tensor of shape fshape (a scalar when fshape is
// empty).
func wrapFeatures(v []float32, fshape []int) *tensor.Tensor {
	if len(fshape) == 0 {
		return tensor.Scalar(v[0])
	}
	return tensor.WrapFloat32(v, fshape...)
}
