//go:build amd64 && !noasm

package gemm

//go:generate go run gen_kernels.go

import (
	"unsafe"

	"github.com/gonox/gonox/internal/kernels"
)

var avx512Set = tuned(&kernelSet[float32]{
	name: "avx512", mr: 12, nr: 32, nrHalf: 16,
	kc: 256, nc: 512, directMaxM: 128,
	kern:      avx512Kernels,
	kernP:     avx512Kernels[flavC],
	transpose: transposeAVX,
	pools:     pools32,
})

// The AVX2 set packs B from 17 rows of C up (directMaxM 16): on AMD EPYC
// Zen 3, reading a 1024-wide B in place puts its rows, 4 KiB apart, in the
// same L1 sets, and m=32 products (k=n=1024, the DP step's 8 devices of
// 32 rows) took 2.1-2.7 ms in place against 1.22 packed; m=128 forward
// and backward passes of the MLP 784-1024-1024-10 cost 56 against 40
// CPU-ms (BenchmarkSgemm/mlp_m32_k1024_n1024, BenchmarkMLPStepSplit in
// package nn, 2026-11-26). m=16 (the batch-16 MLP) stays in place.
var avx2Set = tuned(&kernelSet[float32]{
	name: "avx2", mr: 6, nr: 16, nrHalf: 8,
	kc: 256, nc: 512, directMaxM: 16, packA: true,
	kern:      avx2Kernels,
	kernP:     avx2PKernels,
	packA4:    packA6,
	packAT:    packAT6,
	packBn:    packB16,
	transpose: transposeAVX,
	pools:     pools32,
})

// thisCPU is what CPUID reports about this machine's caches.
var thisCPU = detectCPU()

// The float64 sets (Dgemm) have the float32 sets' register tiles with
// half as many columns: a vector holds half as many elements.
var avx512Set64 = tuned(&kernelSet[float64]{
	name: "avx512", mr: 12, nr: 16, nrHalf: 8,
	kc: 256, nc: 512, directMaxM: 128,
	kern:      avx512Kernels64,
	kernP:     avx512Kernels64[flavC],
	transpose: transposeGo[float64],
	pools:     pools64,
})

var avx2Set64 = tuned(&kernelSet[float64]{
	name: "avx2", mr: 6, nr: 8, nrHalf: 4,
	kc: 256, nc: 512, directMaxM: 16, packA: true,
	kern:      avx2Kernels64,
	kernP:     avx2PKernels64,
	transpose: transposeGo[float64],
	pools:     pools64,
})

// tuned sets the blocking of s from the cache sizes this CPU reports (see
// blocking); the kc and nc s was written with are kept when CPUID gives no
// sizes.
func tuned[T elem](s *kernelSet[T]) *kernelSet[T] {
	s.kc, s.nc = blocking(s.mr, s.nr, int(unsafe.Sizeof(T(0))), thisCPU.l1d, thisCPU.l2, s.kc, s.nc)
	if thisCPU.l1Ways > 0 {
		s.l1Ways, s.l1Sets = thisCPU.l1Ways, thisCPU.l1d/64/thisCPU.l1Ways
	}
	return s
}

// hasAVX2 reports whether the AVX transposes may run (package kernels
// decides, from the CPU and $GONOX_KERNELS).
var hasAVX2 = kernels.Has(kernels.AVX2)

// archSets lists the assembly kernel sets this machine can run, best first:
// those package kernels allows.
func archSets() []*kernelSet[float32] {
	return allowed(avx512Set, avx2Set)
}

// archSets64 is archSets for the float64 kernels.
func archSets64() []*kernelSet[float64] {
	return allowed(avx512Set64, avx2Set64)
}

// allowed returns those of the AVX-512 and AVX2 sets package kernels
// allows, best first.
func allowed[T elem](avx512, avx2 *kernelSet[T]) []*kernelSet[T] {
	var s []*kernelSet[T]
	if kernels.Has(kernels.AVX512) {
		s = append(s, avx512)
	}
	if kernels.Has(kernels.AVX2) {
		s = append(s, avx2)
	}
	return s
}

// transposeAVX is transposeFunc with 8×8 AVX blocks (every AVX2 and
// AVX-512 machine has AVX).
func transposeAVX(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	nb := cols / 8
	i := 0
	if nb > 0 && hasAVX2 {
		for ; i+8 <= rows; i += 8 {
			// Bounds: the last element read and the last written.
			_ = src[(i+7)*lds+nb*8-1]
			_ = dst[(nb*8-1)*ldd+i+7]
			transpose8(&dst[i], ldd, &src[i*lds], lds, nb)
			if nb*8 < cols {
				transposeGo(dst[nb*8*ldd+i:], ldd, src[i*lds+nb*8:], lds, 8, cols-nb*8)
			}
		}
	}
	if i < rows {
		transposeGo(dst[i:], ldd, src[i*lds:], lds, rows-i, cols)
	}
}
