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
		return narrow(out, a.dtype)
	}
	return out
}

// matmulAccumulate returns op(a) @ op(b) in float32 for operands of one
// float dtype.
func matmulAccumulate(a, b *Tensor, p *matmulParams) *Tensor {
	switch {
	case a.dtype == Float32 && b.dtype == Float32:
		return matmulF32(a, b, p)
	case a.dtype != BFloat16 || b.dtype != BFloat16 || gemm.BF16Kernel() == "widen":
		// float16 has no dot-product instruction that accumulates in
		// float32 on the CPUs we target, nor has bfloat16 without AVX-512
		// BF16 or AMX: widen (exactly) once, then Sgemm, instead of
		// widening a shared operand again for every batch element.
		w := widenAll([]*Tensor{a, b})
		return matmulF32(w[0], w[1], p)
	}
	out := newTensor(Float32, p.outShape)
	threads := 0
	if a.local != nil || b.local != nil {
		threads = 1 // a device inside shard.Map computes on one goroutine
	}
	lda, ldb := p.leading()
	sizeA, sizeB, sizeC := p.m*p.k, p.k*p.n, p.m*p.n
	if numel(p.batch) == 1 {
		gemm.Bgemm(p.ta, p.tb, p.m, p.n, p.k, a.u16, lda, b.u16, ldb, out.f32, p.n, threads)
		return out
	}
	sa := broadcastStrides(a.shape[:len(a.shape)-2], p.batch)
	sb := broadcastStrides(b.shape[:len(b.shape)-2], p.batch)
	broadcastLoop(p.batch, sa, sb, func(o, ia, ib, n, da, db int) {
		for j := 0; j < n; j++ {
			oa, ob, oc := (ia+j*da)*sizeA, (ib+j*db)*sizeB, (o+j)*sizeC
			gemm.Bgemm(p.ta, p.tb, p.m, p.n, p.k, a.u16[oa:oa+sizeA], lda, b.u16[ob:ob+sizeB], ldb,
				out.f32[oc:oc+sizeC], p.n, threads)
		}
	})
	return out
}

type matmulToParams struct {
	p  *matmulParams
	dt DType
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
			out := matmulAccumulate(in[0], in[1], q.p)
			if q.dt.isHalf() {
				return narrow(out, q.dt)
			}
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			// The cotangents are those of MatMulT on operands of the
			// inputs' dtype (so they come back in that dtype).
			return matmulOp.VJPNeed(Convert(g, in[0].dtype), in, nil, pp.(*matmulToParams).p, need)
		},
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			q := pp.(*matmulToParams)
			var ta, tb *Tensor
			if t[0] != nil {
				ta = MatMulTo(t[0], x[1], q.p.ta, q.p.tb, q.dt)
			}
			if t[1] != nil {
				tb = MatMulTo(x[0], t[1], q.p.ta, q.p.tb, q.dt)
			}
			return one1(addTangents(ta, tb))
		},
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			q := pp.(*matmulToParams)
			return one1(matmulBatch(in, batched, q.p, func(a, b *Tensor, ta, tb bool) *Tensor {
				return MatMulTo(a, b, ta, tb, q.dt)
			}))
		},
		Save: SaveAllInputs,
		Traits: Traits{
			Half:  NativeHalf, // accumulates in float32, rounds to dt itself
			Reuse: FreshVJP,
		},
	}
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
	return Apply(matmulToOp, &matmulToParams{p, dt}, a, b)
}
