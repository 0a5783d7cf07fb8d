package nn_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// randn returns standard normal values drawn with NewKey(seed).
func randn(seed uint64, shape ...int) *tensor.Tensor {
	return tensor.Normal(tensor.NewKey(seed), shape...)
}

// checkGrad runs autodiff.CheckGrad and fails the test on any mismatch.
func checkGrad(t *testing.T, f func(xs []*tensor.Tensor) *tensor.Tensor, xs ...*tensor.Tensor) {
	t.Helper()
	require.NoError(t, autodiff.CheckGrad(f, xs, autodiff.CheckOptions{}))
}

// panicMessage returns the value f panics with, as a string ("" if it does
// not panic).
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// requirePanicContains checks that f panics with a message containing each
// of parts.
func requirePanicContains(t *testing.T, f func(), parts ...string) {
	t.Helper()
	msg := panicMessage(f)
	require.NotEmpty(t, msg, "expected a panic")
	for _, p := range parts {
		require.Contains(t, msg, p)
	}
}

// mat is a float64 matrix for naive reference computations.
type mat [][]float64

// toMat reads a 2-D tensor.
func toMat(x *tensor.Tensor) mat {
	r, c := x.Dim(0), x.Dim(1)
	v := x.Float64s()
	m := make(mat, r)
	for i := range m {
		m[i] = v[i*c : (i+1)*c]
	}
	return m
}

// matmul multiplies a [n,k] by b [k,m] with triple loops.
func matmul(a, b mat) mat {
	out := make(mat, len(a))
	for i := range a {
		out[i] = make([]float64, len(b[0]))
		for j := range b[0] {
			s := 0.0
			for p := range b {
				s += a[i][p] * b[p][j]
			}
			out[i][j] = s
		}
	}
	return out
}

func flat(m mat) []float64 {
	var out []float64
	for _, r := range m {
		out = append(out, r...)
	}
	return out
}

func meanStd(v []float64) (mean, std float64) {
	for _, x := range v {
		mean += x
	}
	mean /= float64(len(v))
	for _, x := range v {
		std += (x - mean) * (x - mean)
	}
	return mean, math.Sqrt(std / float64(len(v)))
}

func minMax(v []float64) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, x := range v {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	return lo, hi
}

func softmax64(x []float64) []float64 {
	m := math.Inf(-1)
	for _, v := range x {
		m = math.Max(m, v)
	}
	out := make([]float64, len(x))
	s := 0.0
	for i, v := range x {
		out[i] = math.Exp(v - m)
		s += out[i]
	}
	for i := range out {
		out[i] /= s
	}
	return out
}
