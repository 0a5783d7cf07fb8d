package tensor

import (
	"fmt"
	"math"
)

// Softmax and LogSoftmax are primitives with direct VJPs rather than
// compositions of Exp, Sum and Div: one pass for the maximum, one for the
// exponentials, and only the output kept for the backward pass.

var softmaxOp, logSoftmaxOp *Op

func init() {
	softmaxOp = &Op{
		Name: "softmax",
		Impl: func(in []*Tensor, pp any) *Tensor {
			return softmaxImpl(in[0], pp.(int), false)
		},
		VJP: func(g *Tensor, _ []*Tensor, out *Tensor, pp any) []*Tensor {
			// dx = y·(g - Σ g·y)
			axis := pp.(int)
			return []*Tensor{Mul(out, Sub(g, SumKeep(Mul(g, out), axis)))}
		},
		Save: SaveOutput,
	}
	logSoftmaxOp = &Op{
		Name: "log_softmax",
		Impl: func(in []*Tensor, pp any) *Tensor {
			return softmaxImpl(in[0], pp.(int), true)
		},
		VJP: func(g *Tensor, _ []*Tensor, out *Tensor, pp any) []*Tensor {
			// dx = g - exp(out)·Σ g
			axis := pp.(int)
			return []*Tensor{Sub(g, Mul(Exp(out), SumKeep(g, axis)))}
		},
		Save: SaveOutput,
	}
}

// softmaxRow writes softmax(src) (or log-softmax) into dst and returns the
// row maximum m and log Σ exp(src - m). A NaN anywhere makes the whole row
// NaN; a row of -Inf (or with +Inf) gives NaN, as in JAX. With a nil dst it
// only returns m and the log-sum (the fused cross-entropy kernels use that).
func softmaxRow(src, dst []float32, log bool) (m, lse float64) {
	m = math.Inf(-1)
	for _, v := range src {
		if f := float64(v); f > m || f != f {
			m = f
			if f != f {
				break
			}
		}
	}
	sum := 0.0
	if log || dst == nil {
		for _, v := range src {
			sum += math.Exp(float64(v) - m)
		}
	} else {
		for j, v := range src {
			e := math.Exp(float64(v) - m)
			dst[j] = float32(e)
			sum += e
		}
	}
	lse = math.Log(sum)
	if dst == nil {
		return m, lse
	}
	if log {
		for j, v := range src {
			dst[j] = float32(float64(v) - m - lse)
		}
	} else {
		inv := 1 / sum
		for j := range dst {
			dst[j] = float32(float64(dst[j]) * inv)
		}
	}
	return m, lse
}

func softmaxImpl(x *Tensor, axis int, log bool) *Tensor {
	out := newTensor(Float32, x.shape)
	outer, n, inner := srtLanes(x.shape, axis)
	if n == 0 || outer*inner == 0 {
		return out
	}
	work := outer * n * inner * 8
	if inner == 1 {
		srtParallel(outer, work, x.local, func(lo, hi int) {
			for r := lo; r < hi; r++ {
				softmaxRow(x.f32[r*n:(r+1)*n], out.f32[r*n:(r+1)*n], log)
			}
		})
		return out
	}
	// The axis is not the last one: keep one running max and sum per inner
	// lane and sweep the axis in memory order.
	srtParallel(outer, work, x.local, func(lo, hi int) {
		m := make([]float64, inner)
		s := make([]float64, inner)
		for o := lo; o < hi; o++ {
			base := o * n * inner
			for i := range m {
				m[i] = math.Inf(-1)
			}
			clear(s)
			for j := 0; j < n; j++ {
				for i, v := range x.f32[base+j*inner : base+(j+1)*inner] {
					if f := float64(v); f > m[i] || f != f {
						m[i] = f
					}
				}
			}
			for j := 0; j < n; j++ {
				b := base + j*inner
				src, dst := x.f32[b:b+inner], out.f32[b:b+inner]
				for i, v := range src {
					e := math.Exp(float64(v) - m[i])
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
				src, dst := x.f32[b:b+inner], out.f32[b:b+inner]
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
	if x.dtype != Float32 {
		panic(fmt.Sprintf("%s: %v: not defined for %v", name, x, x.dtype))
	}
	return normAxis(name, x, axis)
}

// Softmax returns exp(x) / Σ exp(x) along axis (negative counts from the
// end), like jax.nn.softmax: computed stably (the maximum along the axis is
// subtracted first) in float64, so logits of any finite size work. As in
// JAX, a row containing NaN or +Inf, or made only of -Inf, gives NaN.
//
// Its VJP is y·(g - Σ g·y), computed from the saved output.
func Softmax(x *Tensor, axis int) *Tensor {
	a := softmaxCheck("tensor.Softmax", x, axis)
	return Apply(softmaxOp, a, x)
}

// LogSoftmax returns x - log Σ exp(x) along axis, like jax.nn.log_softmax,
// computed stably. Its VJP is g - exp(y)·Σ g, from the saved output.
func LogSoftmax(x *Tensor, axis int) *Tensor {
	a := softmaxCheck("tensor.LogSoftmax", x, axis)
	return Apply(logSoftmaxOp, a, x)
}
