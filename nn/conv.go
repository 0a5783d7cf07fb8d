package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// ConvAxes returns logical axes for a stack of convolutions that tensor
// parallelism should split, in the Megatron pattern of MegatronAxes: the
// kernels [out, in/groups, k...] of convolutions 0, 2, ... are named
// (AxisMLP, AxisEmbed), column-parallel (their output channels, and the
// bias and any BatchNorm or GroupNorm over them, split over "tp" by
// parallel.TP's rules), those of 1, 3, ... (AxisEmbed, AxisMLP),
// row-parallel (their input channels split, each device's partial sums
// reduced by the consumer). Name a normalisation between them after the
// channels it sees: AxisMLP after an even convolution.
func ConvAxes(layers int) [][2]string {
	out := make([][2]string, layers)
	for i := range out {
		if i%2 == 0 {
			out[i] = [2]string{AxisMLP, AxisEmbed}
		} else {
			out[i] = [2]string{AxisEmbed, AxisMLP}
		}
	}
	return out
}

// Padding returns symmetric padding of p[d] elements on both sides of
// spatial dimension d, or of p[0] on every dimension when it is the only
// value: the int or sequence-of-ints padding of eqx.nn.Conv and PyTorch.
// tensor.Pads gives per-side pairs, tensor.SamePadding and
// tensor.ValidPadding JAX's modes.
func Padding(p ...int) tensor.Padding {
	pairs := make([][2]int, len(p))
	for i, v := range p {
		pairs[i] = [2]int{v, v}
	}
	return tensor.Pads(pairs...)
}

// ConvOptions configures NewConv and its 1-, 2- and 3-D forms. The zero
// value gives Equinox's eqx.nn.Conv: stride 1, no padding, no dilation,
// one group, a bias, and weight and bias uniform in ±1/√fan_in with
// fan_in = in/groups · Π kernel (PyTorch's default too).
type ConvOptions struct {
	// Stride, Dilation: one value per spatial dimension, or one for all;
	// nil means 1.
	Stride, Dilation []int
	// Padding pads the input: Padding(1) (one value or one per
	// dimension, both sides), tensor.Pads (per side; one pair for all
	// dimensions or one per dimension), tensor.SamePadding,
	// tensor.ValidPadding. The zero value pads nothing.
	Padding tensor.Padding
	// PaddingMode fills the padding: tensor.PadZeros (the zero value),
	// PadReflect, PadReplicate or PadCircular, PyTorch's padding_mode
	// "zeros", "reflect", "replicate" and "circular" (with Equinox's
	// padding_mode too). Other than zeros, the input is padded by
	// tensor.PadWith and convolved without padding, with PadWith's limits
	// (reflect padding below the input's size).
	PaddingMode tensor.PadMode
	// Groups is the number of feature groups (in and out must be
	// divisible by it); in = out = Groups is a depthwise convolution. 0
	// means 1.
	Groups int
	// NoBias leaves out the bias (use_bias=False).
	NoBias bool
	// WeightInit and BiasInit draw the kernel and the [out] bias; nil
	// means Equinox's uniform.
	WeightInit, BiasInit Initializer
	// Axes are the logical names of the kernel's output and input channel
	// dimensions (ConvAxes for tensor parallelism); the bias gets Axes[0].
	// The zero value names nothing; the spatial dimensions stay unnamed.
	Axes [2]string
}

// Conv is an N-dimensional convolution over channels-first batches
// (eqx.nn.Conv, PyTorch's Conv1d/2d/3d): x [N, in, spatial...] to
// [N, out, spatial'...], Weight [out, in/groups, kernel...] and an [out]
// bias. Equinox's Conv takes one example; this one takes a batch (and a
// single example [in, spatial...] too).
type Conv struct {
	Weight *tensor.Tensor // f32[out, in/groups, kernel...]
	Bias   *tensor.Tensor // f32[out], or nil

	Stride, Dilation []int          `pytree:"static"`
	Padding          tensor.Padding `pytree:"static"`
	// PaddingMode fills the padding (ConvOptions.PaddingMode).
	PaddingMode tensor.PadMode `pytree:"static"`
	Groups      int
}

// NewConv returns a convolution from in to out channels with the given
// kernel size (its length is the number of spatial dimensions, 1 to 3),
// its parameters drawn from key.
func NewConv(key tensor.Key, in, out int, kernel []int, opts ConvOptions) Conv {
	const fn = "nn.NewConv"
	nd, groups, fanIn := checkConvSizes(fn, in, out, kernel, opts.Groups)
	c := Conv{Groups: groups, Padding: perDim(fn, opts.Padding, nd), PaddingMode: opts.PaddingMode}
	if c.PaddingMode > tensor.PadCircular {
		panic(fmt.Sprintf("%s: padding mode %v: want PadZeros, PadReflect, PadReplicate or PadCircular", fn, c.PaddingMode))
	}
	c.Stride = broadcastInts(fn, "stride", opts.Stride, nd)
	c.Dilation = broadcastInts(fn, "dilation", opts.Dilation, nd)
	shape := append([]int{out, in / groups}, kernel...)
	bias := out
	if opts.NoBias {
		bias = 0
	}
	c.Weight, c.Bias = convParams(fn, key, shape, fanIn, bias, opts.Axes[0], opts.WeightInit, opts.BiasInit, opts.Axes)
	return c
}

// NewConv1d, NewConv2d and NewConv3d return a Conv with a kernel of that
// size along each of its 1, 2 or 3 spatial dimensions.
func NewConv1d(key tensor.Key, in, out, kernel int, opts ConvOptions) Conv {
	return NewConv(key, in, out, []int{kernel}, opts)
}

// NewConv2d is NewConv with a kernel×kernel kernel.
func NewConv2d(key tensor.Key, in, out, kernel int, opts ConvOptions) Conv {
	return NewConv(key, in, out, []int{kernel, kernel}, opts)
}

// NewConv3d is NewConv with a kernel³ kernel.
func NewConv3d(key tensor.Key, in, out, kernel int, opts ConvOptions) Conv {
	return NewConv(key, in, out, []int{kernel, kernel, kernel}, opts)
}

// checkConvSizes checks a convolution's channel counts, groups and
// kernel size and returns the number of spatial dimensions, the groups (0
// means 1) and the fan-in in/groups · Π kernel.
func checkConvSizes(fn string, in, out int, kernel []int, g int) (nd, groups, fanIn int) {
	nd, groups = len(kernel), max(g, 1)
	if nd < 1 || nd > 3 {
		panic(fmt.Sprintf("%s: kernel %v: want 1 to 3 spatial dimensions", fn, kernel))
	}
	if in < 1 || out < 1 || in%groups != 0 || out%groups != 0 || g < 0 {
		panic(fmt.Sprintf("%s: %d to %d channels in %d groups: want positive channel counts the groups divide", fn, in, out, groups))
	}
	fanIn = in / groups
	for _, k := range kernel {
		if k < 1 {
			panic(fmt.Sprintf("%s: kernel %v: want positive sizes", fn, kernel))
		}
		fanIn *= k
	}
	return nd, groups, fanIn
}

// convParams draws a kernel of the given shape and a bias of bias
// elements (none if 0), uniform in ±1/√fanIn unless initializers are
// given, and names their axes: the kernel's first two dimensions axes,
// the bias biasAxis.
func convParams(fn string, key tensor.Key, shape []int, fanIn, bias int, biasAxis string, winit, binit Initializer, axes [2]string) (w, b *tensor.Tensor) {
	lim := 1 / math.Sqrt(float64(fanIn))
	if winit == nil {
		winit = UniformRange(-lim, lim)
	}
	if binit == nil {
		binit = UniformRange(-lim, lim)
	}
	wkey, bkey := key.Split2()
	names := make([]string, len(shape))
	names[0], names[1] = axes[0], axes[1]
	w = withAxes(checkInit(fn, "weight", winit(wkey, shape...), shape...), names...)
	if bias > 0 {
		b = withAxes(checkInit(fn, "bias", binit(bkey, bias), bias), biasAxis)
	}
	return w, b
}

// broadcastInts returns v for nd dimensions: nil as ones, one value
// repeated.
func broadcastInts(fn, what string, v []int, nd int) []int {
	switch len(v) {
	case 0:
		v = []int{1}
		fallthrough
	case 1:
		out := make([]int, nd)
		for i := range out {
			out[i] = v[0]
		}
		return out
	case nd:
		return slices.Clone(v)
	}
	panic(fmt.Sprintf("%s: %s %v: want one value or %d", fn, what, v, nd))
}

// perDim returns p with explicit pairs for nd dimensions (one pair
// repeated).
func perDim(fn string, p tensor.Padding, nd int) tensor.Padding {
	if p.Mode != tensor.PadExplicit || p.Pairs == nil {
		return p
	}
	switch len(p.Pairs) {
	case 1:
		pairs := make([][2]int, nd)
		for i := range pairs {
			pairs[i] = p.Pairs[0]
		}
		return tensor.Pads(pairs...)
	case nd:
		return tensor.Pads(slices.Clone(p.Pairs)...)
	}
	panic(fmt.Sprintf("%s: padding %v: want one pair or %d", fn, p, nd))
}

// spatialDims returns the number of spatial dimensions of a kernel.
func spatialDims(w *tensor.Tensor) int { return w.Rank() - 2 }

// batched returns x with a batch dimension (a single example of rank
// nd+1 gets one of size 1) and whether it added it.
func batched(fn string, x, w *tensor.Tensor, channels int) (*tensor.Tensor, bool) {
	nd := spatialDims(w)
	switch {
	case x.Rank() == nd+2 && x.Dim(1) == channels:
		return x, false
	case x.Rank() == nd+1 && x.Dim(0) == channels:
		return tensor.ExpandDims(x, 0), true
	}
	panic(fmt.Sprintf("%s: x %v, kernel %v: want x [N, %d, %d spatial dimensions] or one example [%d, ...]", fn, x, w, channels, nd, channels))
}

// addChannelBias adds b [C] to y [N, C, spatial...].
func addChannelBias(y, b *tensor.Tensor) *tensor.Tensor {
	if b == nil {
		return y
	}
	shape := make([]int, y.Rank()-1)
	for i := range shape {
		shape[i] = 1
	}
	shape[0] = b.Dim(0)
	return tensor.Add(y, tensor.Reshape(b, shape...))
}

// In returns the number of input channels.
func (c Conv) In() int { return c.Weight.Dim(1) * max(c.Groups, 1) }

// Out returns the number of output channels.
func (c Conv) Out() int { return c.Weight.Dim(0) }

// Forward convolves x [N, in, spatial...] (or one example [in,
// spatial...]) and adds the bias.
func (c Conv) Forward(x *tensor.Tensor) *tensor.Tensor {
	return c.ForwardAct(x, nil)
}

// ForwardAct returns act(c.Forward(x)); nil act means none. For float32
// and float64 layers with a bias, the bias and an activation of this
// package that tensor.BiasAct fuses (Relu above all) are one sweep over
// the convolution's output (tensor.ChannelAffine with unit scales): one
// pass and one activation-sized result fewer. The values are bit for bit
// those of the composition, the gradients within rounding (the bias's is
// summed in float64).
func (c Conv) ForwardAct(x *tensor.Tensor, act Activation) *tensor.Tensor {
	requireBuilt("nn.Conv", "Weight", c.Weight, "nn.NewConv2d or NewConv, NewConv1d, NewConv3d")
	requireParamDType("nn.Conv", x, c.Weight)
	xb, added := batched("nn.Conv", x, c.Weight, c.In())
	pad := c.Padding
	if c.PaddingMode != tensor.PadZeros {
		xb, pad = tensor.PadWith(xb, c.modePads(xb), c.PaddingMode), tensor.Padding{}
	}
	y := tensor.Conv(xb, c.Weight, tensor.ConvSpec{Strides: c.Stride, Padding: pad, RhsDilation: c.Dilation, Groups: c.Groups})
	if a, ok := act.Fused(); ok && c.Bias != nil && fusedAffine(y) && c.Bias.DType() == y.DType() {
		y = tensor.ChannelAffine(y, tensor.Ones(y.DType(), y.Dim(1)), c.Bias, a)
	} else {
		y = addChannelBias(y, c.Bias)
		if act != nil {
			y = act(y)
		}
	}
	if added {
		y = tensor.Squeeze(y, 0)
	}
	return y
}

// modePads returns the padding of x [N, C, spatial...] for tensor.PadWith
// when c pads by a mode other than zeros: c.Padding's pairs, or those of
// SAME for c's kernel, strides and dilations.
func (c Conv) modePads(x *tensor.Tensor) [][2]int {
	nd := spatialDims(c.Weight)
	pads := make([][2]int, nd+2)
	p := perDim("nn.Conv", c.Padding, nd)
	switch p.Mode {
	case tensor.PadExplicit:
		if p.Pairs != nil {
			copy(pads[2:], p.Pairs)
		}
	case tensor.PadValid:
	case tensor.PadSame, tensor.PadSameLower:
		for d := range nd {
			s, dil := at1(c.Stride, d), at1(c.Dilation, d)
			k := dil*(c.Weight.Dim(d+2)-1) + 1
			n := x.Dim(d + 2)
			out := (n + s - 1) / s
			total := max(0, (out-1)*s+k-n)
			lo := total / 2
			if p.Mode == tensor.PadSameLower {
				lo = total - total/2
			}
			pads[d+2] = [2]int{lo, total - lo}
		}
	}
	for d, lh := range pads {
		if lh[0] < 0 || lh[1] < 0 {
			panic(fmt.Sprintf("nn.Conv: padding %v with mode %v: want no negative padding", c.Padding, c.PaddingMode))
		}
		n, most := x.Dim(d), max(lh[0], lh[1])
		switch {
		case c.PaddingMode == tensor.PadReflect && most >= n:
			panic(fmt.Sprintf("nn.Conv: x %v, padding %v with mode %v: spatial axis %d pads %d, which reflect needs below its size %d", x, c.Padding, c.PaddingMode, d-2, most, n))
		case c.PaddingMode == tensor.PadCircular && most > n:
			panic(fmt.Sprintf("nn.Conv: x %v, padding %v with mode %v: spatial axis %d pads %d, which circular needs at most its size %d", x, c.Padding, c.PaddingMode, d-2, most, n))
		case c.PaddingMode == tensor.PadReplicate && most > 0 && n == 0:
			panic(fmt.Sprintf("nn.Conv: x %v, padding %v with mode %v: spatial axis %d is empty", x, c.Padding, c.PaddingMode, d-2))
		}
	}
	return pads
}

// at1 returns v[d] of a per-dimension value: 1 when v is nil, v[0] when
// it has one value for all.
func at1(v []int, d int) int {
	switch len(v) {
	case 0:
		return 1
	case 1:
		return v[0]
	}
	return v[d]
}

// Call is Forward, ignoring key; it makes a Conv a Module.
func (c Conv) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return c.Forward(x) }

// ConvTransposeOptions configures NewConvTranspose. The zero value gives
// Equinox's eqx.nn.ConvTranspose: stride 1, no padding or output padding,
// no dilation, one group, a bias, weight and bias uniform in
// ±1/√(in/groups · Π kernel).
type ConvTransposeOptions struct {
	// Stride, Padding, Dilation and Groups are those of the convolution
	// whose transpose this is (one value per dimension or one for all;
	// padding as explicit pairs or Padding(p...)).
	Stride, Dilation []int
	Padding          tensor.Padding
	Groups           int
	// OutputPadding adds elements at the high end of each output
	// dimension (below the stride or the dilation), to choose among the
	// input sizes a strided convolution maps to one output size.
	OutputPadding []int
	NoBias        bool
	// WeightInit, BiasInit and Axes are as in ConvOptions; Axes names the
	// kernel's first two dimensions (in, out/groups).
	WeightInit, BiasInit Initializer
	Axes                 [2]string
}

// ConvTranspose is an N-dimensional transposed convolution
// (eqx.nn.ConvTranspose, PyTorch's ConvTranspose1d/2d/3d): the gradient of
// a Conv with respect to its input, mapping x [N, in, spatial...] to
// [N, out, spatial'...] with
//
//	spatial' = (spatial-1)·stride - low - high + dilation·(kernel-1) + 1 + output padding.
//
// Weight is stored [in, out/groups, kernel...], PyTorch's layout: the
// kernel of the Conv from out to in channels that it transposes (Equinox
// stores [out, in/groups, kernel...] flipped). Bias is [out].
type ConvTranspose struct {
	Weight *tensor.Tensor // f32[in, out/groups, kernel...]
	Bias   *tensor.Tensor // f32[out], or nil

	Stride, Dilation, OutputPadding []int    `pytree:"static"`
	Padding                         [][2]int `pytree:"static"`
	Groups                          int
}

// NewConvTranspose returns a transposed convolution from in to out
// channels with the given kernel size.
func NewConvTranspose(key tensor.Key, in, out int, kernel []int, opts ConvTransposeOptions) ConvTranspose {
	const fn = "nn.NewConvTranspose"
	nd, groups, fanIn := checkConvSizes(fn, in, out, kernel, opts.Groups)
	c := ConvTranspose{Groups: groups}
	c.Stride = broadcastInts(fn, "stride", opts.Stride, nd)
	c.Dilation = broadcastInts(fn, "dilation", opts.Dilation, nd)
	op := opts.OutputPadding
	if op == nil {
		op = []int{0}
	}
	c.OutputPadding = broadcastInts(fn, "output padding", op, nd)
	pad := perDim(fn, opts.Padding, nd)
	switch pad.Mode {
	case tensor.PadExplicit:
		c.Padding = pad.Pairs
		if c.Padding == nil {
			c.Padding = make([][2]int, nd)
		}
	case tensor.PadValid:
		c.Padding = make([][2]int, nd)
	default:
		panic(fmt.Sprintf("%s: padding %v: want explicit pairs or VALID", fn, pad))
	}
	shape := append([]int{in, out / groups}, kernel...)
	bias := out
	if opts.NoBias {
		bias = 0
	}
	c.Weight, c.Bias = convParams(fn, key, shape, fanIn, bias, opts.Axes[1], opts.WeightInit, opts.BiasInit, opts.Axes)
	return c
}

// NewConvTranspose1d, NewConvTranspose2d and NewConvTranspose3d return a
// ConvTranspose with a kernel of that size along each spatial dimension.
func NewConvTranspose1d(key tensor.Key, in, out, kernel int, opts ConvTransposeOptions) ConvTranspose {
	return NewConvTranspose(key, in, out, []int{kernel}, opts)
}

// NewConvTranspose2d is NewConvTranspose with a kernel×kernel kernel.
func NewConvTranspose2d(key tensor.Key, in, out, kernel int, opts ConvTransposeOptions) ConvTranspose {
	return NewConvTranspose(key, in, out, []int{kernel, kernel}, opts)
}

// NewConvTranspose3d is NewConvTranspose with a kernel³ kernel.
func NewConvTranspose3d(key tensor.Key, in, out, kernel int, opts ConvTransposeOptions) ConvTranspose {
	return NewConvTranspose(key, in, out, []int{kernel, kernel, kernel}, opts)
}

// In returns the number of input channels.
func (c ConvTranspose) In() int { return c.Weight.Dim(0) }

// Out returns the number of output channels.
func (c ConvTranspose) Out() int { return c.Weight.Dim(1) * max(c.Groups, 1) }

// Forward applies the transposed convolution to x [N, in, spatial...] (or
// one example [in, spatial...]) and adds the bias.
func (c ConvTranspose) Forward(x *tensor.Tensor) *tensor.Tensor {
	requireBuilt("nn.ConvTranspose", "Weight", c.Weight, "nn.NewConvTranspose2d or NewConvTranspose, NewConvTranspose1d, NewConvTranspose3d")
	requireParamDType("nn.ConvTranspose", x, c.Weight)
	xb, added := batched("nn.ConvTranspose", x, c.Weight, c.In())
	y := tensor.ConvTranspose(xb, c.Weight, tensor.ConvTransposeSpec{Strides: c.Stride, Padding: c.Padding,
		OutputPadding: c.OutputPadding, Dilation: c.Dilation, Groups: c.Groups})
	y = addChannelBias(y, c.Bias)
	if added {
		y = tensor.Squeeze(y, 0)
	}
	return y
}

// Call is Forward, ignoring key; it makes a ConvTranspose a Module.
func (c ConvTranspose) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return c.Forward(x) }
