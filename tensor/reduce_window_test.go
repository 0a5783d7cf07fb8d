package tensor_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// windowRef reduces x's windows in float64 loops (lo: resolved padding).
func windowRef(x *tensor.Tensor, r tensor.WindowReduction, size, stride, lo, dl, out []int) []float64 {
	xs, xd := x.Shape(), x.Float64s()
	rank := len(xs)
	y := make([]float64, numel(out))
	pos, kk := make([]int, rank), make([]int, rank)
	for o := range y {
		unflatten(pos, o, out)
		acc, count := math.Inf(-1), 0
		if r != tensor.WindowMax {
			acc = 0
		}
		for k := 0; k < numel(size); k++ {
			unflatten(kk, k, size)
			xi, ok := 0, true
			for d := 0; d < rank && ok; d++ {
				i := pos[d]*stride[d] + kk[d]*dl[d] - lo[d]
				ok = i >= 0 && i < xs[d]
				xi = xi*xs[d] + i
			}
			if !ok {
				continue
			}
			count++
			if r == tensor.WindowMax {
				acc = math.Max(acc, xd[xi])
			} else {
				acc += xd[xi]
			}
		}
		switch r {
		case tensor.WindowMean:
			acc /= float64(numel(size))
		case tensor.WindowMeanValid:
			acc /= float64(count)
		}
		y[o] = acc
	}
	return y
}

func TestReduceWindowAgainstLoops(t *testing.T) {
	cases := []struct {
		shape []int
		w     tensor.Window
		lo    []int
		out   []int
	}{
		{[]int{2, 3, 8, 6}, tensor.Window{Dims: []int{1, 1, 2, 2}, Strides: []int{1, 1, 2, 2}}, []int{0, 0, 0, 0}, []int{2, 3, 4, 3}},
		{[]int{2, 2, 9, 7}, tensor.Window{Dims: []int{1, 1, 3, 3}, Strides: []int{1, 1, 2, 2}, Padding: tensor.Pads([2]int{0, 0}, [2]int{0, 0}, [2]int{1, 1}, [2]int{1, 1})}, []int{0, 0, 1, 1}, []int{2, 2, 5, 4}},
		{[]int{2, 2, 7, 8}, tensor.Window{Dims: []int{1, 1, 2, 3}, Strides: []int{1, 1, 2, 2}, Padding: tensor.SamePadding, Dilation: []int{1, 1, 2, 1}}, []int{0, 0, 1, 0}, []int{2, 2, 4, 4}},
		{[]int{3, 10}, tensor.Window{Dims: []int{1, 4}, Strides: []int{1, 3}}, []int{0, 0}, []int{3, 3}},
		{[]int{1, 2, 4, 5, 6}, tensor.Window{Dims: []int{1, 1, 2, 2, 3}, Strides: []int{1, 1, 2, 1, 3}}, []int{0, 0, 0, 0, 0}, []int{1, 2, 2, 4, 2}},
		{[]int{4, 6, 5}, tensor.Window{Dims: []int{2, 3, 1}, Strides: []int{2, 1, 1}}, []int{0, 0, 0}, []int{2, 4, 5}}, // over the batch
	}
	rng := newRNG(40)
	for i, c := range cases {
		x := distinct(rng, c.shape...)
		for _, r := range []tensor.WindowReduction{tensor.WindowMax, tensor.WindowSum, tensor.WindowMean, tensor.WindowMeanValid} {
			t.Run(fmt.Sprintf("%d/%v", i, r), func(t *testing.T) {
				stride, dl := c.w.Strides, c.w.Dilation
				if dl == nil {
					dl = fill(len(c.shape), 1)
				}
				want := windowRef(x, r, c.w.Dims, stride, c.lo, dl, c.out)
				y := tensor.ReduceWindow(x, r, c.w)
				require.Equal(t, c.out, y.Shape())
				requireNear(t, want, y, r.String())
			})
		}
	}
}

func TestAdaptivePool(t *testing.T) {
	rng := newRNG(41)
	x := distinct(rng, 2, 3, 7, 5)
	// PyTorch's windows along 7 → 3: [0,3), [2,5), [4,7); along 5 → 2: [0,3), [2,5).
	rows := [][2]int{{0, 3}, {2, 5}, {4, 7}}
	cols := [][2]int{{0, 3}, {2, 5}}
	xd := x.Float64s()
	for _, r := range []tensor.WindowReduction{tensor.WindowMax, tensor.WindowSum, tensor.WindowMean} {
		y := tensor.AdaptivePool(x, r, 3, 2)
		require.Equal(t, []int{2, 3, 3, 2}, y.Shape())
		var want []float64
		for b := 0; b < 6; b++ {
			for _, rr := range rows {
				for _, cc := range cols {
					acc, n := 0.0, 0
					if r == tensor.WindowMax {
						acc = math.Inf(-1)
					}
					for i := rr[0]; i < rr[1]; i++ {
						for j := cc[0]; j < cc[1]; j++ {
							v := xd[b*35+i*5+j]
							if r == tensor.WindowMax {
								acc = math.Max(acc, v)
							} else {
								acc += v
							}
							n++
						}
					}
					if r == tensor.WindowMean {
						acc /= float64(n)
					}
					want = append(want, acc)
				}
			}
		}
		requireNear(t, want, y, r.String())
	}
	// Global average pooling.
	g := tensor.AdaptivePool(x, tensor.WindowMean, 1, 1)
	requireNear(t, tensor.Mean(tensor.Reshape(x, 2, 3, 35), -1).Float64s(), tensor.Reshape(g, 2, 3), "global mean")
}

func TestReduceWindowGradients(t *testing.T) {
	rng := newRNG(42)
	w := tensor.Window{Dims: []int{1, 1, 3, 2}, Strides: []int{1, 1, 2, 1}, Padding: tensor.Pads([2]int{0, 0}, [2]int{0, 0}, [2]int{1, 1}, [2]int{0, 1})}
	for _, r := range []tensor.WindowReduction{tensor.WindowMax, tensor.WindowSum, tensor.WindowMean, tensor.WindowMeanValid} {
		t.Run(r.String(), func(t *testing.T) {
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.ReduceWindow(xs[0], r, w) }
			xs := []*tensor.Tensor{distinct(rng, 2, 2, 5, 4)}
			checkGrad(t, f, xs)
			// Second order, through the square (the max's is the
			// select-and-gather of the scattered gradient).
			sq := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Square(f(xs)) }
			checkGrad(t, gradOf(sq, 0), xs, autodiff.CheckOptions{Eps: 1e-3})
		})
	}
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.AdaptivePool(xs[0], tensor.WindowMax, 2, 3) }
	checkGrad(t, f, []*tensor.Tensor{distinct(rng, 2, 5, 7)})
}

// The max's gradient goes to the first maximum of a window, as XLA's
// select-and-scatter with >= (and PyTorch's max_pool) routes it.
func TestReduceWindowMaxTies(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 3, 3, 2, 3, 0}, 1, 6)
	w := tensor.Window{Dims: []int{1, 3}, Strides: []int{1, 1}}
	g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.ReduceWindow(xs[0], tensor.WindowMax, w) }, []*tensor.Tensor{x})
	require.Equal(t, []float64{0, 2, 1, 0, 1, 0}, g[0].Float64s())
	// NaN wins, and padding never does.
	x = tensor.FromFloat32([]float32{1, float32(math.NaN()), 5, -2}, 4)
	y := tensor.ReduceWindow(x, tensor.WindowMax, tensor.Window{Dims: []int{2}, Strides: []int{2}, Padding: tensor.Pads([2]int{1, 1})})
	v := y.Float64s()
	require.Equal(t, 1.0, v[0])
	require.True(t, math.IsNaN(v[1]))
	require.Equal(t, -2.0, v[2])
}

func TestReduceWindowPanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 2, 3, 4)
	for _, c := range []struct {
		f    func()
		want string
	}{
		{func() { tensor.ReduceWindow(x, tensor.WindowMax, tensor.Window{Dims: []int{2, 2}}) }, "tensor.ReduceWindow: f32[2,3,4], max windows [2 2]: want 3 window sizes, one per dimension"},
		{func() { tensor.ReduceWindow(x, tensor.WindowSum, tensor.Window{Dims: []int{1, 0, 1}}) }, "sizes [1 0 1]: want positive values"},
		{func() {
			tensor.ReduceWindow(x, tensor.WindowSum, tensor.Window{Dims: []int{1, 1, 1}, Padding: tensor.Pads([2]int{0, 0}, [2]int{0, 0}, [2]int{-1, 0})})
		}, "want no negative values"},
		{func() {
			tensor.ReduceWindow(tensor.Zeros(tensor.Int32, 3), tensor.WindowSum, tensor.Window{Dims: []int{1}})
		}, "want a float dtype"},
		{func() { tensor.AdaptivePool(x, tensor.WindowMax, 1, 2, 3, 4) }, "tensor.AdaptivePool: f32[2,3,4] to [1 2 3 4]: want 1 to 3 output sizes"},
	} {
		require.Contains(t, panicMessage(c.f), c.want)
	}
}
