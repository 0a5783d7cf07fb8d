package tensor

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// Softmax and LogSoftmax are primitives with direct VJPs rather than
// compositions of Exp, Sum and Div: one pass for the maximum, one for the
// exponentials, and only the output kept for the backward pass.

var softmaxOp, logSoftmaxOp *Op

func init() {
	softmaxOp = &Op{
		Name:     "softmax",
		Sharding: ShardingRule{Family: ShardSoftmax, Params: axisParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			return softmaxImpl(in[0], pp.(int), false)
		},
		VJP: func(g *Tensor, _ []*Tensor, out *Tensor, pp any) []*Tensor {
			// dx = y·(g - Σ g·y), fused
			return []*Tensor{Apply(softmaxGradOp, pp, g, out)}
		},
		Save: SaveOutput,
		// The Jacobian diag(y) - y·yᵀ is symmetric: the VJP of the tangent.
		JVP:    symmetricJVP(&softmaxOp),
		Batch:  axisBatch(&softmaxOp),
		Traits: Traits{Reuse: FreshVJP, Types: TypesFloat64}, // the fused gradient allocates its result
	}
	logSoftmaxOp = &Op{
		Name:     "log_softmax",
		Sharding: ShardingRule{Family: ShardLogSoftmax, Params: axisParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			return softmaxImpl(in[0], pp.(int), true)
		},
		VJP: func(g *Tensor, _ []*Tensor, out *Tensor, pp any) []*Tensor {
			// dx = g - exp(y)·Σ g, fused
			return []*Tensor{Apply(logSoftmaxGradOp, pp, g, out)}
		},
		Save: SaveOutput,
		// dy = dx - Σ e^y·dx.
		JVP: func(_, t, outs []*Tensor, pp any) []*Tensor {
			return one1(Sub(t[0], SumKeep(Mul(Exp(outs[0]), t[0]), pp.(int))))
		},
		Batch:  axisBatch(&logSoftmaxOp),
		Traits: Traits{Types: TypesFloat64},
	}
}

// The backward passes are fused primitives too: one sweep over g and y
// instead of four ops with their temporaries. Their own VJPs are written
// with ops, so higher derivatives work.
var softmaxGradOp, logSoftmaxGradOp *Op

func init() {
	softmaxGradOp = &Op{
		Name:     "softmax_grad",
		Sharding: ShardingRule{Family: ShardRowwise, Params: axisParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			// z = y·(g - s) with s = Σ g·y
			if in[0].dtype == Float64 {
				return softmaxGrad64(in[0], in[1], pp.(int), func(g, y float64) float64 { return g * y },
					func(g, y, s float64) float64 { return y * (g - s) })
			}
			if pp.(int) == len(in[0].shape)-1 {
				return softmaxGradRows(in[0], in[1])
			}
			return softmaxGradImpl(in[0], in[1], pp.(int), func(g, y []float32, stride int, out []float32) {
				s := 0.0
				for j := 0; j < len(out); j += stride {
					s += float64(g[j]) * float64(y[j])
				}
				for j := 0; j < len(out); j += stride {
					out[j] = float32(float64(y[j]) * (float64(g[j]) - s))
				}
			})
		},
		VJP: func(c *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			// ∂z_i/∂g_k = y_i(δ_ik - y_k): the same map applied to c.
			// ∂z_i/∂y_k = δ_ik(g_i - s) - y_i·g_k.
			axis := pp.(int)
			g, y := in[0], in[1]
			gg := Apply(softmaxGradOp, pp, c, y)
			gy := Sub(Mul(c, Sub(g, SumKeep(Mul(g, y), axis))), Mul(g, SumKeep(Mul(c, y), axis)))
			return []*Tensor{gg, gy}
		},
		Save: SaveAllInputs,
		// dz = y·(dg - Σ dg·y) + dy·(g - s) - y·Σ g·dy, s = Σ g·y.
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			axis := pp.(int)
			g, y := x[0], x[1]
			var dg, dy *Tensor
			if t[0] != nil {
				dg = Apply(softmaxGradOp, pp, t[0], y)
			}
			if t[1] != nil {
				dy = Sub(Mul(t[1], Sub(g, SumKeep(Mul(g, y), axis))), Mul(y, SumKeep(Mul(g, t[1]), axis)))
			}
			return one1(addTangents(dg, dy))
		},
		Batch:  axisBatchAll(&softmaxGradOp),
		Traits: Traits{Types: TypesFloat64},
	}
	logSoftmaxGradOp = &Op{
		Name:     "log_softmax_grad",
		Sharding: ShardingRule{Family: ShardRowwise, Params: axisParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			// z = g - e^y·Σ g
			if in[0].dtype == Float64 {
				return softmaxGrad64(in[0], in[1], pp.(int), func(g, _ float64) float64 { return g },
					func(g, y, s float64) float64 { return g - math.Exp(y)*s })
			}
			return softmaxGradImpl(in[0], in[1], pp.(int), func(g, y []float32, stride int, out []float32) {
				s := 0.0
				for j := 0; j < len(out); j += stride {
					s += float64(g[j])
				}
				for j := 0; j < len(out); j += stride {
					out[j] = float32(float64(g[j]) - softmaxExp(float64(y[j]))*s)
				}
			})
		},
		VJP: func(c *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			// ∂z_i/∂g_k = δ_ik - e^{y_i}; ∂z_i/∂y_k = -δ_ik·e^{y_i}·Σg.
			axis := pp.(int)
			g, y := in[0], in[1]
			ce := Mul(c, Exp(y))
			return []*Tensor{Sub(c, SumKeep(ce, axis)), Neg(Mul(ce, SumKeep(g, axis)))}
		},
		Save: SaveAllInputs,
		// dz = dg - e^y·Σ dg - e^y·dy·Σ g.
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			axis := pp.(int)
			g, y := x[0], x[1]
			e := Exp(y)
			var dg, dy *Tensor
			if t[0] != nil {
				dg = Sub(t[0], Mul(e, SumKeep(t[0], axis)))
			}
			if t[1] != nil {
				dy = Neg(Mul(Mul(e, t[1]), SumKeep(g, axis)))
			}
			return one1(addTangents(dg, dy))
		},
		Batch:  axisBatchAll(&logSoftmaxGradOp),
		Traits: Traits{Types: TypesFloat64},
	}
}

// softmaxGradImpl runs lane(g, y, stride, out) on every lane along axis.
// The slices start at the lane's first element and end at its last; the
// lane's elements are every stride-th one.
func softmaxGradImpl(g, y *Tensor, axis int, lane func(g, y []float32, stride int, out []float32)) *Tensor {
	out := newOutUninit(Float32, g.shape) // every lane written
	outer, n, inner := srtLanes(g.shape, axis)
	lanes := outer * inner
	if n == 0 || lanes == 0 {
		return out
	}
	span := (n-1)*inner + 1
	srtParallel(lanes, lanes*n*4, srtLocal(g, y), func(lo, hi int) {
		for l := lo; l < hi; l++ {
			b := (l/inner)*n*inner + l%inner
			lane(g.f32()[b:b+span], y.f32()[b:b+span], inner, out.f32()[b:b+span])
		}
	})
	return out
}

// softmaxGradRows is softmax_grad's kernel along the last axis, y·(g - Σ
// g·y) a row, with the bits of softmaxGradImpl's lane (its sum in the same
// order) but the rows in one loop without a call a row: the MoE router's
// rows of 8 experts and of its top 2 spent more on the calls than on the
// rows.
func softmaxGradRows(g, y *Tensor) *Tensor {
	out := newOutUninit(Float32, g.shape)
	n := g.shape[len(g.shape)-1]
	rows := numel(g.shape[:len(g.shape)-1])
	if n == 0 || rows == 0 {
		return out
	}
	srtParallel(rows, rows*n*4, srtLocal(g, y), func(lo, hi int) {
		gs, ys, os := g.f32()[lo*n:hi*n], y.f32()[lo*n:hi*n], out.f32()[lo*n:hi*n]
		for r := 0; r < len(os); r += n {
			gr, yr, or := gs[r:r+n], ys[r:r+n:r+n], os[r:r+n:r+n]
			s := 0.0
			for j, v := range gr {
				s += float64(v) * float64(yr[j])
			}
			for j, v := range gr {
				or[j] = float32(float64(yr[j]) * (float64(v) - s))
			}
		}
	})
	return out
}

// softmaxRow writes softmax(src) (or log-softmax) into dst and returns the
// row maximum m and log Σ exp(src - m). A NaN anywhere makes the whole row
// NaN; a row of -Inf (or with +Inf) gives NaN, as in JAX. With a nil dst it
// only returns m and the log-sum (the fused cross-entropy kernels use that).
func softmaxRow(src, dst []float32, log bool) (m, lse float64) {
	m, sum := softmaxRowSum(src, dst, log)
	return m, softmaxRowEnd(src, dst, log, m, sum)
}

// softmaxRowSum is softmaxRow's first half: the row maximum m and
// Σ exp(src - m), the exponentials left in dst for a softmax. Short rows
// (the fused cross-entropy's) run it over a block of rows before
// softmaxRowEnd, so that the rows' latency-bound kernels overlap.
func softmaxRowSum(src, dst []float32, log bool) (m, sum float64) {
	// The float32 maximum (NaN if any element is NaN), then the fast
	// float32 e^(x-m) with the subtraction's rounding error compensated
	// (vec.ExpShift), summed in float64.
	mf := vec.MaxF32(src)
	if log || dst == nil {
		return float64(mf), vec.SumExpShift(src, mf)
	}
	return float64(mf), vec.ExpShift(dst, src, mf)
}

// softmaxRowEnd is softmaxRow's second half, given m and sum from
// softmaxRowSum: it returns lse = log sum and finishes dst.
func softmaxRowEnd(src, dst []float32, log bool, m, sum float64) (lse float64) {
	lse = math.Log(sum)
	if dst == nil {
		return lse
	}
	if log {
		for j, v := range src {
			dst[j] = float32(float64(v) - m - lse)
		}
	} else {
		softmaxScale(dst, sum)
	}
	return lse
}

// softmaxScale finishes a softmax row from softmaxRowSum's exponentials
// in dst and their sum, without the logarithm softmaxRowEnd computes
// (math.Log was ~40% of a softmax of rows of 8, the MoE router's).
func softmaxScale(dst []float32, sum float64) {
	inv := 1 / sum
	for j := range dst {
		dst[j] = float32(float64(dst[j]) * inv)
	}
}

// softmaxExp returns e^x for x <= 0 (including -Inf, and NaN for NaN) with
// a relative error below 1e-8, far inside float32 rounding, about twice as
// fast as math.Exp: x = k·ln2 + r with |r| <= ln2/2, e^r by its Taylor
// polynomial of degree 7, and 2^k put into the exponent bits.
func softmaxExp(x float64) float64 {
	if !(x >= -708) { // e^x would be subnormal or 0 in float64; or NaN
		if x != x {
			return x
		}
		return 0
	}
	if x > 0 {
		return math.Exp(x) // not reached by the kernels (x = v - max)
	}
	const (
		log2e = 1.4426950408889634
		ln2hi = 6.93147180369123816490e-01
		ln2lo = 1.90821492927058770002e-10
	)
	k := float64(int64(x*log2e - 0.5)) // round to nearest, for x <= 0
	r := x - k*ln2hi - k*ln2lo
	p := 1 + r*(1+r*(1.0/2+r*(1.0/6+r*(1.0/24+r*(1.0/120+r*(1.0/720+r*(1.0/5040)))))))
	return p * math.Float64frombits(uint64(int64(k)+1023)<<52)
}

// shortRowWork is the work, in srtParallel's units (~0.8 ns), that a row
// of the short-row kernels costs beside its elements: vec.SoftmaxRows and
// vec.ExpShiftRows take ~18 ns a row of up to 16 elements (a chain of
// dependent instructions a row), and the scatter of TopK's gradient a few
// ns a row in its loop (docs/performance.md, "The MoE step at two threads,
// op by op").
const shortRowWork = 24

func softmaxImpl(x *Tensor, axis int, log bool) *Tensor {
	if x.dtype == Float64 {
		return softmax64(x, axis, log)
	}
	out := newOutUninit(Float32, x.shape)
	outer, n, inner := srtLanes(x.shape, axis)
	if n == 0 || outer*inner == 0 {
		return out
	}
	work := outer * n * inner * 8
	if inner == 1 && !log && n <= xentShort {
		// Short rows (the MoE router's 8 experts, its gates over the top
		// 2): one vec.SoftmaxRows call a block of rows, the bits of
		// softmaxRowSum and softmaxScale a row. A row costs ~18 ns
		// whatever its length (shortRowWork): the gates' 2048 rows of 2
		// split at two threads instead of holding the other core idle.
		srtParallel(outer, outer*(n*8+shortRowWork), x.local(), func(lo, hi int) {
			var ms [xentBlock]float32
			var sums [xentBlock]float64
			for r := lo; r < hi; r += xentBlock {
				e := min(r+xentBlock, hi)
				vec.SoftmaxRows(out.f32()[r*n:e*n], x.f32()[r*n:e*n], n, ms[:e-r], sums[:e-r])
			}
		})
		return out
	}
	if inner == 1 {
		srtParallel(outer, work, x.local(), func(lo, hi int) {
			for r := lo; r < hi; r++ {
				src, dst := x.f32()[r*n:(r+1)*n], out.f32()[r*n:(r+1)*n]
				if log {
					softmaxRow(src, dst, true)
					continue
				}
				_, sum := softmaxRowSum(src, dst, false)
				softmaxScale(dst, sum)
			}
		})
		return out
	}
	// The axis is not the last one: keep one running max and sum per inner
	// lane and sweep the axis in memory order.
	srtParallel(outer, work, x.local(), func(lo, hi int) {
		m := make([]float64, inner)
		s := make([]float64, inner)
		for o := lo; o < hi; o++ {
			base := o * n * inner
			for i := range m {
				m[i] = math.Inf(-1)
			}
			clear(s)
			for j := 0; j < n; j++ {
				for i, v := range x.f32()[base+j*inner : base+(j+1)*inner] {
					if f := float64(v); f > m[i] || f != f {
						m[i] = f
					}
				}
			}
			for j := 0; j < n; j++ {
				b := base + j*inner
				src, dst := x.f32()[b:b+inner], out.f32()[b:b+inner]
				for i, v := range src {
					e := softmaxExp(float64(v) - m[i])
					s[i] += e
					if !log {
						dst[i] = float32(e)
					}
				}
			}
			for i := range s {
				if log {
					s[i] = math.Log(s[i])
				} else {
					s[i] = 1 / s[i]
				}
			}
			for j := 0; j < n; j++ {
				b := base + j*inner
				src, dst := x.f32()[b:b+inner], out.f32()[b:b+inner]
				for i := range dst {
					if log {
						dst[i] = float32(float64(src[i]) - m[i] - s[i])
					} else {
						dst[i] = float32(float64(dst[i]) * s[i])
					}
				}
			}
		}
	})
	return out
}

func softmaxCheck(name string, x *Tensor, axis int) int {
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("%s: %v: not defined for %v", name, x, x.dtype))
	}
	return normAxis(name, x, axis)
}

// Softmax returns exp(x) / Σ exp(x) along axis (negative counts from the
// end), like jax.nn.softmax: computed stably (the maximum along the axis is
// subtracted first, and the exponentials are summed in float64), so logits
// of any finite size work. As in JAX, a row containing NaN or +Inf, or made
// only of -Inf, gives NaN.
//
// Its VJP is y·(g - Σ g·y), computed from the saved output.
func Softmax(x *Tensor, axis int) *Tensor {
	checkNil("tensor.Softmax", "x", x)
	a := softmaxCheck("tensor.Softmax", x, axis)
	return Apply(softmaxOp, a, x)
}

// LogSoftmax returns x - log Σ exp(x) along axis, like jax.nn.log_softmax,
// computed stably. Its VJP is g - exp(y)·Σ g, from the saved output.
func LogSoftmax(x *Tensor, axis int) *Tensor {
	checkNil("tensor.LogSoftmax", "x", x)
	a := softmaxCheck("tensor.LogSoftmax", x, axis)
	return Apply(logSoftmaxOp, a, x)
}
