package tensor_test

import (
	"testing"

	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// gruCellRef is GRUCell composed from ops, the reference.
func gruCellRef(xp, hg, h *tensor.Tensor) *tensor.Tensor {
	H := h.Dim(-1)
	is := tensor.SplitSizes(xp, -1, []int{2 * H, H})
	hs := tensor.SplitSizes(hg, -1, []int{2 * H, H})
	rz := tensor.Split(tensor.Sigmoid(tensor.Add(is[0], hs[0])), -1, 2)
	n := tensor.Tanh(tensor.Add(is[1], tensor.Mul(rz[0], hs[1])))
	return tensor.Add(n, tensor.Mul(rz[1], tensor.Sub(h, n)))
}

// The fused cell equals the composition: forward bit for bit (H a
// multiple of 8), the gradients of xp, hg and h of Σ h'·u within
// rounding, in float32 and float64.
func TestGRUCellMatchesComposition(t *testing.T) {
	rng := newRNG(139)
	for _, c := range []struct {
		name  string
		dt    tensor.DType
		shape []int // h's
		tol   float64
	}{
		{"f32 batch", tensor.Float32, []int{5, 16}, 1e-6},
		{"f64 batch", tensor.Float64, []int{5, 16}, 1e-14},
		{"f32 one row", tensor.Float32, []int{8}, 1e-6},
		{"f64 3 axes", tensor.Float64, []int{2, 3, 8}, 1e-14},
	} {
		t.Run(c.name, func(t *testing.T) {
			gs := append(append([]int(nil), c.shape[:len(c.shape)-1]...), 3*c.shape[len(c.shape)-1])
			xp := tensor.Convert(randRange(rng, -3, 3, gs...), c.dt)
			hg := tensor.Convert(randRange(rng, -3, 3, gs...), c.dt)
			h := tensor.Convert(randRange(rng, -1, 1, c.shape...), c.dt)
			u := tensor.Convert(randF32(rng, c.shape...), c.dt)
			require.Equal(t, gruCellRef(xp, hg, h).Float64s(), tensor.GRUCell(xp, hg, h).Float64s())
			loss := func(cell func(xp, hg, h *tensor.Tensor) *tensor.Tensor) func(xs []*tensor.Tensor) *tensor.Tensor {
				return func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(cell(xs[0], xs[1], xs[2]), u)) }
			}
			got := grad(loss(tensor.GRUCell), ts(xp, hg, h))
			want := grad(loss(gruCellRef), ts(xp, hg, h))
			for i := range want {
				require.Equal(t, c.dt, got[i].DType())
				require.InDeltaSlice(t, want[i].Float64s(), got[i].Float64s(), c.tol, "gradient %d", i)
			}
		})
	}
}

// The gradients and the gradients of the gradients (the composed VJP)
// against finite differences.
func TestGRUCellGrad(t *testing.T) {
	rng := newRNG(149)
	xp, hg, h := randRange(rng, -2, 2, 3, 6), randRange(rng, -2, 2, 3, 6), randF32(rng, 3, 2)
	u := randF32(rng, 3, 2)
	f := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Mul(tensor.GRUCell(xs[0], xs[1], xs[2]), u))
	}
	opts := autodiffOpts(1e-3, 1e-3, 1e-2)
	checkGrad(t, f, ts(xp, hg, h), opts)
	for i := range 3 {
		checkGrad(t, gradOf(f, i), ts(xp, hg, h), opts)
	}
}

// Bad operands panic naming the op and the operands.
func TestGRUCellPanics(t *testing.T) {
	z := func(dt tensor.DType, shape ...int) *tensor.Tensor { return tensor.Zeros(dt, shape...) }
	const want = ": want xp and hg [..., 3H] and h [..., H] of one float dtype"
	for _, c := range []struct {
		ops       string
		xp, hg, h *tensor.Tensor
	}{
		{"f32[2,6], f32[2,6], f32[2,3]", z(tensor.Float32, 2, 6), z(tensor.Float32, 2, 6), z(tensor.Float32, 2, 3)},
		{"f32[2,6], f32[2,3], f32[2,2]", z(tensor.Float32, 2, 6), z(tensor.Float32, 2, 3), z(tensor.Float32, 2, 2)},
		{"f32[2,6], f32[2,6], f32[3,2]", z(tensor.Float32, 2, 6), z(tensor.Float32, 2, 6), z(tensor.Float32, 3, 2)},
		{"f32[2,6], f64[2,6], f32[2,2]", z(tensor.Float32, 2, 6), z(tensor.Float64, 2, 6), z(tensor.Float32, 2, 2)},
		{"i32[2,6], i32[2,6], i32[2,2]", z(tensor.Int32, 2, 6), z(tensor.Int32, 2, 6), z(tensor.Int32, 2, 2)},
		{"f32[], f32[], f32[]", z(tensor.Float32), z(tensor.Float32), z(tensor.Float32)},
		{"f32[6], f32[6], f32[1,2]", z(tensor.Float32, 6), z(tensor.Float32, 6), z(tensor.Float32, 1, 2)},
	} {
		requirePanic(t, "tensor.GRUCell: "+c.ops+want, func() { tensor.GRUCell(c.xp, c.hg, c.h) })
	}
	requirePanic(t, "tensor.GRUCell: operand h is nil", func() { tensor.GRUCell(z(tensor.Float32, 6), z(tensor.Float32, 6), nil) })
}
