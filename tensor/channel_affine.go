package tensor

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// channel_affine computes act(x·scale + shift) for x [N, C, spatial...]
// and scale, shift [1, C, 1, ...] (per-channel values in x's rank, so that
// the op is elementwise with NumPy broadcasting and shards as one), in one
// sweep over x: the normalisation step of BatchNorm, whose composition
// from Mul and Add makes two passes over the activations forward and more
// backward. Its VJP computes the gradient of x with one broadcast Mul and
// the per-channel sums Σ g·x and Σ g of the scale's and the shift's
// gradients in one more sweep (channel_affine_grad).
var channelAffineOp, channelAffineGradOp, channelAffineBwdOp *Op

func init() {
	channelAffineOp = &Op{
		Name:     "channel_affine",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, p any) *Tensor {
			x, s, b := in[0], in[1], in[2]
			var r []float32
			if len(in) == 4 {
				r = in[3].f32()
			}
			out := newOutUninit(Float32, x.shape)
			channelAffine(out.f32(), x.f32(), s.f32(), b.f32(), r, x.shape, p.(Activation), isLocal(in...))
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, out *Tensor, p any, need uint64) []*Tensor {
			act := p.(Activation)
			if len(in) < 4 || !Wants(need, 3) {
				return append(channelAffineVJP(g, in[0], in[1], out, act, need), nil)[:len(in)]
			}
			// The residual's gradient is the cotangent of the sum, which
			// the other gradients then start from.
			gz := g
			if act == ActRelu {
				gz = Apply(reluBwdOp, nil, g, out)
			}
			return append(channelAffineVJP(gz, in[0], in[1], nil, ActIdentity, need), gz)
		},
		SaveFor: func(p any) SaveMask {
			if p.(Activation) == ActRelu {
				return SaveInputs(0, 1) | SaveOutput
			}
			return SaveInputs(0, 1)
		},
		// dy = f'(z)·(dx·s + x·ds + db + dr).
		JVP: func(x, t, outs []*Tensor, p any) []*Tensor {
			var dz *Tensor
			if t[0] != nil {
				dz = Mul(t[0], x[1])
			}
			if t[1] != nil {
				dz = addTangents(dz, Mul(x[0], t[1]))
			}
			dz = addTangents(dz, t[2])
			if len(t) == 4 {
				dz = addTangents(dz, t[3])
			}
			dz = toShapeOf(dz, outs[0])
			if dz != nil && p.(Activation) == ActRelu {
				dz = Apply(reluBwdOp, nil, dz, outs[0])
			}
			return one1(dz)
		},
		// A batch of x (and the residual) with unbatched scale and shift
		// is one call on the batch merged into N; batched scales or shifts
		// (an ensemble's) are the composition act(x·s + b [+ r]), whose
		// bits the op's are.
		Batch: func(in []*Tensor, batched []bool, p any) []*Tensor {
			act := p.(Activation)
			if !batched[1] && !batched[2] {
				n := batchSize(in, batched)
				x := materialize(in[0], batched[0], n)
				merge := func(t *Tensor) *Tensor {
					return Reshape(t, append([]int{t.shape[0] * t.shape[1]}, t.shape[2:]...)...)
				}
				ops := []*Tensor{merge(x), in[1], in[2]}
				if len(in) == 4 {
					ops = append(ops, merge(materialize(in[3], batched[3], n)))
				}
				return one1(Reshape(applyIn(channelAffineOp, act, ops), x.shape...))
			}
			a := alignBatch(in, batched, len(exampleShape(in[0], batched[0])))
			z := Add(Mul(a[0], a[1]), a[2])
			if len(in) == 4 {
				z2 := Add(z, a[3])
				donateTemp(z, z2)
				z = z2
			}
			y := act.apply(z)
			donateTemp(z, y)
			return one1(y)
		},
		Traits: Traits{Reuse: FreshVJP},
	}

	// channel_affine_grad: (g, x[, y]) [N, C, spatial...] -> Σ gz·x and
	// Σ gz over every axis but the channels', [1, C, 1, ...] each, in one
	// sweep with float64 sums; gz = g, or g where y > 0 (a relu's mask)
	// if y is given. It has no sharding rule: channelSums composes the
	// sums from propagated ops for placed operands.
	channelAffineGradOp = &Op{
		Name: "channel_affine_grad",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			g, x := in[0], in[1]
			shape := channelShapeOf(x.shape)
			ds, db := newOutUninit(Float32, shape), newOutUninit(Float32, shape)
			var y []float32 // the relu's output, whose mask applies to g
			if len(in) == 3 {
				y = in[2].f32()
			}
			channelAffineBwd(nil, ds.f32(), db.f32(), g.f32(), x.f32(), nil, y, x.shape, isLocal(in...))
			return []*Tensor{ds, db}, nil
		},
		// ds = Σ gz·x, db = Σ gz: dg = mask(cs·x + cb), dx = cs·gz (the
		// mask held constant).
		VJPN: func(gs, in, _ []*Tensor, _, _ any) []*Tensor {
			g, x := maskBy(in[0], in, 2), in[1]
			cs, cb := gs[0], gs[1]
			var dg, dx *Tensor
			switch {
			case cs != nil && cb != nil:
				dg = ChannelAffine(x, Reshape(cs, -1), Reshape(cb, -1), ActIdentity)
			case cs != nil:
				dg = Mul(x, cs)
			case cb != nil:
				dg = BroadcastTo(cb, x.shape...)
			}
			if cs != nil {
				dx = Mul(g, cs)
			}
			return append([]*Tensor{maskBy(dg, in, 2), dx}, make([]*Tensor, len(in)-2)...)
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, _ any) []*Tensor {
			g, dg := maskBy(x[0], x, 2), maskBy(t[0], x, 2)
			axes := channelSumAxes(len(g.shape), 0)
			var dds, ddb *Tensor
			if dg != nil {
				dds = Mul(dg, x[1])
				ddb = SumKeep(dg, axes...)
			}
			if t[1] != nil {
				dds = addTangents(dds, Mul(g, t[1]))
			}
			if dds != nil {
				dds = SumKeep(dds, axes...)
			}
			return []*Tensor{dds, ddb}
		},
		// The sums of each example, from propagated ops (another
		// summation order: the rule case gives a tolerance).
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			n := batchSize(in, batched)
			g, x := materialize(in[0], batched[0], n), materialize(in[1], batched[1], n)
			if len(in) == 3 {
				g = Apply(reluBwdOp, nil, g, materialize(in[2], batched[2], n))
			}
			axes := channelSumAxes(len(g.shape)-1, 1)
			return []*Tensor{SumKeep(Mul(g, x), axes...), SumKeep(g, axes...)}
		},
	}
}

func init() {
	// channel_affine_bwd: (g, x, s[, y]) -> (dx, ds, db) of channel_affine,
	// gz = g (identity) or g·[y > 0] (relu): dx = gz·s, ds = Σ gz·x, db =
	// Σ gz per channel, in one sweep. Placed operands never reach it
	// (channel_affine's VJP composes propagated ops for them).
	channelAffineBwdOp = &Op{
		Name: "channel_affine_bwd",
		ImplN: func(in []*Tensor, p any) ([]*Tensor, any) {
			g, x, s := in[0], in[1], in[2]
			var y []float32
			if p.(Activation) == ActRelu {
				y = in[3].f32()
			}
			shape := channelShapeOf(x.shape)
			dx := newOutUninit(Float32, x.shape)
			ds, db := newOutUninit(Float32, shape), newOutUninit(Float32, shape)
			channelAffineBwd(dx.f32(), ds.f32(), db.f32(), g.f32(), x.f32(), s.f32(), y, x.shape, isLocal(in...))
			return []*Tensor{dx, ds, db}, nil
		},
		// The outputs are linear in gz = g·mask (the relu mask held
		// constant): dgz = cdx·s + cds·x + cdb, dx = cds·gz, ds = Σ cdx·gz.
		VJPN: func(gs, in, _ []*Tensor, p, _ any) []*Tensor {
			act := p.(Activation)
			g, x, s := in[0], in[1], in[2]
			cdx, cds, cdb := gs[0], gs[1], gs[2]
			mask := func(t *Tensor) *Tensor {
				if act == ActRelu && t != nil {
					return Apply(reluBwdOp, nil, t, in[3])
				}
				return t
			}
			var dg *Tensor
			if cds != nil || cdb != nil {
				cs, cb := cds, cdb
				if cs == nil {
					cs = ZerosLike(cb)
				}
				if cb == nil {
					cb = ZerosLike(cs)
				}
				dg = ChannelAffine(x, Reshape(cs, -1), Reshape(cb, -1), ActIdentity)
			}
			if cdx != nil {
				dg = addTangents(dg, Mul(cdx, s))
			}
			dg = mask(dg)
			gz := mask(g)
			res := make([]*Tensor, len(in))
			res[0] = dg
			if cds != nil {
				res[1] = Mul(gz, cds)
			}
			if cdx != nil {
				res[2], _ = channelSums(gz, cdx, s.shape)
			}
			return res
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, p any) []*Tensor {
			act := p.(Activation)
			g, xs, s := x[0], x[1], x[2]
			mask := func(v *Tensor) *Tensor {
				if act == ActRelu && v != nil {
					return Apply(reluBwdOp, nil, v, x[3])
				}
				return v
			}
			axes := channelSumAxes(len(xs.shape), 0)
			gz, dgz := mask(g), mask(t[0])
			var ddx, dds, ddb *Tensor
			if dgz != nil {
				ddx = Mul(dgz, s)
				dds = Mul(dgz, xs)
				ddb = SumKeep(dgz, axes...)
			}
			if t[2] != nil {
				ddx = addTangents(ddx, Mul(gz, t[2]))
			}
			if t[1] != nil {
				dds = addTangents(dds, Mul(gz, t[1]))
			}
			if dds != nil {
				dds = SumKeep(dds, axes...)
			}
			return []*Tensor{toShapeOf(ddx, xs), dds, ddb}
		},
		// Each example's from propagated ops (another summation order:
		// the rule cases give a tolerance).
		Batch: func(in []*Tensor, batched []bool, p any) []*Tensor {
			n := batchSize(in, batched)
			a := alignBatch(in, batched, len(exampleShape(in[1], batched[1])))
			g, x := materialize(a[0], batched[0], n), materialize(a[1], batched[1], n)
			gz := g
			if p.(Activation) == ActRelu {
				gz = Apply(reluBwdOp, nil, g, materialize(a[3], batched[3], n))
			}
			axes := channelSumAxes(len(x.shape)-1, 1)
			return []*Tensor{Mul(gz, a[2]), SumKeep(Mul(gz, x), axes...), SumKeep(gz, axes...)}
		},
	}
}

// channelAffineVJP returns the gradients of x, scale and shift of
// channel_affine (x, s) whose output is out, for the cotangent g at
// act's output.
func channelAffineVJP(g, x, s, out *Tensor, act Activation, need uint64) []*Tensor {
	if (Wants(need, 1) || Wants(need, 2)) && g.layout() == nil && x.layout() == nil && s.layout() == nil {
		// dx, dscale and dshift in one sweep.
		ops := []*Tensor{g, x, s}
		if act == ActRelu {
			ops = append(ops, out)
		}
		return applyNIn(channelAffineBwdOp, act, ops)
	}
	gz := g
	if act == ActRelu {
		gz = Apply(reluBwdOp, nil, g, out)
	}
	res := []*Tensor{nil, nil, nil}
	if Wants(need, 0) {
		res[0] = Mul(gz, s)
	}
	if Wants(need, 1) || Wants(need, 2) {
		res[1], res[2] = channelSums(gz, x, s.shape)
	}
	if gz != g && !gz.IsTraced() && gz.layout() == nil {
		Donate(gz)
	}
	return res
}

// channelAffineBwd writes dx = gz·s[c] (unless dx is nil), ds[c] = Σ
// gz·x and db[c] = Σ gz for g and x [N, C, spatial...], gz = g, or g
// where y > 0 if y is not nil, in memory order; the sums in float64 in a fixed order (channels
// split over goroutines, never a channel's rows).
func channelAffineBwd(dx, ds, db, g, x, s, y []float32, shape []int, local bool) {
	n, c := shape[0], shape[1]
	if c == 0 {
		return
	}
	w := numel(shape[2:])
	chans := func(lo, hi int) {
		var zb, pb [stageLen]float32
		sgx, sg := make([]float64, hi-lo), make([]float64, hi-lo)
		for i := 0; i < n; i++ {
			for k := lo; k < hi; k++ {
				o := (i*c + k) * w
				for j := 0; j < w; j += stageLen {
					e := min(j+stageLen, w)
					gz := g[o+j : o+e]
					if y != nil {
						t := zb[:e-j]
						vec.ReluGradMul(t, gz, y[o+j:o+e])
						gz = t
					}
					sg[k-lo] += vec.SumF64(gz)
					if dx != nil {
						vec.MulVS(dx[o+j:o+e], gz, s[k])
					}
					t := pb[:e-j]
					vec.MulVV(t, gz, x[o+j:o+e])
					sgx[k-lo] += vec.SumF64(t)
				}
			}
		}
		for k := lo; k < hi; k++ {
			ds[k], db[k] = float32(sgx[k-lo]), float32(sg[k-lo])
		}
	}
	if serial(4*len(x)*costCheap, local) {
		chans(0, c)
		return
	}
	parallelFor(c, 4*n*w*costCheap, 1, false, chans)
}

// maskBy returns t where the relu output in[i], an op's optional last
// operand, is positive: t if in has no operand i, or t is nil.
func maskBy(t *Tensor, in []*Tensor, i int) *Tensor {
	if t == nil || len(in) <= i {
		return t
	}
	return Apply(reluBwdOp, nil, t, in[i])
}

// channelShapeOf returns [1, C, 1, ...] for shape [N, C, ...].
func channelShapeOf(shape []int) []int {
	s := make([]int, len(shape))
	for i := range s {
		s[i] = 1
	}
	s[1] = shape[1]
	return s
}

// channelSumAxes returns the axes of a rank-r operand (after lead batch
// dimensions) that a per-channel sum reduces: every one but the channel
// axis lead+1.
func channelSumAxes(r, lead int) []int {
	axes := make([]int, 0, r-1)
	for d := 0; d < r; d++ {
		if d != 1 {
			axes = append(axes, lead+d)
		}
	}
	return axes
}

// channelSums returns Σ g·x and Σ g per channel, of the given shape: one
// fused sweep on host tensors and shard.Map blocks, propagated ops on
// placed ones.
func channelSums(g, x *Tensor, shape []int) (ds, db *Tensor) {
	if g.layout() != nil || x.layout() != nil {
		axes := channelSumAxes(len(x.shape), 0)
		p := Mul(g, x)
		ds = SumKeep(p, axes...)
		if !p.IsTraced() && p.layout() == nil {
			Donate(p)
		}
		return Reshape(ds, shape...), Reshape(SumKeep(g, axes...), shape...)
	}
	r := ApplyN(channelAffineGradOp, nil, g, x)
	return r[0], r[1]
}

// channelAffine writes act(x·s[c] + b[c]) into dst, or act(x·s[c] + b[c] +
// r) if r is not nil, for x (and r) of shape [N, C, spatial...] with
// len(s) = len(b) = C, row by row: each (n, c) is a contiguous row of the
// spatial elements.
func channelAffine(dst, x, s, b, r []float32, shape []int, act Activation, local bool) {
	c := len(s)
	if c == 0 || len(x) == 0 {
		return
	}
	kernel, cost := act.kernel()
	m := len(x) / numel(shape[2:]) // rows: N·C
	w := len(x) / m
	rows := func(lo, hi int) {
		for i := lo; i < hi; i++ {
			d, xr := dst[i*w:(i+1)*w], x[i*w:(i+1)*w]
			k := i % c
			var rr []float32
			if r != nil {
				rr = r[i*w : (i+1)*w]
			}
			relu := act == ActRelu
			vec.AffineRow(d, xr, s[k], b[k], rr, relu) // one sweep of the row
			if kernel != nil && !relu {
				kernel(d, d)
			}
		}
	}
	if serial(len(x)*(cost+1), local) {
		rows(0, m)
		return
	}
	parallelFor(m, w*(cost+1), 1, false, rows)
}

// ChannelAffine returns act(x·scale + shift) for x of shape [N, C,
// spatial...] (any number of spatial dimensions, none included) and
// per-channel scale and shift of shape [C], broadcast along axis 1, as one
// fused primitive: one sweep over x forward, and a backward pass that
// computes the gradient of x with one product and the gradients of scale
// and shift (Σ g·x and Σ g per channel) in one more sweep. act is
// ActIdentity or ActRelu; the other activations are applied after the
// affine map. It is the normalisation step of a batch norm (nn.BatchNorm:
// scale = weight/√(var + eps), shift = bias - mean·scale). Float64
// operands are computed by the composition act(x·scale + shift), whose
// result the fused kernel's equals bit for bit in float32.
func ChannelAffine(x, scale, shift *Tensor, act Activation) *Tensor {
	return channelAffineApply("tensor.ChannelAffine", x, scale, shift, nil, act)
}

// ChannelAffineAdd returns act(x·scale + shift + residual), ChannelAffine
// with a residual of x's shape added before the activation, in the same
// one sweep: a ResNet block's last batch norm, residual connection and
// ReLU, whose composition makes three passes over the activations forward
// and one more backward (the ReLU's mask, which the fused backward sweep
// applies on the way when the residual needs no gradient). Float64
// operands are computed by the composition act(x·scale + shift +
// residual), whose result the fused kernel's equals bit for bit in
// float32.
func ChannelAffineAdd(x, scale, shift, residual *Tensor, act Activation) *Tensor {
	const name = "tensor.ChannelAffineAdd"
	checkNil(name, "x scale shift residual", x, scale, shift, residual)
	if !sameFloat(x, residual) || !slices.Equal(x.shape, residual.shape) {
		panic(fmt.Sprintf("%s: %s: want a residual of x's shape and dtype", name, operands("", x, scale, shift, residual)))
	}
	return channelAffineApply(name, x, scale, shift, residual, act)
}

// channelAffineApply checks and applies channel_affine, with the residual
// r if it is not nil.
func channelAffineApply(name string, x, scale, shift, r *Tensor, act Activation) *Tensor {
	checkNil(name, "x scale shift", x, scale, shift)
	if !sameFloat(x, scale) || !sameFloat(x, shift) {
		panic(fmt.Sprintf("%s: %s: operands must be float of one dtype", name, operands("", x, scale, shift)))
	}
	if act >= numActivations {
		panic(fmt.Sprintf("%s: %s: unknown activation %v", name, operands("", x, scale, shift), act))
	}
	if len(x.shape) < 2 || len(scale.shape) != 1 || len(shift.shape) != 1 ||
		scale.shape[0] != x.shape[1] || shift.shape[0] != x.shape[1] {
		panic(fmt.Sprintf("%s: %s: want x [N, C, ...] and scale and shift [C]", name, operands("", x, scale, shift)))
	}
	shape := channelShapeOf(x.shape)
	ops := []*Tensor{x, Reshape(scale, shape...), Reshape(shift, shape...)}
	if r != nil {
		ops = append(ops, r)
	}
	switch {
	case x.dtype == Float64:
		z := Add(Mul(x, ops[1]), ops[2])
		if r != nil {
			z = Add(z, r)
		}
		return act.apply(z)
	case act != ActIdentity && act != ActRelu:
		return act.apply(applyIn(channelAffineOp, ActIdentity, ops))
	}
	return applyIn(channelAffineOp, act, ops)
}

// channel_moments: x [N, C, spatial...] -> the sum s = Σ x and the centred
// sum of squares q = Σ (x - s/n)² over every axis but the channels' (n
// elements each), [1, C, 1, ...] both, with float64 sums: the batch
// statistics of a batch norm in one sweep over x (each channel's rows are
// read twice, the second time from cache). As q does not depend on the
// centre to first order at the mean, its VJP is one ChannelAffine sweep:
// dx = gs + 2gq·(x - s/n).
var channelMomentsOp *Op

func init() {
	channelMomentsOp = &Op{
		Name: "channel_moments",
		ImplN: func(in []*Tensor, _ any) ([]*Tensor, any) {
			x := in[0]
			shape := channelShapeOf(x.shape)
			s, q := newOutUninit(Float32, shape), newOutUninit(Float32, shape)
			channelMoments(s.f32(), q.f32(), x.f32(), x.shape, isLocal(x))
			return []*Tensor{s, q}, nil
		},
		VJPN: func(gs, in, outs []*Tensor, _, _ any) []*Tensor {
			x := in[0]
			gsum, gq := gs[0], gs[1]
			if gq == nil {
				return one1(BroadcastTo(gsum, x.shape...))
			}
			n := float32(numel(x.shape) / max(1, x.shape[1]))
			g2 := MulScalar(gq, 2)
			shift := Neg(Mul(g2, Div(outs[0], Scalar(n))))
			if gsum != nil {
				shift = Add(shift, gsum)
			}
			return one1(ChannelAffine(x, Reshape(g2, -1), Reshape(shift, -1), ActIdentity))
		},
		Save: SaveAllInputs | SaveOutput,
		// ds = Σ dx, dq = Σ 2(x - s/n)·dx (the centre's tangent
		// contributes -2·dm·Σ (x - s/n) = 0).
		JVP: func(x, t, outs []*Tensor, _ any) []*Tensor {
			if t[0] == nil {
				return []*Tensor{nil, nil}
			}
			xs := x[0]
			axes := channelSumAxes(len(xs.shape), 0)
			n := float32(numel(xs.shape) / max(1, xs.shape[1]))
			dev := MulScalar(Sub(xs, Div(outs[0], Scalar(n))), 2)
			return []*Tensor{SumKeep(t[0], axes...), SumKeep(Mul(dev, t[0]), axes...)}
		},
		// The moments of each example, from propagated ops (another
		// summation order: the rule case gives a tolerance).
		Batch: func(in []*Tensor, _ []bool, _ any) []*Tensor {
			s, q := channelMomentsComposed(in[0], 1)
			return []*Tensor{s, q}
		},
	}
}

// channelMomentsComposed returns the sum and the centred sum of squares of
// x [lead..., N, C, spatial...] per channel, kept dims, from propagated
// ops.
func channelMomentsComposed(x *Tensor, lead int) (s, q *Tensor) {
	axes := channelSumAxes(len(x.shape)-lead, lead)
	n := 1
	for _, a := range axes {
		n *= x.shape[a]
	}
	s = SumKeep(x, axes...)
	q = SumKeep(Square(Sub(x, Div(s, Scalar(float32(n))))), axes...)
	return s, q
}

// channelMoments writes s[c] = Σ x and q[c] = Σ (x - s[c]/n)² over the rows
// of channel c of x [N, C, spatial...], each difference and square
// rounded to float32 (as Square(Sub(x, m)) computes them) and summed in
// float64 in a fixed order (a channel's rows in turn; channels split over
// goroutines). x is read twice, in memory order.
func channelMoments(s, q, x []float32, shape []int, local bool) {
	n, c := shape[0], shape[1]
	if c == 0 {
		return
	}
	w := numel(shape[2:])
	cnt := float32(n * w)
	chans := func(lo, hi int) {
		var buf [stageLen]float32
		sum, sq := make([]float64, hi-lo), make([]float64, hi-lo)
		for i := 0; i < n; i++ {
			for k := lo; k < hi; k++ {
				sum[k-lo] += vec.SumF64(x[(i*c+k)*w : (i*c+k+1)*w])
			}
		}
		for k := lo; k < hi; k++ {
			s[k] = float32(sum[k-lo])
		}
		for i := 0; i < n; i++ {
			for k := lo; k < hi; k++ {
				m := s[k] / cnt
				xr := x[(i*c+k)*w : (i*c+k+1)*w]
				for j := 0; j < w; j += stageLen {
					t := buf[:min(stageLen, w-j)]
					vec.SubVS(t, xr[j:j+len(t)], m)
					vec.MulVV(t, t, t)
					sq[k-lo] += vec.SumF64(t)
				}
			}
		}
		for k := lo; k < hi; k++ {
			q[k] = float32(sq[k-lo])
		}
	}
	if serial(3*len(x)*costCheap, local) {
		chans(0, c)
		return
	}
	parallelFor(c, 3*n*w*costCheap, 1, false, chans)
}

// ChannelMoments returns, for x of shape [N, C, spatial...], the sum of
// each channel, Σ x, and its centred sum of squares, Σ (x - Σ x/n)², over
// every axis but axis 1 (n elements each), both of shape [C]: the batch
// statistics of a batch norm (mean sum/n, biased variance sumSq/n),
// computed in one sweep over x for float32 host operands and composed
// from SumKeep, Sub and Square otherwise. Its gradient is one sweep over
// x. Per-device moments combine exactly into those of a larger batch
// (Chan et al.): with m the global mean, sumSq = Σ_d sumSq_d + n_d·(m_d -
// m)².
func ChannelMoments(x *Tensor) (sum, sumSq *Tensor) {
	const name = "tensor.ChannelMoments"
	checkNil(name, "x", x)
	if !x.dtype.IsFloat() || len(x.shape) < 2 {
		panic(fmt.Sprintf("%s: %s: want float x [N, C, ...]", name, operands("", x)))
	}
	if x.dtype != Float32 || x.layout() != nil {
		s, q := channelMomentsComposed(x, 0)
		return Reshape(s, -1), Reshape(q, -1)
	}
	r := ApplyN(channelMomentsOp, nil, x)
	return Reshape(r[0], -1), Reshape(r[1], -1)
}
