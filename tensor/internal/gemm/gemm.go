// Package gemm is the matrix-multiplication kernel behind tensor.MatMul.
//
// Everything that multiplies matrices in gonox goes through Sgemm, so the
// kernel can be replaced without touching the ops. This version calls
// gonum's blas32; it is the reference the fast kernels are tested against.
package gemm

import (
	"gonum.org/v1/gonum/blas"
	"gonum.org/v1/gonum/blas/blas32"
)

// Sgemm computes C = alpha*op(A)*op(B) + beta*C for row-major matrices,
// where op(X) is X or its transpose. op(A) is m×k, op(B) is k×n and C is
// m×n; lda, ldb and ldc are the row strides of A, B and C as stored.
// threads bounds the number of goroutines the kernel may use: 1 computes on
// the calling goroutine, 0 or less means as many as the machine has cores.
func Sgemm(transA, transB bool, m, n, k int, alpha float32, a []float32, lda int, b []float32, ldb int, beta float32, c []float32, ldc int, threads int) {
	if m == 0 || n == 0 {
		return
	}
	ta, tb := blas.NoTrans, blas.NoTrans
	ar, ac := m, k
	if transA {
		ta, ar, ac = blas.Trans, k, m
	}
	br, bc := k, n
	if transB {
		tb, br, bc = blas.Trans, n, k
	}
	if k == 0 {
		for i := 0; i < m; i++ {
			row := c[i*ldc : i*ldc+n]
			for j := range row {
				row[j] *= beta
			}
		}
		return
	}
	blas32.Gemm(ta, tb, alpha,
		blas32.General{Rows: ar, Cols: ac, Stride: lda, Data: a[:(ar-1)*lda+ac]},
		blas32.General{Rows: br, Cols: bc, Stride: ldb, Data: b[:(br-1)*ldb+bc]},
		beta,
		blas32.General{Rows: m, Cols: n, Stride: ldc, Data: c[:(m-1)*ldc+n]})
}
