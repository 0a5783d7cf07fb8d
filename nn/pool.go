package nn

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// PoolOptions configures the pooling layers. The zero value gives
// Equinox's defaults: stride 1 (PyTorch's default is the kernel size:
// set Stride to it), no padding, no dilation, floor rounding.
type PoolOptions struct {
	// Stride and Dilation: one value per spatial dimension, or one for
	// all; nil means 1.
	Stride, Dilation []int
	// Padding: Padding(p...), tensor.Pads, tensor.SamePadding; padding
	// takes no part in a maximum and counts as zeros in a mean (unless
	// ExcludePad).
	Padding tensor.Padding
	// UseCeil rounds the output size up, as PyTorch's ceil_mode: a last
	// window may start in the high padding (but not past it). As in
	// PyTorch, an average with the padding counted divides such a window
	// by its elements inside the input and Padding, not by the kernel's
	// size. With SAME padding, which rounds up already, it changes
	// nothing.
	UseCeil bool
	// ExcludePad divides a mean by the elements its window covers rather
	// than by the window's size (PyTorch's count_include_pad=False; not
	// for MaxPool).
	ExcludePad bool
}

// Pool is a max or average pooling layer over the spatial dimensions of
// channels-first batches (eqx.nn.MaxPool1d/2d/3d, AvgPool1d/2d/3d):
// x [N, C, spatial...] (or one example [C, spatial...]) to
// [N, C, spatial'...], each output the maximum or mean of a window of
// Kernel elements. It has no parameters.
type Pool struct {
	Reduction tensor.WindowReduction
	Kernel    []int `pytree:"static"`
	Stride    []int `pytree:"static"`
	Dilation  []int `pytree:"static"`
	// Padding holds the (low, high) pairs of each spatial dimension, or
	// a mode (SAME).
	Padding tensor.Padding `pytree:"static"`
	UseCeil bool
}

func newPool(fn string, r tensor.WindowReduction, kernel []int, opts PoolOptions) Pool {
	nd := len(kernel)
	if nd < 1 || nd > 3 {
		panic(fmt.Sprintf("%s: kernel %v: want 1 to 3 spatial dimensions", fn, kernel))
	}
	for _, k := range kernel {
		if k < 1 {
			panic(fmt.Sprintf("%s: kernel %v: want positive sizes", fn, kernel))
		}
	}
	if opts.ExcludePad {
		if r == tensor.WindowMax {
			panic(fmt.Sprintf("%s: ExcludePad is for average pooling", fn))
		}
		r = tensor.WindowMeanValid
	}
	return Pool{Reduction: r, Kernel: slices.Clone(kernel),
		Stride:   broadcastInts(fn, "stride", opts.Stride, nd),
		Dilation: broadcastInts(fn, "dilation", opts.Dilation, nd),
		Padding:  perDim(fn, opts.Padding, nd), UseCeil: opts.UseCeil}
}

// NewMaxPool returns a max pooling layer with windows of the given size
// (its length is the number of spatial dimensions, 1 to 3).
func NewMaxPool(kernel []int, opts PoolOptions) Pool {
	return newPool("nn.NewMaxPool", tensor.WindowMax, kernel, opts)
}

// NewAvgPool returns an average pooling layer with windows of the given
// size.
func NewAvgPool(kernel []int, opts PoolOptions) Pool {
	return newPool("nn.NewAvgPool", tensor.WindowMean, kernel, opts)
}

// NewMaxPool1d, NewMaxPool2d and NewMaxPool3d return max pooling over
// windows of kernel elements along each of 1, 2 or 3 spatial dimensions.
func NewMaxPool1d(kernel int, opts PoolOptions) Pool { return NewMaxPool(square(kernel, 1), opts) }

// NewMaxPool2d is NewMaxPool with kernel×kernel windows.
func NewMaxPool2d(kernel int, opts PoolOptions) Pool { return NewMaxPool(square(kernel, 2), opts) }

// NewMaxPool3d is NewMaxPool with kernel³ windows.
func NewMaxPool3d(kernel int, opts PoolOptions) Pool { return NewMaxPool(square(kernel, 3), opts) }

// NewAvgPool1d, NewAvgPool2d and NewAvgPool3d return average pooling over
// windows of kernel elements along each of 1, 2 or 3 spatial dimensions.
func NewAvgPool1d(kernel int, opts PoolOptions) Pool { return NewAvgPool(square(kernel, 1), opts) }

// NewAvgPool2d is NewAvgPool with kernel×kernel windows.
func NewAvgPool2d(kernel int, opts PoolOptions) Pool { return NewAvgPool(square(kernel, 2), opts) }

// NewAvgPool3d is NewAvgPool with kernel³ windows.
func NewAvgPool3d(kernel int, opts PoolOptions) Pool { return NewAvgPool(square(kernel, 3), opts) }

func square(k, nd int) []int {
	v := make([]int, nd)
	for i := range v {
		v[i] = k
	}
	return v
}

// Forward pools x [N, C, spatial...] or one example [C, spatial...].
func (p Pool) Forward(x *tensor.Tensor) *tensor.Tensor {
	requireInput("nn.Pool", "x", x)
	nd := len(p.Kernel)
	if nd == 0 {
		panic("nn.Pool: Kernel is empty (the zero Pool has no window; build it with nn.NewMaxPool2d, NewAvgPool2d or their 1-D, 3-D and N-D forms)")
	}
	if !x.DType().IsFloat() || (x.Rank() != nd+2 && x.Rank() != nd+1) {
		panic(fmt.Sprintf("nn.Pool: x %v: want float [N, C, %d spatial dimensions] or [C, ...]", x, nd))
	}
	lead := x.Rank() - nd
	w := tensor.Window{Dims: append(square(1, lead), p.Kernel...), Strides: append(square(1, lead), p.Stride...),
		Dilation: append(square(1, lead), p.Dilation...), Padding: p.Padding}
	// SAME already rounds the output size up: ceil mode adds nothing
	// there (and must not drop its padding).
	same := p.Padding.Mode == tensor.PadSame || p.Padding.Mode == tensor.PadSameLower
	if p.Padding.Mode == tensor.PadExplicit || (p.UseCeil && !same) {
		pairs := make([][2]int, x.Rank())
		if p.Padding.Mode == tensor.PadExplicit && p.Padding.Pairs != nil {
			copy(pairs[lead:], p.Padding.Pairs)
		}
		user := slices.Clone(pairs)
		extra := false
		if p.UseCeil {
			for d := 0; d < nd; d++ {
				e := p.ceilExtra(x.Dim(lead+d), pairs[lead+d], d)
				pairs[lead+d][1] += e
				extra = extra || e > 0
			}
		}
		w.Padding = tensor.Pads(pairs...)
		if extra && p.Reduction == tensor.WindowMean {
			return p.ceilMean(x, w, user)
		}
	}
	return tensor.ReduceWindow(x, p.Reduction, w)
}

// ceilMean is the mean of ceil mode's windows with the padding counted,
// as PyTorch's avg_pool with ceil_mode and count_include_pad: a window is
// divided by the number of its elements inside the input and the layer's
// padding user, so a last window that reaches into the extra high padding
// of ceil mode is divided by less than the kernel's size. The divisor is a
// product of one vector per spatial dimension.
func (p Pool) ceilMean(x *tensor.Tensor, w tensor.Window, user [][2]int) *tensor.Tensor {
	sum := tensor.ReduceWindow(x, tensor.WindowSum, w)
	lead := x.Rank() - len(p.Kernel)
	var div *tensor.Tensor
	for d, k := range p.Kernel {
		n := sum.Dim(lead + d)
		in, s, dil := x.Dim(lead+d), p.Stride[d], p.Dilation[d]
		counts := make([]float64, n)
		for o := range counts {
			// The taps start + j·dil, j < k, before in + the high padding.
			start := o*s - user[lead+d][0]
			counts[o] = float64(min(k, (in+user[lead+d][1]-start+dil-1)/dil))
		}
		shape := square(1, x.Rank())
		shape[lead+d] = n
		c := tensor.Convert(tensor.FromFloat64s(counts, shape...), x.DType())
		if div == nil {
			div = c
		} else {
			div = tensor.Mul(div, c)
		}
	}
	return tensor.Div(sum, div)
}

// ceilExtra is the high padding that makes the floor of the output size
// its ceiling, without a window starting past the input and its low
// padding (PyTorch's rule).
func (p Pool) ceilExtra(in int, pad [2]int, d int) int {
	s := p.Stride[d]
	span := in + pad[0] + pad[1] - (p.Kernel[d]-1)*p.Dilation[d] - 1
	if span < 0 {
		return 0
	}
	out := (span+s-1)/s + 1
	if (out-1)*s >= in+pad[0] {
		out--
	}
	return (out-1)*s - span
}

// Call is Forward, ignoring key; it makes a Pool a Module.
func (p Pool) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return p.Forward(x) }

// AdaptivePool reduces the spatial dimensions of channels-first batches to
// a fixed size with PyTorch's adaptive windows (eqx.nn.AdaptiveAvgPool2d
// and friends, PyTorch's AdaptiveAvgPool/AdaptiveMaxPool): along a
// dimension of n elements, output t reduces elements
// [⌊t·n/out⌋, ⌈(t+1)·n/out⌉). AdaptiveAvgPool with Out all ones is global
// average pooling.
type AdaptivePool struct {
	Reduction tensor.WindowReduction
	Out       []int `pytree:"static"`
}

// NewAdaptiveAvgPool returns adaptive average pooling to the sizes out
// (one per spatial dimension, 1 to 3).
func NewAdaptiveAvgPool(out ...int) AdaptivePool {
	return newAdaptive("nn.NewAdaptiveAvgPool", tensor.WindowMean, out)
}

// NewAdaptiveMaxPool returns adaptive max pooling to the sizes out.
func NewAdaptiveMaxPool(out ...int) AdaptivePool {
	return newAdaptive("nn.NewAdaptiveMaxPool", tensor.WindowMax, out)
}

func newAdaptive(fn string, r tensor.WindowReduction, out []int) AdaptivePool {
	if len(out) < 1 || len(out) > 3 {
		panic(fmt.Sprintf("%s: %v: want 1 to 3 output sizes", fn, out))
	}
	for _, o := range out {
		if o < 1 {
			panic(fmt.Sprintf("%s: %v: want positive output sizes", fn, out))
		}
	}
	return AdaptivePool{Reduction: r, Out: slices.Clone(out)}
}

// Forward pools x [N, C, spatial...] or one example [C, spatial...] to
// [.., C, Out...].
func (p AdaptivePool) Forward(x *tensor.Tensor) *tensor.Tensor {
	requireInput("nn.AdaptivePool", "x", x)
	nd := len(p.Out)
	if nd == 0 {
		panic("nn.AdaptivePool: Out is empty (the zero AdaptivePool has no output size; build it with nn.NewAdaptiveAvgPool or nn.NewAdaptiveMaxPool)")
	}
	if !x.DType().IsFloat() || (x.Rank() != nd+2 && x.Rank() != nd+1) {
		panic(fmt.Sprintf("nn.AdaptivePool: x %v: want float [N, C, %d spatial dimensions] or [C, ...]", x, nd))
	}
	return tensor.AdaptivePool(x, p.Reduction, p.Out...)
}

// Call is Forward, ignoring key; it makes an AdaptivePool a Module.
func (p AdaptivePool) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return p.Forward(x) }
