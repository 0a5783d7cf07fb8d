package tensor

import (
	"runtime"

	"github.com/gonox/gonox/tensor/internal/gemm"
)

// matmulOffsets appends to buf, and returns as three slices of it, where
// each product of a batched op(a) @ op(b) reads its a and b and writes its
// c (element offsets, one per output matrix in order): the batch
// dimensions broadcast with NumPy rules, so a broadcast operand repeats its
// offsets. buf's spare capacity, if 3·batch, saves an allocation.
func matmulOffsets(a, b *Tensor, p *matmulParams, buf []int) (offA, offB, offC []int) {
	nb := numel(p.batch)
	sizeA, sizeB, sizeC := p.m*p.k, p.k*p.n, p.m*p.n
	offs := buf[:0]
	if cap(offs) < 3*nb {
		offs = make([]int, 0, 3*nb)
	}
	offs = offs[:3*nb]
	offA, offB, offC = offs[:nb], offs[nb:2*nb], offs[2*nb:]
	if len(p.batch) == 1 {
		// One batch dimension (a stack of layers, a Vmap's examples): each
		// operand has it or broadcasts along it.
		da, db := 0, 0
		if len(a.shape) == 3 && a.shape[0] == nb {
			da = sizeA
		}
		if len(b.shape) == 3 && b.shape[0] == nb {
			db = sizeB
		}
		for t := range nb {
			offA[t], offB[t], offC[t] = t*da, t*db, t*sizeC
		}
		return offA, offB, offC
	}
	sa := broadcastStrides(a.shape[:len(a.shape)-2], p.batch)
	sb := broadcastStrides(b.shape[:len(b.shape)-2], p.batch)
	broadcastLoop(p.batch, sa, sb, func(o, ia, ib, n, da, db int) {
		for j := range n {
			offA[o+j], offB[o+j], offC[o+j] = (ia+j*da)*sizeA, (ib+j*db)*sizeB, (o+j)*sizeC
		}
	})
	return offA, offB, offC
}

// matmulSmallBatchF32 computes a batch of float32 products too small for
// gemm to split (an ensemble's layers, attention heads, a Vmap's
// examples) into out: one SgemmBatch call, the batch split over the cores
// by product when it is large enough and threads allows (each product on
// one goroutine, the same bits).
func matmulSmallBatchF32(a, b, out *Tensor, p *matmulParams, threads int) {
	lda, ldb := p.leading()
	nb, flops := numel(p.batch), 2*p.m*p.n*p.k
	if threads != 1 && nb*flops >= batchSplitFlops/8 && runtime.GOMAXPROCS(0) > 1 {
		offA, offB, offC := matmulOffsets(a, b, p, nil)
		parallelFor(nb, max(1, flops/16), 1, false, func(lo, hi int) {
			gemm.SgemmBatch(p.ta, p.tb, p.m, p.n, p.k, 1, a.f32(), lda, offA[lo:hi], b.f32(), ldb, offB[lo:hi], 0, out.f32(), p.n, offC[lo:hi])
		})
		return
	}
	var buf [3 * 16]int
	offA, offB, offC := matmulOffsets(a, b, p, buf[:0])
	gemm.SgemmBatch(p.ta, p.tb, p.m, p.n, p.k, 1, a.f32(), lda, offA, b.f32(), ldb, offB, 0, out.f32(), p.n, offC)
}

// matmulSmallBatchF64 is matmulSmallBatchF32 for float64 products, on the
// calling goroutine.
func matmulSmallBatchF64(a, b, out *Tensor, p *matmulParams) {
	lda, ldb := p.leading()
	var buf [3 * 16]int
	offA, offB, offC := matmulOffsets(a, b, p, buf[:0])
	gemm.DgemmBatch(p.ta, p.tb, p.m, p.n, p.k, 1, a.f64(), lda, offA, b.f64(), ldb, offB, 0, out.f64(), p.n, offC)
}
