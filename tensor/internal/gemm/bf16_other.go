//go:build !amd64 || noasm

package gemm

// Without assembly Bgemm widens to float32.
var bf16Level, bf16NoAMX = bfWiden, bfWiden

// bf16Set is never used without assembly.
var bf16Set *kernelSet[float32]

func interleaveAVX512(d *uint32, lo, hi *uint16, n int) {
	panic("gemm: no assembly")
}

func interleaveSeqAVX512(d *uint32, lo, hi *uint16, n int) {
	panic("gemm: no assembly")
}

func amxKernel32(kb int, a *uint16, lda int, b *uint32, ldb int, bstride int, c *float32, ldc int, ns int, cfg *byte, acc int) {
	panic("gemm: no assembly")
}

func amxPermitted() bool { return false }

// transposePairs sets dst[j*ldd+i] = src[i*lds+j] for i < rows, j < cols.
func transposePairs(dst []uint32, ldd int, src []uint32, lds, rows, cols int) {
	for i := range rows {
		for j, v := range src[i*lds : i*lds+cols] {
			dst[j*ldd+i] = v
		}
	}
}
