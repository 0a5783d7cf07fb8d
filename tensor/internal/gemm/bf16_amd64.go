//go:build amd64 && !noasm

package gemm

import (
	"unsafe"

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

// bf16Set is the AVX-512 set with kernels on bfloat16 pairs (see
// bf16pairs.go): its k block counts pairs, so 256 pairs are 512 k values
// in the same bytes as Sgemm's.
var bf16Set = tuned(&kernelSet[float32]{
	name: "avx512bf16", mr: 12, nr: 32, nrHalf: 16,
	kc: 256, nc: 512, directMaxM: 128,
	kern:      bf16Kernels,
	kernP:     bf16Kernels[flavC],
	transpose: transposeAVX,
	pools:     pools32,
})

// interleaveAVX512 sets d[j] = lo[j] | hi[j]<<16 for j < n, n a positive
// multiple of 16.
//
//go:noescape
func interleaveAVX512(d *uint32, lo, hi *uint16, n int)

// interleaveSeqAVX512 is interleaveAVX512 reading lo whole, then hi.
//
//go:noescape
func interleaveSeqAVX512(d *uint32, lo, hi *uint16, n int)

// amxKernel32 computes ns 32×32 blocks of C side by side with AMX (see
// bf16amx_amd64.s); ns ≥ 1.
//
//go:noescape
func amxKernel32(kb int, a *uint16, lda int, b *uint32, ldb int, bstride int, c *float32, ldc int, ns int, cfg *byte, acc int)

// transposePairs sets dst[j*ldd+i] = src[i*lds+j] for i < rows, j < cols:
// a row panel of bfloat16 values from a pair strip, or back (see
// bf16amx.go).
func transposePairs(dst []uint32, ldd int, src []uint32, lds, rows, cols int) {
	transposeAVX(unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(dst))), len(dst)), ldd,
		unsafe.Slice((*float32)(unsafe.Pointer(unsafe.SliceData(src))), len(src)), lds, rows, cols)
}
