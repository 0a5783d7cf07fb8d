package tensor

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor/internal/vec"
	"github.com/gonox/gonox/tensor/internal/vec/f64"
)

// gru_cell is the elementwise part of one GRU step (torch.nn.GRU's cell)
// in one sweep over the rows: from the input's projection xp = x·W_ih +
// b_ih and the state's hg = h·W_hh + b_hh, both [..., 3H] with the gates
// in PyTorch's order (reset, update, new), and the state h [..., H],
//
//	r = σ(xp_r + hg_r), z = σ(xp_z + hg_z)
//	n = tanh(xp_n + r·hg_n),  h' = n + z·(h − n)
//
// Composed, a step splits both projections into six tensors, makes ten
// elementwise passes forward and more backward, and concatenates the
// gradients of both projections. The op's second result is the activated
// gates (r, z, n) [..., 3H], which the backward pass keeps with hg and h;
// gru_cell_bwd computes the gradients of xp, hg and h in one more sweep.
var gruCellOp, gruCellBwdOp *Op

func init() {
	gruCellOp = &Op{
		Name: "gru_cell",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			xp, hg, h := in[0], in[1], in[2]
			hn, act := newOutUninit(h.dtype, h.shape), newOutUninit(h.dtype, xp.shape)
			H := h.shape[len(h.shape)-1]
			rows := numel(h.shape) / max(H, 1)
			run := func(lo, hi int) {
				if h.dtype == Float64 {
					gruCellRows(hn.f64(), act.f64(), xp.f64(), hg.f64(), h.f64(), H, lo, hi, f64.Sigmoid, f64.Tanh)
				} else {
					gruCellRows(hn.f32(), act.f32(), xp.f32(), hg.f32(), h.f32(), H, lo, hi, vec.Sigmoid, vec.Tanh)
				}
			}
			if serial(rows*H*4*costMath, isLocal(in...)) {
				run(0, rows)
			} else {
				parallelFor(rows, H*4*costMath, 1, false, run)
			}
			return []*Tensor{hn, act}, nil
		},
		VJPN:  gruCellVJP,
		Save:  SaveInputs(1, 2) | SaveOutput,
		JVP:   gruCellJVP,
		Batch: materializeBatch(&gruCellOp),
		// Package shard never meets the op: GRUCell composes propagated
		// ops for placed operands. (Gathering is the zero rule.)
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64}, // the backward op allocates its results
	}
	// gru_cell_bwd: (dh', hg, h, act) → (dxp, dhg, dh) in one sweep. Not
	// differentiable itself: gru_cell's VJP composes ops instead when its
	// values are traced (higher derivatives) or carry tangents.
	gruCellBwdOp = &Op{
		Name: "gru_cell_bwd",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			hg, h := in[1], in[2]
			dxp, dhg, dh := newOutUninit(h.dtype, hg.shape), newOutUninit(h.dtype, hg.shape), newOutUninit(h.dtype, h.shape)
			H := h.shape[len(h.shape)-1]
			rows := numel(h.shape) / max(H, 1)
			run := func(lo, hi int) {
				if h.dtype == Float64 {
					gruCellBwdRows(dxp.f64(), dhg.f64(), dh.f64(), in[0].f64(), hg.f64(), h.f64(), in[3].f64(), H, lo, hi)
				} else {
					gruCellBwdRows(dxp.f32(), dhg.f32(), dh.f32(), in[0].f32(), hg.f32(), h.f32(), in[3].f32(), H, lo, hi)
				}
			}
			if serial(rows*H*4*costCheap, isLocal(in...)) {
				run(0, rows)
			} else {
				parallelFor(rows, H*4*costCheap, 1, false, run)
			}
			return []*Tensor{dxp, dhg, dh}, nil
		},
		Batch:  materializeBatch(&gruCellBwdOp),
		Traits: Traits{Types: TypesFloat64},
	}
}

// gruCellRows is gru_cell's kernel on rows [lo, hi), with the dtype's
// Sigmoid and Tanh kernels (the ops' own, so that the activations are the
// composition's bit for bit); the conversions round each product as the
// composition's ops do.
func gruCellRows[T float32 | float64](hn, act, xp, hg, h []T, H, lo, hi int, sig, tanh func(dst, src []T)) {
	for row := lo; row < hi; row++ {
		a, x, g := act[row*3*H:(row+1)*3*H], xp[row*3*H:(row+1)*3*H], hg[row*3*H:(row+1)*3*H]
		for j := range 2 * H {
			a[j] = x[j] + g[j]
		}
		sig(a[:2*H], a[:2*H])
		r, z, n := a[:H], a[H:2*H], a[2*H:]
		for j := range n {
			n[j] = x[2*H+j] + T(r[j]*g[2*H+j])
		}
		tanh(n, n)
		hr, out := h[row*H:(row+1)*H], hn[row*H:(row+1)*H]
		for j := range out {
			out[j] = n[j] + T(z[j]*(hr[j]-n[j]))
		}
	}
}

// gruCellBwdRows is gru_cell_bwd's kernel on rows [lo, hi): from the
// cotangent d of h',
//
//	dn' = d·(1 − z)·(1 − n²),  dr' = dn'·hg_n·r(1 − r)
//	dz' = d·(h − n)·z(1 − z),  dh = d·z
//	dxp = (dr', dz', dn'),  dhg = (dr', dz', dn'·r)
func gruCellBwdRows[T float32 | float64](dxp, dhg, dh, d, hg, h, act []T, H, lo, hi int) {
	for row := lo; row < hi; row++ {
		a, g := act[row*3*H:(row+1)*3*H], hg[row*3*H:(row+1)*3*H]
		dx, dg := dxp[row*3*H:(row+1)*3*H], dhg[row*3*H:(row+1)*3*H]
		r, z, n := a[:H], a[H:2*H], a[2*H:]
		dr, hr, dhr := d[row*H:(row+1)*H], h[row*H:(row+1)*H], dh[row*H:(row+1)*H]
		for j := range dr {
			dnp := T(dr[j]*(1-z[j])) * (1 - T(n[j]*n[j]))
			drp := T(dnp*g[2*H+j]) * T(r[j]*(1-r[j]))
			dzp := T(dr[j]*(hr[j]-n[j])) * T(z[j]*(1-z[j]))
			dx[j], dx[H+j], dx[2*H+j] = drp, dzp, dnp
			dg[j], dg[H+j], dg[2*H+j] = drp, dzp, dnp*r[j]
			dhr[j] = dr[j] * z[j]
		}
	}
}

// GRUCell returns the new hidden state of one GRU step, torch.nn.GRU's
// elementwise part: from the input's projection xp = x·W_ih + b_ih and
// the state's hg = h·W_hh + b_hh, both [..., 3H] with the gates in
// PyTorch's order (reset, update, new), and the state h [..., H],
//
//	r = σ(xp_r + hg_r), z = σ(xp_z + hg_z)
//	n = tanh(xp_n + r·hg_n),  h' = (1 − z)·n + z·h  (as n + z·(h − n)).
//
// On host operands (float32, float64, or half widened to float32) it is
// one op (gru_cell) forward and one backward, which keeps the activated
// gates, hg and h and computes the gradients of xp, hg and h in one
// sweep; its results and gradients equal the composition's from Split,
// Sigmoid, Tanh, Mul, Add and Sub within rounding (the forward result bit
// for bit in float64 and, for H a multiple of 8, in float32). Placed
// operands take the composition.
//
// It panics unless xp, hg and h have one float dtype, at least one axis,
// the same leading axes, and xp's and hg's last axis is 3 times h's.
func GRUCell(xp, hg, h *Tensor) *Tensor {
	const name = "tensor.GRUCell"
	checkNil(name, "xp hg h", xp, hg, h)
	r := len(h.shape)
	if !h.dtype.IsFloat() || xp.dtype != h.dtype || hg.dtype != h.dtype || r == 0 || !slices.Equal(xp.shape, hg.shape) ||
		len(xp.shape) != r || !slices.Equal(xp.shape[:r-1], h.shape[:r-1]) || xp.shape[r-1] != 3*h.shape[r-1] {
		panic(fmt.Sprintf("%s: %s: want xp and hg [..., 3H] and h [..., H] of one float dtype", name, operands("", xp, hg, h)))
	}
	if xp.layout() != nil || hg.layout() != nil || h.layout() != nil {
		return gruCellComposed(xp, hg, h)
	}
	return ApplyN(gruCellOp, nil, xp, hg, h)[0]
}

// gruCellComposed is GRUCell from ops.
func gruCellComposed(xp, hg, h *Tensor) *Tensor {
	H := h.shape[len(h.shape)-1]
	is := SplitSizes(xp, -1, []int{2 * H, H})
	hs := SplitSizes(hg, -1, []int{2 * H, H})
	rz := Split(Sigmoid(Add(is[0], hs[0])), -1, 2)
	n := Tanh(Add(is[1], Mul(rz[0], hs[1])))
	return Add(n, Mul(rz[1], Sub(h, n)))
}

// gruCellVJP is gru_cell's VJP: the fused backward op on untraced values,
// the composition of ops otherwise (and for a cotangent of the activated
// gates, which only higher derivatives give).
func gruCellVJP(gs, in, outs []*Tensor, _ any, _ any) []*Tensor {
	hg, h, act := in[1], in[2], outs[1]
	d, ga := gs[0], gs[1]
	if d == nil {
		d = ZerosLike(h)
	}
	if ga == nil && !higherOrder(d, hg, h, act) && d.layout() == nil {
		return ApplyN(gruCellBwdOp, nil, d, hg, h, act)
	}
	p, q := Split(act, -1, 3), Split(hg, -1, 3)
	r, z, n := p[0], p[1], p[2]
	dn, dz, dr := Mul(d, Sub(Scalar(1), z)), Mul(d, Sub(h, n)), (*Tensor)(nil)
	if ga != nil {
		a := Split(ga, -1, 3)
		dn, dz, dr = Add(dn, a[2]), Add(dz, a[1]), a[0]
	}
	dnp := Mul(dn, Sub(Scalar(1), Square(n)))
	drn := Mul(dnp, q[2])
	if dr != nil {
		drn = Add(drn, dr)
	}
	drp, dzp := Mul(drn, sigmoidSlope(r)), Mul(dz, sigmoidSlope(z))
	return []*Tensor{Concat(-1, drp, dzp, dnp), Concat(-1, drp, dzp, Mul(dnp, r)), Mul(d, z)}
}

// gruCellJVP is gru_cell's forward-mode rule: the tangents of r and z
// from those of their pre-activations, then n's and h”s.
func gruCellJVP(x, t, outs []*Tensor, _ any) []*Tensor {
	hg, h, act := x[1], x[2], outs[1]
	tan := func(i int, like *Tensor) *Tensor {
		if t[i] == nil {
			return ZerosLike(like)
		}
		return t[i]
	}
	txp, thg, th := Split(tan(0, act), -1, 3), Split(tan(1, act), -1, 3), tan(2, h)
	p, q := Split(act, -1, 3), Split(hg, -1, 3)
	r, z, n := p[0], p[1], p[2]
	dr := Mul(Add(txp[0], thg[0]), sigmoidSlope(r))
	dz := Mul(Add(txp[1], thg[1]), sigmoidSlope(z))
	dn := Mul(Add(Add(txp[2], Mul(dr, q[2])), Mul(r, thg[2])), Sub(Scalar(1), Square(n)))
	dh := Add(Add(dn, Mul(dz, Sub(h, n))), Mul(z, Sub(th, dn)))
	return []*Tensor{dh, Concat(-1, dr, dz, dn)}
}
