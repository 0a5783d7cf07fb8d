package tensor

import (
	"fmt"
	"slices"
)

// This file holds resample, the op behind PadWith's reflect, replicate
// and circular modes and behind Interpolate: a separable weighted gather.
// Along each axis a map sends every result position i to k source
// positions with weights (one tap of weight 1 for padding and nearest
// neighbours, two for linear interpolation; an identity map for the axes
// left alone), and a result element is the sum over the taps of all the
// axes of the product of their weights times the source element:
//
//	out[i₀, i₁, ...] = Σ_t w₀[i₀,t₀]·w₁[i₁,t₁]··· x[idx₀[i₀,t₀], idx₁[i₁,t₁], ...]
//
// The op is linear in x: its transpose, resample_transpose, scatters
// each element back along the same taps with the same weights (the
// gradient of reflect padding adds the mirrored border into the edge, the
// gradient of upsampling sums each source's contributions), and each
// op's VJP is the other.

// axisMap maps one axis of resample's operand, n elements long, to its
// result, m elements long.
type axisMap struct {
	n, m int
	// k is the number of taps of a result position; 0 is the identity
	// (m = n).
	k int
	// idx holds the m·k source positions (in [0, n)), tap by tap for each
	// result position.
	idx []int
	// w holds the m·k weights; nil weighs every tap 1.
	w []float64
}

// resampleParams are resample's and resample_transpose's parameters: one
// map per axis of the operand of resample.
type resampleParams struct {
	axes []axisMap
}

// shapes returns the shapes of resample's operand and result.
func (p *resampleParams) shapes() (in, out []int) {
	in, out = make([]int, len(p.axes)), make([]int, len(p.axes))
	for d, a := range p.axes {
		in[d], out[d] = a.n, a.m
	}
	return in, out
}

// first returns the first axis whose map is not the identity (the axes
// before are a batch for the sharding rule).
func (p *resampleParams) first() int {
	for d, a := range p.axes {
		if a.k != 0 {
			return d
		}
	}
	return len(p.axes)
}

// gather reports whether every map has one tap of weight 1: resample then
// moves data and takes every dtype.
func (p *resampleParams) gather() bool {
	for _, a := range p.axes {
		if a.k > 1 || a.w != nil {
			return false
		}
	}
	return true
}

// batched returns p with an identity map of b elements in front.
func (p *resampleParams) batched(b int) *resampleParams {
	return &resampleParams{axes: append([]axisMap{{n: b, m: b}}, p.axes...)}
}

func (p *resampleParams) String() string {
	in, out := p.shapes()
	return fmt.Sprintf("%v to %v", in, out)
}

var resampleOp, resampleTOp *Op

func init() {
	// The axes with identity maps keep their sharding, the others are
	// gathered: a block's maps are the identities of its own size there.
	sharding := ShardingRule{Family: ShardWindow,
		Params: func(pp any) OpParams { return OpParams{N: pp.(*resampleParams).first()} },
		Block: func(pp any, blocks []*Tensor) any {
			p := pp.(*resampleParams)
			q := &resampleParams{axes: slices.Clone(p.axes)}
			for d, a := range q.axes {
				if a.k == 0 {
					q.axes[d].n, q.axes[d].m = blocks[0].shape[d], blocks[0].shape[d]
				}
			}
			return q
		}}
	resampleOp = &Op{
		Name:     "resample",
		Sharding: sharding,
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*resampleParams)
			x := in[0]
			local := x.local() != nil
			_, shape := p.shapes()
			if p.gather() {
				out := newOutUninit(x.dtype, shape) // every element written once
				switch x.dtype {
				case Float32:
					resampleGather(out.f32(), x.f32(), p, local)
				case Float64:
					resampleGather(out.f64(), x.f64(), p, local)
				case Int32:
					resampleGather(out.i32(), x.i32(), p, local)
				case Int64:
					resampleGather(out.i64(), x.i64(), p, local)
				case Uint8:
					resampleGather(out.u8(), x.u8(), p, local)
				case Bool:
					resampleGather(out.b(), x.b(), p, local)
				default:
					panic(fmt.Sprintf("tensor: resample: %v: unsupported dtype", x))
				}
				return out
			}
			out := newOut(x.dtype, shape)
			switch x.dtype {
			case Float32:
				resampleSum(out.f32(), x.f32(), p, false, local)
			case Float64:
				resampleSum(out.f64(), x.f64(), p, false, local)
			default:
				panic(fmt.Sprintf("tensor: resample: %v: weighted taps need float data", x))
			}
			return out
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			return one1(Apply(resampleTOp, pp, g))
		},
		JVP: linearJVP(&resampleOp),
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			return one1(Apply(resampleOp, pp.(*resampleParams).batched(in[0].shape[0]), in[0]))
		},
		Traits: Traits{Types: TypesAll, Reuse: FreshVJP},
	}
	resampleTOp = &Op{
		Name:     "resample_transpose",
		Sharding: sharding,
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*resampleParams)
			g := in[0]
			local := g.local() != nil
			shape, _ := p.shapes()
			out := newOut(g.dtype, shape)
			switch g.dtype {
			case Float32:
				resampleSum(out.f32(), g.f32(), p, true, local)
			case Float64:
				resampleSum(out.f64(), g.f64(), p, true, local)
			default:
				panic(fmt.Sprintf("tensor: resample_transpose: %v: want float data", g))
			}
			return out
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			return one1(Apply(resampleOp, pp, g))
		},
		JVP: linearJVP(&resampleTOp),
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			return one1(Apply(resampleTOp, pp.(*resampleParams).batched(in[0].shape[0]), in[0]))
		},
		Traits: Traits{Types: TypesFloat64, Reuse: FreshVJP},
	}
}

// resample applies the maps of p to x (which has p's operand shape).
func resample(x *Tensor, p *resampleParams) *Tensor { return Apply(resampleOp, p, x) }

// resampleGather writes dst (the result) from src for maps of one tap of
// weight 1: each result element is one source element.
func resampleGather[T any](dst, src []T, p *resampleParams, local bool) {
	if len(dst) == 0 {
		return
	}
	in, out := p.shapes()
	ist, ost := contiguousStrides(in), contiguousStrides(out)
	r := len(p.axes)
	if r == 0 {
		dst[0] = src[0]
		return
	}
	var walk func(d, io, oo int)
	// step walks result position i of axis d.
	step := func(d, i, io, oo int) {
		j := i
		if p.axes[d].k != 0 {
			j = p.axes[d].idx[i]
		}
		walk(d+1, io+j*ist[d], oo+i*ost[d])
	}
	walk = func(d, io, oo int) {
		a := &p.axes[d]
		if d == r-1 {
			if a.k == 0 {
				copy(dst[oo:oo+a.m], src[io:io+a.n])
				return
			}
			s := src[io : io+a.n]
			for i, j := range a.idx {
				dst[oo+i] = s[j]
			}
			return
		}
		for i := range a.m {
			step(d, i, io, oo)
		}
	}
	if r == 1 {
		walk(0, 0, 0)
		return
	}
	// The result positions of the first axis own disjoint parts of dst.
	parallelFor(p.axes[0].m, ost[0]*costCheap, 1, local, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			step(0, i, 0, 0)
		}
	})
}

// resampleSum adds into dst, zeroed: resample of src when transpose is
// false (dst has the result shape), its transpose when true (src has the
// result shape, dst the operand's). The taps are visited in the same
// order either way, axis by axis; products of the weights of the outer
// axes are formed in float64, and each result element of the last axis
// sums its taps (weights rounded to T) before it is scaled by them.
func resampleSum[T float32 | float64](dst, src []T, p *resampleParams, transpose, local bool) {
	if len(dst) == 0 || len(src) == 0 {
		return
	}
	in, out := p.shapes()
	ist, ost := contiguousStrides(in), contiguousStrides(out)
	r := len(p.axes)
	if r == 0 {
		dst[0] += src[0]
		return
	}
	last := &p.axes[r-1]
	// The last axis's weights in T (ones when it has none).
	var wl []T
	if last.k > 0 {
		wl = make([]T, len(last.idx))
		for j := range wl {
			wl[j] = 1
			if last.w != nil {
				wl[j] = T(last.w[j])
			}
		}
	}
	var walk func(d, io, oo int, w float64)
	var step func(d, i, io, oo int, w float64) // result position i of axis d
	walk = func(d, io, oo int, w float64) {
		a := &p.axes[d]
		if d == r-1 {
			wf := T(w)
			switch {
			case a.k == 0 && transpose:
				dd, g := dst[io:io+a.n], src[oo:oo+a.m]
				for i, v := range g {
					dd[i] += wf * v
				}
			case a.k == 0:
				dd, x := dst[oo:oo+a.m], src[io:io+a.n]
				for i, v := range x {
					dd[i] += wf * v
				}
			case transpose:
				dd, g := dst[io:io+a.n], src[oo:oo+a.m]
				k, idx := a.k, a.idx[:a.m*a.k]
				for i, v := range g {
					v *= wf
					for t := range k {
						dd[idx[i*k+t]] += wl[i*k+t] * v
					}
				}
			case a.k == 2:
				dd, x := dst[oo:oo+a.m], src[io:io+a.n]
				idx, ww := a.idx[:2*len(dd)], wl[:2*len(dd)]
				for i := range dd {
					dd[i] += wf * (ww[2*i]*x[idx[2*i]] + ww[2*i+1]*x[idx[2*i+1]])
				}
			default:
				dd, x := dst[oo:oo+a.m], src[io:io+a.n]
				k, idx := a.k, a.idx[:a.m*a.k]
				for i := range dd {
					var acc T
					for t := range k {
						acc += wl[i*k+t] * x[idx[i*k+t]]
					}
					dd[i] += wf * acc
				}
			}
			return
		}
		for i := range a.m {
			step(d, i, io, oo, w)
		}
	}
	step = func(d, i, io, oo int, w float64) {
		a := &p.axes[d]
		if a.k == 0 {
			walk(d+1, io+i*ist[d], oo+i*ost[d], w)
			return
		}
		for t := range a.k {
			wt := w
			if a.w != nil {
				wt *= a.w[i*a.k+t]
			}
			walk(d+1, io+a.idx[i*a.k+t]*ist[d], oo+i*ost[d], wt)
		}
	}
	a0 := &p.axes[0]
	if r == 1 || (transpose && a0.k != 0) {
		walk(0, 0, 0, 1)
		return
	}
	// The result positions of the first axis own disjoint parts of the
	// result (of the operand, for the transpose, when the first axis is
	// an identity): each goroutine adds into its own, in the serial
	// order, the bits of the serial loop.
	taps := max(a0.k, 1)
	parallelFor(a0.m, ost[0]*taps*costCheap, 1, local, func(lo, hi int) {
		for i := lo; i < hi; i++ {
			step(0, i, 0, 0, 1)
		}
	})
}

// identityMaps returns identity maps for shape.
func identityMaps(shape []int) []axisMap {
	m := make([]axisMap, len(shape))
	for d, n := range shape {
		m[d] = axisMap{n: n, m: n}
	}
	return m
}

// isIdentity reports whether every map of axes is the identity.
func isIdentity(axes []axisMap) bool {
	return !slices.ContainsFunc(axes, func(a axisMap) bool { return a.k != 0 })
}
