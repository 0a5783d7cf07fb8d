package tensor

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor/internal/conv"
)

// PaddingMode says how a Padding is computed (JAX's padding strings).
type PaddingMode uint8

const (
	// PadExplicit pads by Padding.Pairs (none when nil): JAX's sequence of
	// (low, high) pairs.
	PadExplicit PaddingMode = iota
	// PadValid pads nothing ("VALID").
	PadValid
	// PadSame pads so that an output dimension has ⌈in/stride⌉ elements,
	// the extra element, if any, on the high side ("SAME").
	PadSame
	// PadSameLower is PadSame with the extra element on the low side
	// ("SAME_LOWER").
	PadSameLower
)

// Padding is the padding of a convolution's or a window's input: explicit
// (low, high) pairs per padded dimension, or a mode that computes them.
// The zero value pads nothing.
type Padding struct {
	Mode PaddingMode
	// Pairs are the (low, high) paddings of each dimension for
	// PadExplicit; negative values crop. Nil pads nothing.
	Pairs [][2]int
}

// Pads returns explicit padding by the given (low, high) pairs.
func Pads(pairs ...[2]int) Padding { return Padding{Pairs: pairs} }

// SamePadding and ValidPadding are JAX's "SAME" and "VALID".
var (
	SamePadding  = Padding{Mode: PadSame}
	ValidPadding = Padding{Mode: PadValid}
)

// String formats p as JAX spells it: "SAME", "VALID" or the pairs.
func (p Padding) String() string {
	switch p.Mode {
	case PadValid:
		return "VALID"
	case PadSame:
		return "SAME"
	case PadSameLower:
		return "SAME_LOWER"
	}
	return fmt.Sprint(p.Pairs)
}

// resolve returns the (low, high) pairs of n dimensions of dilated sizes
// in (input) and k (window), with strides s.
func (p Padding) resolve(what string, in, k, s []int) (lo, hi []int) {
	n := len(in)
	lo, hi = make([]int, n), make([]int, n)
	switch p.Mode {
	case PadExplicit:
		if p.Pairs == nil {
			return lo, hi
		}
		if len(p.Pairs) != n {
			panic(fmt.Sprintf("%s: padding %v: want %d (low, high) pairs", what, p.Pairs, n))
		}
		for d, lh := range p.Pairs {
			lo[d], hi[d] = lh[0], lh[1]
		}
	case PadValid:
	case PadSame, PadSameLower:
		for d := range in {
			out := (in[d] + s[d] - 1) / s[d]
			total := max(0, (out-1)*s[d]+k[d]-in[d])
			lo[d] = total / 2
			if p.Mode == PadSameLower {
				lo[d] = total - total/2
			}
			hi[d] = total - lo[d]
		}
	default:
		panic(fmt.Sprintf("%s: unknown padding mode %d", what, p.Mode))
	}
	return lo, hi
}

// ConvSpec configures Conv: lax.conv_general_dilated's arguments other
// than the operands, in its NCHW/OIHW layout. Per-dimension slices have
// one entry per spatial dimension; nil means 1 (or no padding).
type ConvSpec struct {
	// Strides are the window strides.
	Strides []int
	// Padding pads the (dilated) input.
	Padding Padding
	// LhsDilation dilates the input: d-1 zeros between neighbours.
	LhsDilation []int
	// RhsDilation dilates the kernel (atrous convolution).
	RhsDilation []int
	// Groups is feature_group_count: the input and output channels are
	// cut into Groups groups, each convolved with its own kernels
	// (Groups = input channels is a depthwise convolution). 0 means 1.
	Groups int
}

// convParams are the static parameters of the convolution ops: the
// spatial geometry, with the channel and batch sizes taken from the
// operands (so that the blocks of a placed convolution need no params of
// their own). other is the spatial size the operands do not give: the
// input's for conv_transpose, the kernel's for conv_kernel_grad.
type convParams struct {
	stride, lo, hi, lhsDil, rhsDil []int
	groups                         int
	other                          []int
}

// kernel returns the conv.Params of x [N, C, in...] convolved with a
// kernel of o output channels and spatial size k.
func (p *convParams) kernel(n, c, o int, in, k []int) *conv.Params {
	return &conv.Params{N: n, C: c, O: o, Groups: p.groups, In: in, Kernel: k,
		Stride: p.stride, PadLo: p.lo, PadHi: p.hi, LhsDil: p.lhsDil, RhsDil: p.rhsDil}
}

// threads is the goroutine budget of a kernel on these operands: one
// inside shard.Map, every core otherwise.
func threads(xs ...*Tensor) int {
	if isLocal(xs...) {
		return 1
	}
	return 0
}

var convOp, convTransposeOp, convKernelGradOp *Op

func init() {
	// conv: (x, w) -> y.
	convOp = &Op{
		Name: "conv",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*convParams)
			x, w := in[0], in[1]
			cp := p.kernel(x.shape[0], x.shape[1], w.shape[0], x.shape[2:], w.shape[2:])
			y := newOutUninit(x.dtype, append([]int{x.shape[0], w.shape[0]}, cp.Out()...))
			if x.dtype == Float64 {
				conv64(cp, y.f64(), x.f64(), w.f64())
				return y
			}
			conv.Forward(cp, y.f32(), x.f32(), w.f32(), threads(x, w))
			return y
		},
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*convParams)
			x, w := in[0], in[1]
			res := make([]*Tensor, 2)
			if Wants(need, 0) {
				res[0] = Apply(convTransposeOp, p.with(x.shape[2:]), g, w)
			}
			if Wants(need, 1) {
				res[1] = Apply(convKernelGradOp, p.with(w.shape[2:]), x, g)
			}
			return res
		},
		Save:     SaveInputs(0, 1),
		Sharding: ShardingRule{Family: ShardConv, Params: convDescribe},
		JVP:      bilinearJVP(&convOp),
		Batch:    convBatch(&convOp, convRoles{a: 1, b: 0, out: 1}),
	}
	// conv_transpose: (dy, w) -> dx, the transpose of conv in its first
	// operand (other: dx's spatial size).
	convTransposeOp = &Op{
		Name: "conv_transpose",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*convParams)
			dy, w := in[0], in[1]
			c := w.shape[1] * p.groups
			cp := p.kernel(dy.shape[0], c, w.shape[0], p.other, w.shape[2:])
			dx := newOutUninit(dy.dtype, append([]int{dy.shape[0], c}, p.other...))
			if dy.dtype == Float64 {
				convBackwardInput64(cp, dx.f64(), dy.f64(), w.f64())
				return dx
			}
			conv.BackwardInput(cp, dx.f32(), dy.f32(), w.f32(), threads(dy, w))
			return dx
		},
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*convParams)
			dy, w := in[0], in[1]
			res := make([]*Tensor, 2)
			if Wants(need, 0) {
				res[0] = Apply(convOp, p, g, w)
			}
			if Wants(need, 1) {
				res[1] = Apply(convKernelGradOp, p.with(w.shape[2:]), g, dy)
			}
			return res
		},
		Save:     SaveInputs(0, 1),
		Sharding: ShardingRule{Family: ShardConvTranspose, Params: convDescribe},
		JVP:      bilinearJVP(&convTransposeOp),
		Batch:    convBatch(&convTransposeOp, convRoles{a: 1, b: 0, out: 1}),
	}
	// conv_kernel_grad: (x, dy) -> dw, the transpose of conv in its second
	// operand (other: dw's spatial size).
	convKernelGradOp = &Op{
		Name: "conv_kernel_grad",
		// The VJP returns results of ops that allocate them.
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64},
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*convParams)
			x, dy := in[0], in[1]
			cp := p.kernel(x.shape[0], x.shape[1], dy.shape[1], x.shape[2:], p.other)
			dw := newOutUninit(x.dtype, append([]int{dy.shape[1], x.shape[1] / p.groups}, p.other...))
			if x.dtype == Float64 {
				convBackwardKernel64(cp, dw.f64(), x.f64(), dy.f64())
				return dw
			}
			conv.BackwardKernel(cp, dw.f32(), x.f32(), dy.f32(), threads(x, dy))
			return dw
		},
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*convParams)
			x, dy := in[0], in[1]
			res := make([]*Tensor, 2)
			if Wants(need, 0) {
				res[0] = Apply(convTransposeOp, p.with(x.shape[2:]), dy, g)
			}
			if Wants(need, 1) {
				res[1] = Apply(convOp, p, x, g)
			}
			return res
		},
		Save:     SaveInputs(0, 1),
		Sharding: ShardingRule{Family: ShardConvKernelGrad, Params: convDescribe},
		JVP:      bilinearJVP(&convKernelGradOp),
		Batch:    convBatch(&convKernelGradOp, convRoles{a: 1, b: 1, out: 0}),
	}
}

// convDescribe tells the sharding rules the feature groups.
func convDescribe(p any) OpParams { return OpParams{N: p.(*convParams).groups} }

// bilinearJVP is the JVP of an op bilinear in its two operands:
// op(ta, b) + op(a, tb).
func bilinearJVP(op **Op) func(prim, tan, outs []*Tensor, p any) []*Tensor {
	return func(prim, tan, _ []*Tensor, p any) []*Tensor {
		var t *Tensor
		if tan[0] != nil {
			t = Apply(*op, p, tan[0], prim[1])
		}
		if tan[1] != nil {
			u := Apply(*op, p, prim[0], tan[1])
			if t == nil {
				t = u
			} else {
				t = Add(t, u)
			}
		}
		return []*Tensor{t}
	}
}

// convRoles says where the channels of the three convolution ops are: the
// dimension holding each group's channels in the first operand (a), the
// second (b) and the result (out): 1 for the channels of an
// [N, C, spatial...] operand, 0 for the output channels of a kernel.
type convRoles struct{ a, b, out int }

// convBatch is the batching rule of the convolution ops. A batch of the
// first operand alone joins its examples' batch dimension (N). Otherwise
// each example has a kernel of its own: the batch becomes feature groups
// (the examples' channels side by side, one group set per example), as
// lax.conv_general_dilated batches.
func convBatch(op **Op, r convRoles) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, batched []bool, pp any) []*Tensor {
		p := pp.(*convParams)
		a, b := in[0], in[1]
		if batched[0] && !batched[1] && *op != convKernelGradOp {
			// [B, N, ...] → [B·N, ...] and back.
			n := a.shape[0]
			y := Apply(*op, p, Reshape(a, append([]int{n * a.shape[1]}, a.shape[2:]...)...), b)
			return []*Tensor{Reshape(y, append([]int{n, a.shape[1]}, y.shape[1:]...)...)}
		}
		ins := materializeAll(in, batched)
		nb := batchSize(in, batched)
		// Fold the batch into each operand's channel dimension: an
		// [N, C, ...] operand (role 1) moves it next to its channels, a
		// kernel (role 0) merges it into its output channels.
		fold := func(x *Tensor, role int) *Tensor {
			if role == 1 {
				x = moveAxis(x, 0, 1) // [N, B, C, ...]
				return Reshape(x, append([]int{x.shape[0], nb * x.shape[2]}, x.shape[3:]...)...)
			}
			return Reshape(x, append([]int{nb * x.shape[1]}, x.shape[2:]...)...)
		}
		q := *p
		q.groups *= nb
		y := Apply(*op, &q, fold(ins[0], r.a), fold(ins[1], r.b))
		if r.out == 1 { // [N, B·C, ...] → [B, N, C, ...]
			y = Reshape(y, append([]int{y.shape[0], nb, y.shape[1] / nb}, y.shape[2:]...)...)
			return []*Tensor{moveAxis(y, 1, 0)}
		}
		return []*Tensor{Reshape(y, append([]int{nb, y.shape[0] / nb}, y.shape[1:]...)...)}
	}
}

// with returns p with other set to sizes.
func (p *convParams) with(sizes []int) *convParams {
	q := *p
	q.other = slices.Clone(sizes)
	return &q
}

// Conv convolves x, f32[N, C, spatial...] (1 to 3 spatial dimensions,
// channels first), with the kernel w, f32[O, C/Groups, k...], as
// lax.conv_general_dilated does with dimension numbers NCH/OIH, NCHW/OIHW
// or NCDHW/OIDHW:
//
//	y[n, o, t] = Σ_{c, k} w[o, c, k] · x[n, g·C/G + c, i]   where i·LhsDilation = t·Stride + k·RhsDilation - PadLow
//
// summed over the taps whose position i is a whole index inside the input
// (g the group of output channel o), giving f32[N, O, out...] with
// out = ⌊(din + low + high - dk)/stride⌋ + 1 per dimension (din and dk the
// dilated input and kernel sizes; 0 if the padded input is shorter than
// the kernel). Its gradients are convolutions too (ConvTranspose for x),
// to any order. Half-precision operands are computed in float32.
func Conv(x, w *Tensor, spec ConvSpec) *Tensor {
	checkNil("tensor.Conv", "x w", x, w)
	p := checkConv("tensor.Conv", x, w, spec)
	return Apply(convOp, p, x, w)
}

// checkConv validates Conv's operands and returns the params.
func checkConv(op string, x, w *Tensor, spec ConvSpec) *convParams {
	desc := func() string { return op + ": " + operands(",", x, w) }
	if !sameFloat(x, w) {
		panic(floatMismatch(desc(), "operands must be float32", x, w))
	}
	nd := len(x.shape) - 2
	if nd < 1 || nd > conv.MaxDims || len(w.shape) != len(x.shape) {
		panic(fmt.Sprintf("%s: want x [N, C, spatial...] and w [O, C/groups, kernel...] with 1 to %d spatial dimensions", desc(), conv.MaxDims))
	}
	p := &convParams{groups: max(spec.Groups, 1), stride: ones(nd), lhsDil: ones(nd), rhsDil: ones(nd)}
	for _, s := range []struct {
		name string
		v    []int
		dst  []int
	}{{"strides", spec.Strides, p.stride}, {"lhs dilation", spec.LhsDilation, p.lhsDil}, {"rhs dilation", spec.RhsDilation, p.rhsDil}} {
		if s.v == nil {
			continue
		}
		if len(s.v) != nd {
			panic(fmt.Sprintf("%s: %s %v: want %d values", desc(), s.name, s.v, nd))
		}
		for d, v := range s.v {
			if v < 1 {
				panic(fmt.Sprintf("%s: %s %v: want positive values", desc(), s.name, s.v))
			}
			s.dst[d] = v
		}
	}
	if spec.Groups < 0 {
		panic(fmt.Sprintf("%s: %d feature groups", desc(), spec.Groups))
	}
	c, o := x.shape[1], w.shape[0]
	if c%p.groups != 0 || o%p.groups != 0 || w.shape[1]*p.groups != c {
		panic(fmt.Sprintf("%s: %d input channels, kernel for %d per group in %d groups of %d output channels", desc(), c, w.shape[1], p.groups, o))
	}
	din, dk := make([]int, nd), make([]int, nd)
	for d := 0; d < nd; d++ {
		if w.shape[2+d] < 1 {
			panic(fmt.Sprintf("%s: empty kernel", desc()))
		}
		if n := x.shape[2+d]; n > 0 {
			din[d] = (n-1)*p.lhsDil[d] + 1
		}
		dk[d] = (w.shape[2+d]-1)*p.rhsDil[d] + 1
	}
	p.lo, p.hi = spec.Padding.resolve(desc(), din, dk, p.stride)
	return p
}

// ConvTransposeSpec configures ConvTranspose, in PyTorch's terms.
type ConvTransposeSpec struct {
	// Strides, Padding (explicit pairs only), Dilation and Groups are those
	// of the convolution whose input gradient ConvTranspose computes.
	Strides []int
	Padding [][2]int
	// OutputPadding adds that many elements at the high end of each
	// output dimension, which the stride leaves ambiguous (less than the
	// stride or the dilation).
	OutputPadding []int
	Dilation      []int
	Groups        int
}

// ConvTranspose is the transposed convolution (PyTorch's
// conv_transpose1d/2d/3d, lax.conv_transpose with transpose_kernel): the
// gradient of Conv with respect to its input. x is f32[N, Cin, in...] and
// w f32[Cin, Cout/Groups, k...] (PyTorch's layout: the kernel of the
// convolution from Cout to Cin channels that this transposes); the result
// is f32[N, Cout, out...] with
//
//	out = (in-1)·stride - low - high + dilation·(k-1) + 1 + output padding
//
// per spatial dimension. Its gradients are Conv (for x) and the kernel
// gradient of that convolution, to any order.
func ConvTranspose(x, w *Tensor, spec ConvTransposeSpec) *Tensor {
	const op = "tensor.ConvTranspose"
	checkNil(op, "x w", x, w)
	desc := func() string { return op + ": " + operands(",", x, w) }
	if !sameFloat(x, w) {
		panic(floatMismatch(desc(), "operands must be float32", x, w))
	}
	nd := len(x.shape) - 2
	if nd < 1 || nd > conv.MaxDims || len(w.shape) != len(x.shape) {
		panic(fmt.Sprintf("%s: want x [N, Cin, spatial...] and w [Cin, Cout/groups, kernel...] with 1 to %d spatial dimensions", desc(), conv.MaxDims))
	}
	groups := max(spec.Groups, 1)
	if spec.Groups < 0 || x.shape[1] != w.shape[0] || w.shape[0]%groups != 0 {
		panic(fmt.Sprintf("%s: %d input channels, kernel for %d in %d groups", desc(), x.shape[1], w.shape[0], groups))
	}
	opad := spec.OutputPadding
	if opad != nil && len(opad) != nd {
		panic(fmt.Sprintf("%s: output padding %v: want %d values", desc(), opad, nd))
	}
	// The convolution from the result to x: its input size is out.
	cs := ConvSpec{Strides: spec.Strides, Padding: Pads(spec.Padding...), RhsDilation: spec.Dilation, Groups: groups}
	if spec.Padding == nil {
		cs.Padding = Padding{}
	}
	probe := &Tensor{shape: append([]int{x.shape[0], w.shape[1] * groups}, make([]int, nd)...), dtype: x.dtype}
	p := checkConv(op, probe, w, cs)
	out := make([]int, nd)
	for d := 0; d < nd; d++ {
		op := 0
		if opad != nil {
			op = opad[d]
		}
		if op < 0 || (op >= p.stride[d] && op >= p.rhsDil[d]) {
			panic(fmt.Sprintf("%s: output padding %v: want each value below its stride or dilation", desc(), opad))
		}
		dk := (w.shape[2+d]-1)*p.rhsDil[d] + 1
		out[d] = (x.shape[2+d]-1)*p.stride[d] - p.lo[d] - p.hi[d] + dk + op
		if out[d] < 0 {
			panic(fmt.Sprintf("%s: padding %v leaves a negative output size", desc(), spec.Padding))
		}
		// The convolution reads out's last op elements through no tap: it
		// sees them cropped.
		p.hi[d] -= op
	}
	p.other = out
	return Apply(convTransposeOp, p, x, w)
}
