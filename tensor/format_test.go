package tensor_test

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// fakeLayout shards a global tensor; Gather returns a fixed host tensor.
type fakeLayout struct {
	axes []string
	data *tensor.Tensor
}

func (l fakeLayout) DimAxes(i int) string { return l.axes[i] }
func (l fakeLayout) Gather(x *tensor.Tensor) *tensor.Tensor {
	return l.data
}

// MapBlocks treats the whole gathered array as the only block.
func (l fakeLayout) MapBlocks(x *tensor.Tensor, fn func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	return tensor.NewSharded(x.DType(), x.Shape(), fakeLayout{axes: l.axes, data: fn(l.data)})
}

func TestTypeNotation(t *testing.T) {
	env := newFakeEnv([]string{"dp", "tp", "pp"}, []float32{2, 3, 5})
	tests := []struct {
		name     string
		x        *tensor.Tensor
		str, typ string
	}{
		{"f32 2-D", tensor.Zeros(tensor.Float32, 3, 4), "f32[3,4]", "float32[3,4]"},
		{"i32 scalar", tensor.ScalarInt(1), "i32[]", "int32[]"},
		{"bool 1-D", tensor.Zeros(tensor.Bool, 5), "bool[5]", "bool[5]"},
		{"empty", tensor.Zeros(tensor.Float32, 0, 3), "f32[0,3]", "float32[0,3]"},
		{"rank 4", tensor.Zeros(tensor.Int32, 1, 2, 3, 4), "i32[1,2,3,4]", "int32[1,2,3,4]"},
		{"sharded", tensor.NewSharded(tensor.Float32, []int{1024, 4096}, fakeLayout{axes: []string{"dp", ""}}), "f32[1024@dp,4096]", "float32[1024@dp,4096]"},
		{"sharded two axes", tensor.NewSharded(tensor.Int32, []int{8}, fakeLayout{axes: []string{"(dp,tp)"}}), "i32[8@(dp,tp)]", "int32[8@(dp,tp)]"},
		{"block dp", tensor.WithLocal(tensor.Zeros(tensor.Float32, 256, 4096), env.Local(1)), "f32[256,4096]{dp}", "float32[256,4096]{dp}"},
		{"block dp,tp", tensor.WithLocal(tensor.Zeros(tensor.Float32, 256, 128), env.Local(3)), "f32[256,128]{dp,tp}", "float32[256,128]{dp,tp}"},
		{"block tp,pp", tensor.WithLocal(tensor.Zeros(tensor.Bool, 2), env.Local(6)), "bool[2]{tp,pp}", "bool[2]{tp,pp}"},
		{"block invariant", tensor.WithLocal(tensor.Zeros(tensor.Float32, 2), env.Local(0)), "f32[2]", "float32[2]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.str, tt.x.String())
			assert.Equal(t, tt.typ, tt.x.Type())
			assert.Equal(t, tt.str, fmt.Sprint(tt.x))
			assert.Equal(t, tt.str, fmt.Sprintf("%v", tt.x))
			assert.Equal(t, tt.str, fmt.Sprintf("%s", tt.x))
			assert.Equal(t, tt.str, fmt.Sprintf("%+v", tt.x))
			assert.Equal(t, `"`+tt.str+`"`, fmt.Sprintf("%q", tt.x))
		})
	}
	var nilT *tensor.Tensor
	assert.Equal(t, "<nil>", nilT.String())
	assert.Equal(t, "[f32[2] i32[]]", fmt.Sprint([]*tensor.Tensor{tensor.Zeros(tensor.Float32, 2), tensor.ScalarInt(0)}))
}

func arangeF(n int, shape ...int) *tensor.Tensor {
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(i)
	}
	return tensor.FromFloat32(d, shape...)
}

func arangeI(n int, shape ...int) *tensor.Tensor {
	return tensor.Reshape(tensor.Arange(n), shape...)
}

func TestFormatValues(t *testing.T) {
	tests := []struct {
		name   string
		x      *tensor.Tensor
		format string
		want   string
	}{
		// Integers, right-aligned to the widest element.
		{"int scalar", tensor.ScalarInt(-42), "%d", "-42"},
		{"int 1-D", tensor.FromInts([]int{1, -20, 3}), "%d", "[  1 -20   3]"},
		{"int 2-D", arangeI(12, 3, 4), "%d", "[[ 0  1  2  3]\n [ 4  5  6  7]\n [ 8  9 10 11]]"},
		{"int 3-D", arangeI(8, 2, 2, 2), "%d", "[[[0 1]\n  [2 3]]\n\n [[4 5]\n  [6 7]]]"},
		{"int 4-D", arangeI(4, 2, 1, 2, 1), "%d", "[[[[0]\n   [1]]]\n\n\n [[[2]\n   [3]]]]"},
		{"int with %g", tensor.FromInts([]int{7, 8}), "%g", "[7 8]"},
		{"int with %.2f ignores precision", tensor.FromInts([]int{7, 10}), "%.2f", "[ 7 10]"},
		{"int 1x1", tensor.FromInts([]int{5}, 1, 1), "%d", "[[5]]"},
		// Floats: Go's shortest representation, right-aligned.
		{"float scalar", tensor.Scalar(2.5), "%g", "2.5"},
		{"float 1-D", tensor.FromFloat32([]float32{1, 2.5, -3}), "%g", "[  1 2.5  -3]"},
		{"float 0.1 shortest", tensor.FromFloat32([]float32{0.1, 0.2}), "%g", "[0.1 0.2]"},
		{"float 2-D", tensor.FromFloat32([]float32{0.5, 10, -1.25, 3}, 2, 2), "%g", "[[  0.5    10]\n [-1.25     3]]"},
		{"float %d acts as %g", tensor.FromFloat32([]float32{1.5, 2}), "%d", "[1.5   2]"},
		{"float %.3f", tensor.FromFloat32([]float32{1, -2.5, 3.14159}), "%.3f", "[ 1.000 -2.500  3.142]"},
		{"float %.3f 2-D", tensor.FromFloat32([]float32{1, 22, 333, -4}, 2, 2), "%.3f", "[[  1.000  22.000]\n [333.000  -4.000]]"},
		{"float %.2e", tensor.FromFloat32([]float32{1234.5, 0.001}), "%.2e", "[1.23e+03 1.00e-03]"},
		{"float %f", tensor.FromFloat32([]float32{0.5}), "%f", "[0.5]"},
		{"float %.1g", tensor.FromFloat32([]float32{0.25, 123}), "%.1g", "[  0.2 1e+02]"},
		{"float scalar %.3f", tensor.Scalar(1.0 / 3), "%.3f", "0.333"},
		{"float %.2F is %.2f", tensor.FromFloat32([]float32{1, -2.5}), "%.2F", "[ 1.00 -2.50]"},
		{"float %F is %f", tensor.FromFloat32([]float32{0.5}), "%F", "[0.5]"},
		{"float %.2E", tensor.FromFloat32([]float32{1234.5}), "%.2E", "[1.23E+03]"},
		{"float %G", tensor.FromFloat32([]float32{1e-7}), "%G", "[1E-07]"},
		{"float specials", tensor.FromFloat32([]float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1)), 0}), "%g", "[ nan  inf -inf    0]"},
		{"float negative zero", tensor.FromFloat32([]float32{float32(math.Copysign(0, -1)), 1}), "%g", "[-0  1]"},
		// Bools.
		{"bool 1-D", tensor.FromBool([]bool{true, false, true}), "%v", "bool[3]"},
		{"bool values", tensor.FromBool([]bool{true, false, true}), "%g", "[ true false  true]"},
		{"bool scalar", tensor.ScalarBool(false), "%d", "false"},
		{"bool 2-D", tensor.FromBool([]bool{true, true, true, false}, 2, 2), "%d", "[[ true  true]\n [ true false]]"},
		// Empty tensors print as [] whatever their shape, as NumPy does.
		{"empty 1-D", tensor.Zeros(tensor.Float32, 0), "%g", "[]"},
		{"empty 2-D", tensor.Zeros(tensor.Int32, 2, 0), "%d", "[]"},
		{"empty 3-D", tensor.Zeros(tensor.Bool, 0, 2, 3), "%d", "[]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fmt.Sprintf(tt.format, tt.x))
		})
	}
	assert.Equal(t, "[[0 1]\n [2 3]]", arangeI(4, 2, 2).Values())
	assert.Equal(t, "[0.5 1.5]", tensor.FromFloat32([]float32{0.5, 1.5}).Values())
}

func TestFormatSummarised(t *testing.T) {
	// At the threshold (1000 elements) everything is printed.
	full := fmt.Sprintf("%d", tensor.Arange(1000))
	assert.Equal(t, 1000, len(strings.Fields(strings.Trim(full, "[]"))))
	assert.NotContains(t, full, "...")

	tests := []struct {
		name string
		x    *tensor.Tensor
		want string
	}{
		{"1-D", tensor.Arange(2000), "[   0    1    2 ... 1997 1998 1999]"},
		{"2-D wide", arangeI(2000, 2, 1000), "[[   0    1    2 ...  997  998  999]\n [1000 1001 1002 ... 1997 1998 1999]]"},
		{"2-D tall", arangeI(3000, 1000, 3), "[[   0    1    2]\n [   3    4    5]\n [   6    7    8]\n ...\n [2991 2992 2993]\n [2994 2995 2996]\n [2997 2998 2999]]"},
		{"float 1-D", arangeF(1001), "[   0    1    2 ...  998  999 1000]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.want, fmt.Sprintf("%d", tt.x))
		})
	}

	// 3-D: NumPy's layout, checked line by line.
	got := fmt.Sprintf("%d", arangeI(2000, 10, 10, 20))
	lines := strings.Split(got, "\n")
	want := []string{
		"[[[   0    1    2 ...   17   18   19]",
		"  [  20   21   22 ...   37   38   39]",
		"  [  40   41   42 ...   57   58   59]",
		"  ...",
		"  [ 140  141  142 ...  157  158  159]",
		"  [ 160  161  162 ...  177  178  179]",
		"  [ 180  181  182 ...  197  198  199]]",
		"",
		" [[ 200  201  202 ...  217  218  219]",
	}
	require.GreaterOrEqual(t, len(lines), len(want))
	assert.Equal(t, want, lines[:len(want)])
	assert.Contains(t, got, "  [ 580  581  582 ...  597  598  599]]\n\n ...\n\n [[1400 1401 1402 ... 1417 1418 1419]\n")
	assert.True(t, strings.HasSuffix(got, "  [1980 1981 1982 ... 1997 1998 1999]]]"), got[len(got)-60:])
}

func TestFormatSharded(t *testing.T) {
	host := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	x := tensor.NewSharded(tensor.Float32, []int{2, 2}, fakeLayout{axes: []string{"dp", ""}, data: host})
	assert.Equal(t, "f32[2@dp,2]", x.String())
	assert.Equal(t, "[[1 2]\n [3 4]]", fmt.Sprintf("%g", x))
	assert.Equal(t, []float32{1, 2, 3, 4}, x.Float32s())
	assert.Equal(t, []float64{1, 2, 3, 4}, x.Float64s())
	assert.Equal(t, 4.0, x.At(1, 1))
	assert.Equal(t, 16, x.Bytes())
	requirePanic(t, "Tensor.RawFloat32: f32[2@dp,2] is sharded over a mesh; gather it first (shard.Gather)", func() { x.RawFloat32() })
	requirePanic(t, `shard: op "add": operand f32[2@dp,2] has a layout tensor_test.fakeLayout that package shard did not make`,
		func() { tensor.Add(host, x) })
	requirePanic(t, "tensor.NewSharded: invalid dtype", func() { tensor.NewSharded(0, []int{1}, fakeLayout{}) })
	requirePanic(t, "tensor.NewSharded: negative dimension in shape [-1]", func() { tensor.NewSharded(tensor.Float32, []int{-1}, fakeLayout{}) })
}
