//go:build amd64 && !noasm

package gemm

import "golang.org/x/sys/cpu"

// useBF16Kernel selects the AVX-512 BF16 micro-kernel (tests switch it off
// to compare with the widening path).
var useBF16Kernel = hasAVX512 && cpu.X86.HasAVX512BF16

//go:noescape
func bf16Kernel12x32(kp int, a *uint32, b *uint32, c *float32, ldc int, acc int)
