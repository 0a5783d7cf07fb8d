package tensor_test

import (
	"testing"

	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// lstmCellRef is LSTMCell composed from ops, the reference.
func lstmCellRef(gates, c *tensor.Tensor) (h, cNew *tensor.Tensor) {
	p := tensor.Split(gates, -1, 4)
	i, f, g, o := tensor.Sigmoid(p[0]), tensor.Sigmoid(p[1]), tensor.Tanh(p[2]), tensor.Sigmoid(p[3])
	cNew = tensor.Add(tensor.Mul(f, c), tensor.Mul(i, g))
	return tensor.Mul(o, tensor.Tanh(cNew)), cNew
}

// The fused cell equals the composition: forward bit for bit (H a
// multiple of 8), the gradients of the gate operands and c of Σ h·u +
// Σ c'·v within rounding, in float32 and float64, for a batch and for one
// row, with the gates in one operand and in two.
func TestLSTMCellMatchesComposition(t *testing.T) {
	rng := newRNG(131)
	for _, c := range []struct {
		name  string
		dt    tensor.DType
		shape []int // c's
		tol   float64
	}{
		{"f32 batch", tensor.Float32, []int{5, 16}, 1e-6},
		{"f64 batch", tensor.Float64, []int{5, 16}, 1e-14},
		{"f32 one row", tensor.Float32, []int{8}, 1e-6},
		{"f64 3 axes", tensor.Float64, []int{2, 3, 8}, 1e-14},
	} {
		t.Run(c.name, func(t *testing.T) {
			gs := append(append([]int(nil), c.shape[:len(c.shape)-1]...), 4*c.shape[len(c.shape)-1])
			gates := tensor.Convert(randRange(rng, -3, 3, gs...), c.dt)
			c0 := tensor.Convert(randRange(rng, -2, 2, c.shape...), c.dt)
			u := tensor.Convert(randF32(rng, c.shape...), c.dt)
			v := tensor.Convert(randF32(rng, c.shape...), c.dt)
			hh := tensor.Convert(randRange(rng, -2, 2, gs...), c.dt)
			for _, two := range []bool{false, true} {
				cell := func(xs []*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) { return tensor.LSTMCell(xs[0], nil, xs[1]) }
				ref := func(xs []*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) { return lstmCellRef(xs[0], xs[1]) }
				in := ts(gates, c0)
				if two {
					cell = func(xs []*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
						return tensor.LSTMCell(xs[0], xs[1], xs[2])
					}
					ref = func(xs []*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
						return lstmCellRef(tensor.Add(xs[0], xs[1]), xs[2])
					}
					in = ts(gates, hh, c0)
				}
				h, cn := cell(in)
				hr, cnr := ref(in)
				require.Equal(t, hr.Float64s(), h.Float64s(), "h, two gate operands %v", two)
				require.Equal(t, cnr.Float64s(), cn.Float64s(), "c', two gate operands %v", two)
				loss := func(cell func(xs []*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor)) func(xs []*tensor.Tensor) *tensor.Tensor {
					return func(xs []*tensor.Tensor) *tensor.Tensor {
						h, cn := cell(xs)
						return tensor.Add(tensor.Sum(tensor.Mul(h, u)), tensor.Sum(tensor.Mul(cn, v)))
					}
				}
				got, want := grad(loss(cell), in), grad(loss(ref), in)
				for i := range want {
					require.Equal(t, c.dt, got[i].DType())
					require.InDeltaSlice(t, want[i].Float64s(), got[i].Float64s(), c.tol, "gradient %d, two gate operands %v", i, two)
				}
			}
		})
	}
}

// The gradients and the gradients of the gradients (the composed VJP)
// against finite differences.
func TestLSTMCellGrad(t *testing.T) {
	rng := newRNG(137)
	gates, hh, c0 := randRange(rng, -2, 2, 3, 8), randRange(rng, -1, 1, 3, 8), randF32(rng, 3, 2)
	u, v := randF32(rng, 3, 2), randF32(rng, 3, 2)
	f := func(xs []*tensor.Tensor) *tensor.Tensor {
		h, cn := tensor.LSTMCell(xs[0], xs[1], xs[2])
		return tensor.Add(tensor.Sum(tensor.Mul(h, u)), tensor.Sum(tensor.Mul(cn, v)))
	}
	opts := autodiffOpts(1e-3, 1e-3, 1e-2)
	checkGrad(t, f, ts(gates, hh, c0), opts)
	for i := range 3 {
		checkGrad(t, gradOf(f, i), ts(gates, hh, c0), opts)
	}
	onlyH := func(xs []*tensor.Tensor) *tensor.Tensor {
		h, _ := tensor.LSTMCell(xs[0], nil, xs[1])
		return tensor.Sum(tensor.Mul(h, u))
	}
	checkGrad(t, onlyH, ts(gates, c0), opts)
}

// Bad operands panic naming the op and the operands.
func TestLSTMCellPanics(t *testing.T) {
	z := func(dt tensor.DType, shape ...int) *tensor.Tensor { return tensor.Zeros(dt, shape...) }
	for _, c := range []struct {
		want     string
		gates, c *tensor.Tensor
	}{
		{"tensor.LSTMCell: f32[2,8], f32[2,3]: want xp and hh [..., 4H] and c [..., H] of one float dtype", z(tensor.Float32, 2, 8), z(tensor.Float32, 2, 3)},
		{"tensor.LSTMCell: f32[2,8], f32[3,2]: want xp and hh [..., 4H] and c [..., H] of one float dtype", z(tensor.Float32, 2, 8), z(tensor.Float32, 3, 2)},
		{"tensor.LSTMCell: f32[2,8], f64[2,2]: want xp and hh [..., 4H] and c [..., H] of one float dtype", z(tensor.Float32, 2, 8), z(tensor.Float64, 2, 2)},
		{"tensor.LSTMCell: i32[2,8], i32[2,2]: want xp and hh [..., 4H] and c [..., H] of one float dtype", z(tensor.Int32, 2, 8), z(tensor.Int32, 2, 2)},
		{"tensor.LSTMCell: f32[8], f32[1,2]: want xp and hh [..., 4H] and c [..., H] of one float dtype", z(tensor.Float32, 8), z(tensor.Float32, 1, 2)},
		{"tensor.LSTMCell: f32[], f32[]: want xp and hh [..., 4H] and c [..., H] of one float dtype", z(tensor.Float32), z(tensor.Float32)},
	} {
		requirePanic(t, c.want, func() { tensor.LSTMCell(c.gates, nil, c.c) })
	}
	requirePanic(t, "tensor.LSTMCell: f32[2,8], f32[2,4], f32[2,2]: want xp and hh [..., 4H] and c [..., H] of one float dtype", func() {
		tensor.LSTMCell(z(tensor.Float32, 2, 8), z(tensor.Float32, 2, 4), z(tensor.Float32, 2, 2))
	})
	requirePanic(t, "tensor.LSTMCell: f32[2,8], f64[2,8], f32[2,2]: want xp and hh [..., 4H] and c [..., H] of one float dtype", func() {
		tensor.LSTMCell(z(tensor.Float32, 2, 8), z(tensor.Float64, 2, 8), z(tensor.Float32, 2, 2))
	})
	requirePanic(t, "tensor.LSTMCell: operand xp is nil", func() { tensor.LSTMCell(nil, nil, z(tensor.Float32, 2)) })
}
