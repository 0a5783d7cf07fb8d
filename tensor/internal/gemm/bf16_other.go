//go:build !amd64 || noasm

package gemm

// Without assembly Bgemm widens to float32.
var bf16Level, bf16NoAMX = bfWiden, bfWiden

func bf16Kernel12x32(kp int, a *uint32, b *uint32, c *float32, ldc int, acc int) {
	panic("gemm: no assembly")
}

func amxKernel32x32(kb int, a *uint16, lda int, b *uint32, c *float32, ldc int, cfg *byte, acc int) {
	panic("gemm: no assembly")
}

func amxPermitted() bool { return false }
