//go:build amd64 && !noasm

package gemm

import (
	"golang.org/x/sys/cpu"

	"github.com/gonox/gonox/internal/kernels"
)

// bf16Level is the kernel Bgemm uses: AMX where the CPU has it (and, at
// the first call, the OS grants the tile state: see amxReady), else the
// AVX-512 BF16 kernel, else widening to float32. Tests switch it to
// compare the paths.
var bf16Level = bestBF16Level()

// bf16NoAMX is the level used when the OS refuses the AMX state.
var bf16NoAMX = func() int {
	if kernels.Has(kernels.AVX512) && cpu.X86.HasAVX512BF16 {
		return bfAVX512
	}
	return bfWiden
}()

func bestBF16Level() int {
	if kernels.Has(kernels.AVX512) && cpu.X86.HasAMXTile && cpu.X86.HasAMXBF16 {
		return bfAMX
	}
	return bf16NoAMX
}

//go:noescape
func bf16Kernel12x32(kp int, a *uint32, b *uint32, c *float32, ldc int, acc int)

//go:noescape
func amxKernel32x32(kb int, a *uint16, lda int, b *uint32, c *float32, ldc int, cfg *byte, acc int)
