package tensor_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// convRef is Conv in float64 loops over the definition in its doc, with
// explicit (resolved) paddings.
func convRef(x, w *tensor.Tensor, stride, lo, lhs, rhs []int, groups int, outSp []int) ([]float64, []int) {
	xs, ws := x.Shape(), w.Shape()
	xd, wd := x.Float64s(), w.Float64s()
	n, c, o, nd := xs[0], xs[1], ws[0], len(xs)-2
	cg, og := c/groups, o/groups
	out := append([]int{n, o}, outSp...)
	y := make([]float64, numel(out))
	pos, kk := make([]int, nd), make([]int, nd)
	for b := 0; b < n; b++ {
		for oc := 0; oc < o; oc++ {
			g := oc / og
			for t := 0; t < numel(outSp); t++ {
				unflatten(pos, t, outSp)
				s := 0.0
				for ci := 0; ci < cg; ci++ {
					for k := 0; k < numel(ws[2:]); k++ {
						unflatten(kk, k, ws[2:])
						xi, ok := 0, true
						for d := 0; d < nd && ok; d++ {
							q := pos[d]*stride[d] + kk[d]*rhs[d] - lo[d]
							ok = q >= 0 && q%lhs[d] == 0 && q/lhs[d] < xs[2+d]
							xi = xi*xs[2+d] + q/max(lhs[d], 1)
						}
						if ok {
							s += wd[(oc*cg+ci)*numel(ws[2:])+k] * xd[(b*c+g*cg+ci)*numel(xs[2:])+xi]
						}
					}
				}
				y[(b*o+oc)*numel(outSp)+t] = s
			}
		}
	}
	return y, out
}

func unflatten(pos []int, t int, dims []int) {
	for d := len(dims) - 1; d >= 0; d-- {
		pos[d] = t % dims[d]
		t /= dims[d]
	}
}

func fill(n, v int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = v
	}
	return s
}

// requireNear requires got (float32) to equal want within float32
// rounding of sums of a few hundred terms.
func requireNear(t *testing.T, want []float64, got *tensor.Tensor, what string) {
	t.Helper()
	g := got.Float64s()
	require.Len(t, g, len(want), what)
	for i := range want {
		require.InDelta(t, want[i], g[i], 1e-5*(1+math.Abs(want[i])), "%s: element %d", what, i)
	}
}

func TestConvAgainstLoops(t *testing.T) {
	cases := []struct {
		name         string
		x, w         []int
		spec         tensor.ConvSpec
		lo           []int // the padding SAME/VALID must resolve to
		stride, l, r []int
		out          []int
	}{
		{"2-D padded", []int{2, 3, 7, 6}, []int{4, 3, 3, 3}, tensor.ConvSpec{Padding: tensor.Pads([2]int{1, 1}, [2]int{1, 1})},
			[]int{1, 1}, nil, nil, nil, []int{7, 6}},
		{"SAME stride 2", []int{1, 2, 7, 8}, []int{3, 2, 3, 2}, tensor.ConvSpec{Strides: []int{2, 2}, Padding: tensor.SamePadding},
			[]int{1, 0}, []int{2, 2}, nil, nil, []int{4, 4}},
		{"SAME_LOWER", []int{1, 2, 6}, []int{2, 2, 4}, tensor.ConvSpec{Padding: tensor.Padding{Mode: tensor.PadSameLower}},
			[]int{2}, nil, nil, nil, []int{6}},
		{"VALID dilated", []int{2, 2, 9, 8}, []int{2, 2, 3, 2}, tensor.ConvSpec{Padding: tensor.ValidPadding, RhsDilation: []int{2, 3}},
			[]int{0, 0}, nil, nil, []int{2, 3}, []int{5, 5}},
		{"groups", []int{2, 6, 5, 5}, []int{9, 2, 2, 3}, tensor.ConvSpec{Groups: 3},
			[]int{0, 0}, nil, nil, nil, []int{4, 3}},
		{"depthwise strided", []int{2, 4, 8, 7}, []int{4, 1, 3, 3}, tensor.ConvSpec{Groups: 4, Strides: []int{2, 1}, Padding: tensor.Pads([2]int{1, 0}, [2]int{0, 2})},
			[]int{1, 0}, []int{2, 1}, nil, nil, []int{4, 7}},
		{"input dilation", []int{1, 2, 4, 3}, []int{2, 2, 3, 3}, tensor.ConvSpec{LhsDilation: []int{2, 3}, Padding: tensor.Pads([2]int{2, 2}, [2]int{1, 1})},
			[]int{2, 1}, nil, []int{2, 3}, nil, []int{9, 7}},
		{"negative padding", []int{1, 2, 8}, []int{3, 2, 3}, tensor.ConvSpec{Padding: tensor.Pads([2]int{-1, -2})},
			[]int{-1}, nil, nil, nil, []int{3}},
		{"1-D", []int{3, 4, 20}, []int{5, 4, 5}, tensor.ConvSpec{Strides: []int{3}, Padding: tensor.Pads([2]int{2, 1})},
			[]int{2}, []int{3}, nil, nil, []int{7}},
		{"3-D", []int{2, 2, 5, 4, 6}, []int{3, 2, 3, 2, 3}, tensor.ConvSpec{Padding: tensor.SamePadding},
			[]int{1, 0, 1}, nil, nil, nil, []int{5, 4, 6}},
	}
	rng := newRNG(29)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			x, w := randF32(rng, c.x...), randF32(rng, c.w...)
			nd := len(c.x) - 2
			or := func(v []int, def int) []int {
				if v == nil {
					return fill(nd, def)
				}
				return v
			}
			want, shape := convRef(x, w, or(c.stride, 1), c.lo, or(c.l, 1), or(c.r, 1), max(c.spec.Groups, 1), c.out)
			y := tensor.Conv(x, w, c.spec)
			require.Equal(t, shape, y.Shape())
			requireNear(t, want, y, "Conv")
		})
	}
}

// The transposed convolution is the adjoint of Conv:
// <Conv(z, w), x> = <z, ConvTranspose(x, w)>, and its output size is
// PyTorch's formula.
func TestConvTransposeIsTheAdjoint(t *testing.T) {
	cases := []struct {
		x, w []int
		spec tensor.ConvTransposeSpec
		out  []int
	}{
		{[]int{2, 4, 4, 5}, []int{4, 3, 3, 3}, tensor.ConvTransposeSpec{Strides: []int{2, 2}, Padding: [][2]int{{1, 1}, {1, 1}}, OutputPadding: []int{1, 1}}, []int{8, 10}},
		{[]int{2, 4, 5, 4}, []int{4, 3, 2, 3}, tensor.ConvTransposeSpec{Strides: []int{1, 2}, Padding: [][2]int{{0, 0}, {1, 1}}, OutputPadding: []int{0, 1}, Dilation: []int{2, 1}, Groups: 2}, []int{7, 8}},
		{[]int{1, 3, 6}, []int{3, 2, 4}, tensor.ConvTransposeSpec{Strides: []int{3}, Padding: [][2]int{{1, 1}}, OutputPadding: []int{2}}, []int{19}},
		{[]int{1, 2, 3, 2, 3}, []int{2, 3, 2, 2, 2}, tensor.ConvTransposeSpec{Strides: []int{2, 2, 2}}, []int{6, 4, 6}},
	}
	rng := newRNG(30)
	for i, c := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			x, w := randF32(rng, c.x...), randF32(rng, c.w...)
			y := tensor.ConvTranspose(x, w, c.spec)
			require.Equal(t, append([]int{c.x[0], c.w[1] * max(c.spec.Groups, 1)}, c.out...), y.Shape())
			z := randF32(rng, y.Shape()...)
			pairs := make([][2]int, len(c.out))
			for d := range pairs {
				if c.spec.Padding != nil {
					pairs[d] = c.spec.Padding[d]
				}
				if c.spec.OutputPadding != nil {
					pairs[d][1] -= c.spec.OutputPadding[d]
				}
			}
			cz := tensor.Conv(z, w, tensor.ConvSpec{Strides: c.spec.Strides, Padding: tensor.Pads(pairs...), RhsDilation: c.spec.Dilation, Groups: c.spec.Groups})
			require.Equal(t, x.Shape(), cz.Shape())
			lhs := dot64(cz, x)
			rhs := dot64(z, y)
			require.InDelta(t, lhs, rhs, 1e-4*(1+math.Abs(lhs)))
		})
	}
}

func dot64(a, b *tensor.Tensor) float64 {
	s := 0.0
	bd := b.Float64s()
	for i, v := range a.Float64s() {
		s += v * bd[i]
	}
	return s
}

func TestConvGradients(t *testing.T) {
	rng := newRNG(31)
	specs := []struct {
		x, w []int
		spec tensor.ConvSpec
	}{
		{[]int{2, 3, 5, 4}, []int{2, 3, 3, 2}, tensor.ConvSpec{Strides: []int{2, 1}, Padding: tensor.SamePadding}},
		{[]int{1, 4, 6}, []int{4, 2, 3}, tensor.ConvSpec{Groups: 2, RhsDilation: []int{2}, Padding: tensor.Pads([2]int{2, 1})}},
		{[]int{1, 2, 3, 3, 4}, []int{2, 2, 2, 2, 3}, tensor.ConvSpec{LhsDilation: []int{1, 2, 1}, Padding: tensor.Pads([2]int{1, 0}, [2]int{1, 1}, [2]int{0, 1})}},
	}
	for i, s := range specs {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Conv(xs[0], xs[1], s.spec) }
			xs := []*tensor.Tensor{randF32(rng, s.x...), randF32(rng, s.w...)}
			checkGrad(t, f, xs)
			// Second order: the gradients are convolutions too.
			squared := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Square(f(xs)) }
			checkGrad(t, gradOf(squared, 0), xs, autodiff.CheckOptions{Rtol: 2e-2})
			checkGrad(t, gradOf(squared, 1), xs, autodiff.CheckOptions{Rtol: 2e-2})
		})
	}
	ct := tensor.ConvTransposeSpec{Strides: []int{2, 1}, Padding: [][2]int{{1, 0}, {0, 1}}, OutputPadding: []int{1, 0}}
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.ConvTranspose(xs[0], xs[1], ct) }
	xs := []*tensor.Tensor{randF32(rng, 2, 3, 3, 4), randF32(rng, 3, 2, 3, 2)}
	checkGrad(t, f, xs)
	squared := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Square(f(xs)) }
	checkGrad(t, gradOf(squared, 0), xs, autodiff.CheckOptions{Rtol: 2e-2})
	checkGrad(t, gradOf(squared, 1), xs, autodiff.CheckOptions{Rtol: 2e-2})
}

func TestConvPanics(t *testing.T) {
	x, w := tensor.Zeros(tensor.Float32, 2, 3, 5, 5), tensor.Zeros(tensor.Float32, 4, 3, 3, 3)
	for _, c := range []struct {
		f    func()
		want string
	}{
		{func() { tensor.Conv(x, tensor.Zeros(tensor.Float32, 4, 2, 3, 3), tensor.ConvSpec{}) }, "tensor.Conv: f32[2,3,5,5], f32[4,2,3,3]: 3 input channels, kernel for 2 per group in 1 groups of 4 output channels"},
		{func() { tensor.Conv(tensor.Zeros(tensor.Float32, 2, 3), w, tensor.ConvSpec{}) }, "tensor.Conv: f32[2,3], f32[4,3,3,3]: want x [N, C, spatial...]"},
		{func() { tensor.Conv(x, w, tensor.ConvSpec{Strides: []int{1}}) }, "tensor.Conv: f32[2,3,5,5], f32[4,3,3,3]: strides [1]: want 2 values"},
		{func() { tensor.Conv(x, w, tensor.ConvSpec{Strides: []int{1, 0}}) }, "strides [1 0]: want positive values"},
		{func() { tensor.Conv(x, w, tensor.ConvSpec{Padding: tensor.Pads([2]int{1, 1})}) }, "padding [[1 1]]: want 2 (low, high) pairs"},
		{func() { tensor.Conv(x, tensor.Zeros(tensor.Int32, 4, 3, 3, 3), tensor.ConvSpec{}) }, "operands must be float32"},
		{func() { tensor.Conv(x, nil, tensor.ConvSpec{}) }, "tensor.Conv: operand w is nil"},
		{func() { tensor.ConvTranspose(x, w, tensor.ConvTransposeSpec{}) }, "tensor.ConvTranspose: f32[2,3,5,5], f32[4,3,3,3]: 3 input channels, kernel for 4 in 1 groups"},
		{func() {
			tensor.ConvTranspose(tensor.Zeros(tensor.Float32, 1, 4, 3, 3), w, tensor.ConvTransposeSpec{OutputPadding: []int{1, 1}})
		}, "output padding [1 1]: want each value below its stride or dilation"},
	} {
		require.Contains(t, panicMessage(c.f), c.want)
	}
}

// Conv on bfloat16 operands equals the float32 result rounded once.
func TestConvHalf(t *testing.T) {
	rng := newRNG(32)
	x, w := randF32(rng, 2, 3, 6, 5), randF32(rng, 4, 3, 3, 3)
	spec := tensor.ConvSpec{Padding: tensor.SamePadding}
	xb, wb := tensor.Convert(x, tensor.BFloat16), tensor.Convert(w, tensor.BFloat16)
	want := tensor.Convert(tensor.Conv(tensor.Convert(xb, tensor.Float32), tensor.Convert(wb, tensor.Float32), spec), tensor.BFloat16)
	got := tensor.Conv(xb, wb, spec)
	require.Equal(t, tensor.BFloat16, got.DType())
	require.Equal(t, want.Float64s(), got.Float64s())
}

var _ = rand.New
