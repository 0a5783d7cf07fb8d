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

func amxKernel32x32(kb int, a *uint16, lda int, b *uint32, c *float32, ldc int, cfg *byte, acc int) {
	panic("gemm: no assembly")
}

func amxPermitted() bool { return false }
