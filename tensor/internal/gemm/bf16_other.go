//go:build !amd64 || noasm

package gemm

// Without assembly Bgemm widens to float32.
var useBF16Kernel = false

func bf16Kernel12x32(kp int, a *uint32, b *uint32, c *float32, ldc int, acc int) {
	panic("gemm: no assembly")
}
