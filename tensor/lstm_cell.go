package tensor

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor/internal/vec"
	"github.com/gonox/gonox/tensor/internal/vec/f64"
)

// lstm_cell is the elementwise part of one LSTM step (torch.nn.LSTM's
// cell) in one sweep over the rows: from the gates' pre-activations
// [..., 4H] (input, forget, cell, output, PyTorch's order), given as one
// operand or as two that it adds (x·W_ih + b and h·W_hh), and the cell
// state c [..., H],
//
//	c' = σ(f)·c + σ(i)·tanh(g),  h = σ(o)·tanh(c')
//
// Composed from Split, Sigmoid, Tanh, Mul and Add, a step copies the
// gates into four tensors, makes seven elementwise passes forward and
// more backward, and concatenates the gates' gradients again. The op's
// third result is the activated gates [..., 4H] (σ(i), σ(f), tanh(g),
// σ(o)), which the backward pass keeps with c and c' (h is kept by the
// next step's product anyway); lstm_cell_bwd computes the gradients of
// the gates and of c in one more sweep, recomputing tanh(c').
var lstmCellOp, lstmCellBwdOp *Op

func init() {
	lstmCellOp = &Op{
		Name: "lstm_cell",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			gates, c := in[0], in[len(in)-1]
			h, cn := newOutUninit(c.dtype, c.shape), newOutUninit(c.dtype, c.shape)
			act := newOutUninit(c.dtype, gates.shape)
			H := c.shape[len(c.shape)-1]
			rows := numel(c.shape) / max(H, 1)
			run := func(lo, hi int) {
				if c.dtype == Float64 {
					var hh []float64
					if len(in) == 3 {
						hh = in[1].f64()
					}
					lstmCellRows(h.f64(), cn.f64(), act.f64(), gates.f64(), hh, c.f64(), H, lo, hi, f64.Sigmoid, f64.Tanh)
				} else {
					var hh []float32
					if len(in) == 3 {
						hh = in[1].f32()
					}
					lstmCellRows(h.f32(), cn.f32(), act.f32(), gates.f32(), hh, c.f32(), H, lo, hi, vec.Sigmoid, vec.Tanh)
				}
			}
			if serial(rows*H*5*costMath, isLocal(in...)) {
				run(0, rows)
			} else {
				parallelFor(rows, H*5*costMath, 1, false, run)
			}
			return []*Tensor{h, cn, act}, nil
		},
		VJPN: lstmCellVJP,
		// params: the number of gate operands, 1 or 2; c follows them.
		SaveFor: func(p any) SaveMask { return SaveInputs(p.(int)) | SaveOutput },
		JVP:     lstmCellJVP,
		Batch:   materializeBatch(&lstmCellOp),
		// Package shard never meets the op: LSTMCell composes propagated
		// ops for placed operands. (Gathering is the zero rule.) Not
		// FreshVJP: with two gate operands the VJP returns the gates'
		// cotangent for both.
		Traits: Traits{Types: TypesFloat64},
	}
	// lstm_cell_bwd: (dh, dc', c, c', act) → (dgates, dc) in one sweep.
	// Not differentiable itself: lstm_cell's VJP composes ops instead when
	// its values are traced (higher derivatives) or carry tangents.
	lstmCellBwdOp = &Op{
		Name: "lstm_cell_bwd",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			c, act := in[2], in[4]
			dg, dc := newOutUninit(c.dtype, act.shape), newOutUninit(c.dtype, c.shape)
			H := c.shape[len(c.shape)-1]
			rows := numel(c.shape) / max(H, 1)
			run := func(lo, hi int) {
				if c.dtype == Float64 {
					lstmCellBwdRows(dg.f64(), dc.f64(), in[0].f64(), in[1].f64(), c.f64(), in[3].f64(), act.f64(), H, lo, hi, f64.Tanh)
				} else {
					lstmCellBwdRows(dg.f32(), dc.f32(), in[0].f32(), in[1].f32(), c.f32(), in[3].f32(), act.f32(), H, lo, hi, vec.Tanh)
				}
			}
			if serial(rows*H*6*costMath, isLocal(in...)) {
				run(0, rows)
			} else {
				parallelFor(rows, H*6*costMath, 1, false, run)
			}
			return []*Tensor{dg, dc}, nil
		},
		Batch:  materializeBatch(&lstmCellBwdOp),
		Traits: Traits{Types: TypesFloat64},
	}
}

// lstmCellRows is lstm_cell's kernel on rows [lo, hi): sig and tanh are
// the dtype's Sigmoid and Tanh kernels (those of the Sigmoid and Tanh ops,
// so that the activations are the composition's bit for bit). The
// conversions keep each product rounded, as the composition's Mul and Add
// round them.
func lstmCellRows[T float32 | float64](h, cn, act, gates, hh, c []T, H, lo, hi int, sig, tanh func(dst, src []T)) {
	for r := lo; r < hi; r++ {
		a, x := act[r*4*H:(r+1)*4*H], gates[r*4*H:(r+1)*4*H]
		if hh != nil {
			for k, v := range hh[r*4*H : (r+1)*4*H] {
				a[k] = x[k] + v
			}
			x = a
		}
		sig(a[:2*H], x[:2*H])
		tanh(a[2*H:3*H], x[2*H:3*H])
		sig(a[3*H:], x[3*H:])
		i, f, g, o := a[:H], a[H:2*H], a[2*H:3*H], a[3*H:4*H]
		cr, cnr, hr := c[r*H:(r+1)*H], cn[r*H:(r+1)*H], h[r*H:(r+1)*H]
		for j := range cnr {
			cnr[j] = T(f[j]*cr[j]) + T(i[j]*g[j])
		}
		tanh(hr, cnr)
		for j := range hr {
			hr[j] = o[j] * hr[j]
		}
	}
}

// lstmCellBwdRows is lstm_cell_bwd's kernel on rows [lo, hi): from the
// cotangents dh and dcn of h and c', with t = tanh(c') recomputed,
//
//	dc' = dcn + dh·σ(o)·(1 − t²)
//	do = dh·t·σ(o)(1 − σ(o)),  di = dc'·tanh(g)·σ(i)(1 − σ(i))
//	df = dc'·c·σ(f)(1 − σ(f)), dg = dc'·σ(i)·(1 − tanh(g)²)
//	dc = dc'·σ(f)
func lstmCellBwdRows[T float32 | float64](dgates, dc, dh, dcn, c, cn, act []T, H, lo, hi int, tanh func(dst, src []T)) {
	for r := lo; r < hi; r++ {
		a, d := act[r*4*H:(r+1)*4*H], dgates[r*4*H:(r+1)*4*H]
		i, f, g, o := a[:H], a[H:2*H], a[2*H:3*H], a[3*H:4*H]
		dcr := dc[r*H : (r+1)*H]
		tanh(dcr, cn[r*H:(r+1)*H]) // t, overwritten below
		dhr, dcnr, cr := dh[r*H:(r+1)*H], dcn[r*H:(r+1)*H], c[r*H:(r+1)*H]
		for j := range dcr {
			t := dcr[j]
			ct := dcnr[j] + T(T(dhr[j]*o[j])*(1-T(t*t)))
			d[3*H+j] = T(dhr[j]*t) * T(o[j]*(1-o[j]))
			d[j] = T(ct*g[j]) * T(i[j]*(1-i[j]))
			d[H+j] = T(ct*cr[j]) * T(f[j]*(1-f[j]))
			d[2*H+j] = T(ct*i[j]) * (1 - T(g[j]*g[j]))
			dcr[j] = ct * f[j]
		}
	}
}

// LSTMCell returns the new hidden and cell states of one LSTM step,
// torch.nn.LSTMCell's elementwise part: from the gates' pre-activations
// xp + hh [..., 4H] (x·W_ih + b_ih + b_hh and h·W_hh, say; a nil hh is
// none, as at a zero state), with the gates in PyTorch's order (input,
// forget, cell, output), and the cell state c [..., H],
//
//	c' = σ(f)·c + σ(i)·tanh(g),  h = σ(o)·tanh(c').
//
// On host operands (float32, float64, or half widened to float32) it is
// one op (lstm_cell) forward and one backward, which keeps the activated
// gates, c and c' and computes the gradients of the gates and c in one
// sweep; its results and gradients equal the composition's from Add,
// Split, Sigmoid, Tanh and Mul within rounding (the forward results bit for bit in
// float64 and, for H a multiple of 8, in float32). Placed operands take
// the composition.
//
// It panics unless xp, hh (if not nil) and c have one float dtype, at
// least one axis, the same leading axes, xp and hh one shape, and xp's
// last axis is 4 times c's.
func LSTMCell(xp, hh, c *Tensor) (h, cNew *Tensor) {
	const name = "tensor.LSTMCell"
	checkNil(name, "xp c", xp, c)
	gr, cr := len(xp.shape), len(c.shape)
	if !xp.dtype.IsFloat() || xp.dtype != c.dtype || gr == 0 || gr != cr ||
		!slices.Equal(xp.shape[:gr-1], c.shape[:cr-1]) || xp.shape[gr-1] != 4*c.shape[cr-1] ||
		hh != nil && (hh.dtype != xp.dtype || !slices.Equal(hh.shape, xp.shape)) {
		ops := operands("", xp, c)
		if hh != nil {
			ops = operands("", xp, hh, c)
		}
		panic(fmt.Sprintf("%s: %s: want xp and hh [..., 4H] and c [..., H] of one float dtype", name, ops))
	}
	if hh == nil {
		if xp.layout() != nil || c.layout() != nil {
			return lstmCellComposed(xp, c)
		}
		out := ApplyN(lstmCellOp, 1, xp, c)
		return out[0], out[1]
	}
	if xp.layout() != nil || hh.layout() != nil || c.layout() != nil {
		return lstmCellComposed(Add(xp, hh), c)
	}
	out := ApplyN(lstmCellOp, 2, xp, hh, c)
	return out[0], out[1]
}

// lstmCellComposed is LSTMCell from ops, on the gates' sum.
func lstmCellComposed(gates, c *Tensor) (h, cNew *Tensor) {
	p := Split(gates, -1, 4)
	i, f, g, o := Sigmoid(p[0]), Sigmoid(p[1]), Tanh(p[2]), Sigmoid(p[3])
	cNew = Add(Mul(f, c), Mul(i, g))
	return Mul(o, Tanh(cNew)), cNew
}

// sigmoidSlope is y(1 − y), σ' from σ's output y.
func sigmoidSlope(y *Tensor) *Tensor { return Mul(y, Sub(Scalar(1), y)) }

// lstmCellVJP is lstm_cell's VJP: the fused backward op on untraced
// values, the composition of ops otherwise (and for a cotangent of the
// activated gates, which only higher derivatives give).
func lstmCellVJP(gs, in, outs []*Tensor, _ any, _ any) []*Tensor {
	dgates, dc := lstmCellVJPGates(gs, in[len(in)-1], outs)
	if len(in) == 3 {
		return []*Tensor{dgates, dgates, dc} // both gate operands
	}
	return []*Tensor{dgates, dc}
}

// lstmCellVJPGates returns the cotangents of the gates' sum and of c.
func lstmCellVJPGates(gs []*Tensor, c *Tensor, outs []*Tensor) (dgates, dc *Tensor) {
	cn, act := outs[1], outs[2]
	gh, gc, ga := gs[0], gs[1], gs[2]
	if ga == nil && !higherOrder(gh, gc, c, cn, act) && (gh == nil || gh.layout() == nil) && (gc == nil || gc.layout() == nil) {
		if gh == nil {
			gh = ZerosLike(c)
		}
		if gc == nil {
			gc = ZerosLike(c)
		}
		res := ApplyN(lstmCellBwdOp, nil, gh, gc, c, cn, act)
		return res[0], res[1]
	}
	p := Split(act, -1, 4)
	i, f, g, o := p[0], p[1], p[2], p[3]
	t := Tanh(cn)
	ct, do := gc, ZerosLike(c)
	if gh != nil {
		dt := Mul(Mul(gh, o), Sub(Scalar(1), Square(t)))
		if ct == nil {
			ct = dt
		} else {
			ct = Add(ct, dt)
		}
		do = Mul(gh, t)
	}
	if ct == nil {
		ct = ZerosLike(c)
	}
	di, df, dg := Mul(ct, g), Mul(ct, c), Mul(ct, i)
	if ga != nil {
		q := Split(ga, -1, 4)
		di, df, dg, do = Add(di, q[0]), Add(df, q[1]), Add(dg, q[2]), Add(do, q[3])
	}
	dgates = Concat(-1, Mul(di, sigmoidSlope(i)), Mul(df, sigmoidSlope(f)), Mul(dg, Sub(Scalar(1), Square(g))), Mul(do, sigmoidSlope(o)))
	return dgates, Mul(ct, f)
}

// lstmCellJVP is lstm_cell's forward-mode rule: the tangents of the
// activated gates from the gates', then those of c' and h.
func lstmCellJVP(x, t, outs []*Tensor, _ any) []*Tensor {
	n := len(x) - 1 // gate operands
	c, tcp, cn, act := x[n], t[n], outs[1], outs[2]
	p := Split(act, -1, 4)
	i, f, g, o := p[0], p[1], p[2], p[3]
	tg := t[0]
	if n == 2 && t[1] != nil {
		if tg == nil {
			tg = t[1]
		} else {
			tg = Add(tg, t[1])
		}
	}
	var dact *Tensor
	if tg != nil {
		slope := Concat(-1, sigmoidSlope(i), sigmoidSlope(f), Sub(Scalar(1), Square(g)), sigmoidSlope(o))
		dact = Mul(tg, slope)
	} else {
		dact = ZerosLike(act)
	}
	q := Split(dact, -1, 4)
	dcn := Add(Add(Mul(q[1], c), Mul(q[0], g)), Mul(i, q[2]))
	if tcp != nil {
		dcn = Add(dcn, Mul(f, tcp))
	}
	tc := Tanh(cn)
	dh := Add(Mul(q[3], tc), Mul(Mul(o, Sub(Scalar(1), Square(tc))), dcn))
	return []*Tensor{dh, dcn, dact}
}
