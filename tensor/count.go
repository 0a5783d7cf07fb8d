package tensor

import "fmt"

var bincountOp, srtBinGatherOp *Op

func init() {
	bincountOp = &Op{
		Name:     "bincount",
		Sharding: ShardingRule{Family: ShardBincount},
		Impl: func(in []*Tensor, pp any) *Tensor {
			length := pp.(int)
			x := in[0]
			if len(in) == 1 {
				out := newTensor(Int32, []int{length})
				d := out.i32()
				for _, v := range x.i32() {
					if int(v) < length {
						d[v]++
					}
				}
				return out
			}
			w := in[1]
			out := newTensor(w.dtype, []int{length})
			switch w.dtype {
			case Float32:
				// Accumulate in float64, then round once, as Sum does.
				acc, ws := make([]float64, length), w.f32()
				for i, v := range x.i32() {
					if int(v) < length {
						acc[v] += float64(ws[i])
					}
				}
				d := out.f32()
				for i, s := range acc {
					d[i] = float32(s)
				}
			case Int32:
				d, ws := out.i32(), w.i32()
				for i, v := range x.i32() {
					if int(v) < length {
						d[v] += ws[i]
					}
				}
			case Float64:
				d, ws := out.f64(), w.f64()
				for i, v := range x.i32() {
					if int(v) < length {
						d[v] += ws[i]
					}
				}
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			// out[b] = Σ_{i: x[i]=b} w[i], so dw[i] = g[x[i]] (0 if dropped).
			return []*Tensor{nil, Apply(srtBinGatherOp, nil, g, in[0])}
		},
		Save: SaveInputs(0),
		JVP:  linearJVP(&bincountOp),
		// The examples' values offset to bins of their own: one count of
		// the whole batch into b·length bins.
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			length := pp.(int)
			xs := materializeAll(in, batched)
			b := xs[0].shape[0]
			checkBincountValues("tensor.Bincount", xs[0])
			x := Reshape(binOffsets(xs[0], length), -1)
			var out *Tensor
			if len(xs) == 1 {
				out = Apply(bincountOp, b*length, x)
			} else {
				out = Apply(bincountOp, b*length, x, Reshape(xs[1], -1))
			}
			return one1(Reshape(out, b, length))
		},
		Traits: Traits{Types: TypesFloat64},
	}
	// srtBinGatherOp reads g[x[i]] for each i, 0 where x[i] >= len(g): the
	// transpose of a weighted bincount, and Bincount is its transpose.
	srtBinGatherOp = &Op{
		Name:     "bincount_gather",
		Sharding: ShardingRule{Family: ShardBincountGather},
		Impl: func(in []*Tensor, _ any) *Tensor {
			g, x := in[0], in[1]
			out := newTensor(g.dtype, x.shape)
			length := g.shape[0]
			if g.dtype == Float64 {
				d, gs := out.f64(), g.f64()
				for i, v := range x.i32() {
					if int(v) < length {
						d[i] = gs[v]
					}
				}
				return out
			}
			d, gs := out.f32(), g.f32()
			for i, v := range x.i32() {
				if int(v) < length {
					d[i] = gs[v]
				}
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
			return []*Tensor{Apply(bincountOp, in[0].shape[0], in[1], g), nil}
		},
		Save: SaveInputs(1),
		JVP:  linearJVP(&srtBinGatherOp),
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			xs := materializeAll(in, batched)
			g, x := xs[0], xs[1]
			length := g.shape[1]
			out := Apply(srtBinGatherOp, nil, Reshape(g, -1), Reshape(binOffsets(x, length), -1))
			return one1(Reshape(out, x.shape...))
		},
		Traits: Traits{Types: TypesFloat64},
	}
}

// binOffsets returns a batch of bin values (batch first) offset by
// b·length for example b; values >= length, dropped, become b·length
// (past every example's bins: still dropped).
func binOffsets(x *Tensor, length int) *Tensor {
	b := x.shape[0]
	off := Reshape(Mul(Arange(b), ScalarInt(int32(length))), b, 1)
	return Where(Less(x, ScalarInt(int32(length))), Add(x, off), ScalarInt(int32(b*length)))
}

// checkBincountValues panics, naming op, on a negative value of x (host
// data only: a placed or batched x is checked where its data is).
func checkBincountValues(op string, x *Tensor) {
	if x.layout() != nil || x.xv() != nil {
		return
	}
	for i, v := range x.i32() {
		if v < 0 {
			panic(fmt.Sprintf("%s: %v: negative value %d at index %v", op, x, v, unravel(i, x.shape)))
		}
	}
}

// Bincount counts how often each value 0..length-1 occurs in the int32
// vector x, like jnp.bincount(x, weights, length=length): the result has
// exactly length elements and values >= length are dropped. With weights
// (x's shape, float32 or int32) it sums the weight of each occurrence
// instead, in the weights' dtype; with nil weights the counts are int32.
// Float sums accumulate in float64.
//
// The result is differentiable with respect to float32 weights: the
// gradient of weight i is the cotangent of bin x[i] (0 for a dropped x[i]).
//
// Unlike jnp.bincount, which clips negative values into bin 0, Bincount
// panics on a negative value (naming it and its index), as a negative id
// is almost always a bug. It also panics on a negative length.
func Bincount(x, weights *Tensor, length int) *Tensor {
	checkNil("tensor.Bincount", "x", x)
	const name = "tensor.Bincount"
	desc := x.String()
	if weights != nil {
		desc = operands("", x, weights)
	}
	if x.dtype != Int32 {
		panic(fmt.Sprintf("%s: %s: x must be int32", name, desc))
	}
	if len(x.shape) != 1 {
		panic(fmt.Sprintf("%s: %s: x must be 1-D", name, desc))
	}
	if length < 0 {
		panic(fmt.Sprintf("%s: %s: length %d < 0", name, desc, length))
	}
	if weights != nil {
		if weights.dtype != Float32 && weights.dtype != Int32 && weights.dtype != Float64 {
			panic(fmt.Sprintf("%s: %s: weights must be float32, float64 or int32", name, desc))
		}
		if !sameShape(weights.shape, x.shape) {
			panic(fmt.Sprintf("%s: %s: weights must have the shape of x", name, desc))
		}
	}
	if x.layout() == nil && x.xv() == nil { // a sharded x is refused by Apply; a batched one checked by the batching rule
		for i, v := range x.i32() {
			if v < 0 {
				panic(fmt.Sprintf("%s: %s: negative value %d at index %d", name, desc, v, i))
			}
		}
	}
	if weights == nil {
		return Apply(bincountOp, length, x)
	}
	return Apply(bincountOp, length, x, weights)
}
