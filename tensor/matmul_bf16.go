package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/gemm"
)

// Matrix products of bfloat16 and float16 operands.
//
// MatMul and MatMulT accept two bf16 or two f16 operands and return the
// operands' dtype, as jnp.matmul does: the products are accumulated in
// float32 (by the AVX-512 BF16 kernel where the CPU has one, else on
// operands widened to float32) and the result is rounded once. MatMulTo
// returns the float32 accumulator itself (or any float dtype), as
// preferred_element_type=jnp.float32 does: use it where the result feeds a
// float32 computation (logits before a float32 loss), to skip a rounding.

// matmulHalfImpl is matmul's implementation for half operands.
func matmulHalfImpl(in []*Tensor, pp any) *Tensor {
	a := in[0]
	out := matmulAccumulate(in[0], in[1], pp.(*matmulParams))
	if a.dtype.isHalf() && a.dtype == in[1].dtype {
		return narrowRelease(out, a.dtype)
	}
	return out
}

// narrowRelease returns the float32 accumulator out rounded to the half
// dtype dt, and hands out's storage back to the allocator's cache: the
// next product's accumulator reuses it, neither allocated nor zeroed.
func narrowRelease(out *Tensor, dt DType) *Tensor {
	res := narrow(out, dt)
	out.release()
	return res
}

// matmulAccumulate returns op(a) @ op(b) in float32 for operands of one
// float dtype, computed in that dtype.
func matmulAccumulate(a, b *Tensor, p *matmulParams) *Tensor {
	return matmulIn(a, b, p, a.dtype)
}

// matmulIn returns op(a) @ op(b) in float32, computed in dtype compute:
// each operand is of dtype compute or float32, and a float32 operand is
// rounded to compute as the product reads it (MatMulAs).
func matmulIn(a, b *Tensor, p *matmulParams, compute DType) *Tensor {
	switch {
	case compute == Float32:
		w := widenAll([]*Tensor{a, b})
		return matmulF32(w[0], w[1], p)
	case compute != BFloat16 || gemm.BF16Kernel() == "widen":
		// float16 has no dot-product instruction that accumulates in
		// float32 on the CPUs we target, nor has bfloat16 without AVX-512
		// BF16 or AMX: round float32 operands, widen (exactly) once, then
		// Sgemm, instead of widening a shared operand again for every
		// batch element.
		w := widenAll([]*Tensor{narrowTo(a, compute), narrowTo(b, compute)})
		return matmulF32(w[0], w[1], p)
	}
	out := newOutUninit(Float32, p.outShape) // beta = 0: Bgemm writes all of C
	threads := 0
	if a.local() != nil || b.local() != nil {
		threads = 1 // a device inside shard.Map computes on one goroutine
	}
	lda, ldb := p.leading()
	sizeA, sizeB, sizeC := p.m*p.k, p.k*p.n, p.m*p.n
	operand := func(x *Tensor, off, size int) gemm.BF16Operand {
		if x.dtype == Float32 {
			return gemm.BF16Operand{F32: x.f32()[off : off+size]}
		}
		return gemm.BF16Operand{Bits: x.u16()[off : off+size]}
	}
	if nb := numel(p.batch); nb == 1 || p.stacked(a, b) {
		// A batch of a times one matrix b is one product of nb·m rows.
		gemm.BgemmMixed(p.ta, p.tb, nb*p.m, p.n, p.k, operand(a, 0, nb*sizeA), lda, operand(b, 0, sizeB), ldb, out.f32(), p.n, threads)
		return out
	}
	sa := broadcastStrides(a.shape[:len(a.shape)-2], p.batch)
	sb := broadcastStrides(b.shape[:len(b.shape)-2], p.batch)
	broadcastLoop(p.batch, sa, sb, func(o, ia, ib, n, da, db int) {
		for j := 0; j < n; j++ {
			oa, ob, oc := (ia+j*da)*sizeA, (ib+j*db)*sizeB, (o+j)*sizeC
			gemm.BgemmMixed(p.ta, p.tb, p.m, p.n, p.k, operand(a, oa, sizeA), lda, operand(b, ob, sizeB), ldb,
				out.f32()[oc:oc+sizeC], p.n, threads)
		}
	})
	return out
}

// narrowTo returns x rounded to the half dtype dt if it is float32, else
// x.
func narrowTo(x *Tensor, dt DType) *Tensor {
	if x.dtype == Float32 {
		return narrow(x, dt)
	}
	return x
}

type matmulToParams struct {
	p       *matmulParams
	dt      DType
	compute DType // MatMulAs; 0: the operands' dtype (MatMulTo)
}

var matmulToOp *Op

func init() {
	matmulToOp = &Op{
		Name: "matmul",
		Sharding: ShardingRule{Family: ShardMatMul, Params: func(pp any) OpParams {
			q := pp.(*matmulToParams)
			return OpParams{TransA: q.p.ta, TransB: q.p.tb, DType: q.dt}
		}},
		Impl: func(in []*Tensor, pp any) *Tensor {
			q := pp.(*matmulToParams)
			out := matmulIn(in[0], in[1], q.p, q.computeDType(in[0]))
			if q.dt.isHalf() {
				return narrowRelease(out, q.dt)
			}
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			q := pp.(*matmulToParams)
			if q.compute == 0 {
				// The cotangents are those of MatMulT on operands of the
				// inputs' dtype (so they come back in that dtype).
				return matmulOp.VJPNeed(Convert(g, in[0].dtype), in, nil, q.p, need)
			}
			// Computed in q.compute too, each in its operand's dtype: the
			// cotangent of a float32 operand is the float32 accumulator.
			if g.dtype != Float32 && g.dtype != q.compute {
				g = Convert(g, q.compute)
			}
			mm := func(x, y *Tensor, tx, ty bool, dt DType) *Tensor {
				return MatMulAs(x, y, tx, ty, q.compute, dt)
			}
			if gr := roundOnce(g, q.compute, need, in[0], in[1]); gr != nil {
				res := matmulCotangents(gr, in[0], in[1], q.p, need, mm)
				gr.release()
				return res
			}
			return matmulCotangents(g, in[0], in[1], q.p, need, mm)
		},
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			q := pp.(*matmulToParams)
			var ta, tb *Tensor
			if t[0] != nil {
				ta = q.apply(t[0], x[1], q.p.ta, q.p.tb)
			}
			if t[1] != nil {
				tb = q.apply(x[0], t[1], q.p.ta, q.p.tb)
			}
			return one1(addTangents(ta, tb))
		},
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			return one1(matmulBatch(in, batched, pp.(*matmulToParams).p, pp.(*matmulToParams).apply))
		},
		Save: SaveAllInputs,
		Traits: Traits{
			Half:  NativeHalf, // accumulates in float32, rounds to dt itself
			Reuse: FreshVJP,
		},
	}
}

// computeDType returns the dtype the product is computed in.
func (q *matmulToParams) computeDType(a *Tensor) DType {
	if q.compute == 0 {
		return a.dtype
	}
	return q.compute
}

// apply is the product of q on other operands: MatMulTo or MatMulAs.
func (q *matmulToParams) apply(a, b *Tensor, ta, tb bool) *Tensor {
	if q.compute == 0 {
		return MatMulTo(a, b, ta, tb, q.dt)
	}
	return MatMulAs(a, b, ta, tb, q.compute, q.dt)
}

// MatMulTo returns op(a) @ op(b) (see MatMulT) with result dtype dt, JAX's
// preferred_element_type: MatMulTo(a, b, false, false, tensor.Float32) on
// bfloat16 operands returns the float32 accumulator without rounding it
// to bfloat16. The operands must be floats of one dtype; dt any float
// dtype. The cotangents of a and b have their dtypes.
func MatMulTo(a, b *Tensor, transA, transB bool, dt DType) *Tensor {
	checkNil("tensor.MatMulTo", "a b", a, b)
	p := checkMatMul("tensor.MatMulTo", a, b, transA, transB)
	if !dt.IsFloat() {
		panic(fmt.Sprintf("tensor.MatMulTo: %s: result dtype %v is not a float dtype", operands("@", a, b), dt))
	}
	return Apply(matmulToOp, &matmulToParams{p: p, dt: dt}, a, b)
}

// MatMulAs returns op(a) @ op(b) (see MatMulT) computed in dtype compute
// (float32, bfloat16 or float16), with result dtype dt: each operand is
// of dtype compute or float32, and a float32 operand is rounded to compute
// (to nearest even) as the product reads it, so that no rounded copy is
// made; products accumulate in float32 and the result is rounded once to
// dt. This is JAX's dot with algorithm BF16_BF16_F32 (and
// preferred_element_type dt).
//
// It is the product of a mixed-precision layer with float32 master
// weights w: MatMulAs(x, w, false, false, BFloat16, BFloat16) computes
// what MatMul(x, Convert(w, BFloat16)) does, without the converted copy
// of w, and the cotangent of w is the float32 accumulator of the bf16
// product xᵀ·g, where the composition rounds it to bf16 and widens it
// back. The cotangents of a and b have their dtypes and are computed in
// compute too.
func MatMulAs(a, b *Tensor, transA, transB bool, compute, dt DType) *Tensor {
	checkNil("tensor.MatMulAs", "a b", a, b)
	if compute != Float32 && !compute.isHalf() || !dt.IsFloat() {
		panic(fmt.Sprintf("tensor.MatMulAs: %s: compute dtype %v and result dtype %v: want float32, bfloat16 or float16 and a float dtype", operands("@", a, b), compute, dt))
	}
	for _, x := range []*Tensor{a, b} {
		if x.dtype != Float32 && x.dtype != compute {
			panic(fmt.Sprintf("tensor.MatMulAs: %s: operand %v is neither float32 nor the compute dtype %v", operands("@", a, b), x.dtype, compute))
		}
	}
	p := checkMatMulAs("tensor.MatMulAs", asDType(a, compute), asDType(b, compute), transA, transB, a, b)
	return Apply(matmulToOp, &matmulToParams{p: p, dt: dt, compute: compute}, a, b)
}

// asDType returns a tensor with x's shape and dtype dt, for the shape
// checks of a product of mixed dtypes (no data).
func asDType(x *Tensor, dt DType) *Tensor {
	return &Tensor{shape: x.shape, dtype: dt}
}
