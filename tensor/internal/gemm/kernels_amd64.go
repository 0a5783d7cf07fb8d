//go:build amd64 && !noasm

package gemm

//go:generate go run gen_kernels.go

import "golang.org/x/sys/cpu"

var avx512Set = tuned(&kernelSet{
	name: "avx512", mr: 12, nr: 32, nrHalf: 16,
	kc: 256, nc: 512, directMaxM: 128,
	kern:      avx512Kernels,
	transpose: transposeAVX,
})

var avx2Set = tuned(&kernelSet{
	name: "avx2", mr: 6, nr: 16, nrHalf: 8,
	kc: 256, nc: 512, directMaxM: 128,
	kern:      avx2Kernels,
	transpose: transposeAVX,
})

// thisCPU is what CPUID reports about this machine's caches.
var thisCPU = detectCPU()

// tuned sets the blocking of s from the cache sizes this CPU reports (see
// blocking); the kc and nc s was written with are kept when CPUID gives no
// sizes.
func tuned(s *kernelSet) *kernelSet {
	s.kc, s.nc = blocking(s.mr, s.nr, thisCPU.l1d, thisCPU.l2, s.kc, s.nc)
	return s
}

// hasAVX512 and hasAVX2 report what the CPU and OS support. AVX-512 needs
// only the F subset (the kernels use zmm FMA, broadcast and mask registers),
// plus BMI2 (SHLX) which every AVX-512 CPU has.
var (
	hasAVX512 = cpu.X86.HasAVX512F && cpu.X86.HasBMI2
	hasAVX2   = cpu.X86.HasAVX2 && cpu.X86.HasFMA
)

// archSets lists the assembly kernel sets this machine can run, best first.
func archSets() []*kernelSet {
	var s []*kernelSet
	if hasAVX512 {
		s = append(s, avx512Set)
	}
	if hasAVX2 {
		s = append(s, avx2Set)
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
