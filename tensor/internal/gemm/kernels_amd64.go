//go:build amd64 && !noasm

package gemm

//go:generate go run gen_kernels.go

import (
	"unsafe"

	"github.com/gonox/gonox/internal/kernels"
)

// The AVX-512 set reads B in place up to 128 rows of C, but only up to 96
// when B's rows are a multiple of 4 KiB (an L1 way: 64 sets of 64-byte
// lines) apart (directAliasMaxM; see readsBInPlace): a 1024- or 2048-wide
// B, as the data-parallel MLP's 784×1024 and 1024×1024 weights. The rows
// of the in-place strip then all fall in the same L1 sets. On AMD EPYC
// Zen 5 (BenchmarkSgemmDirect, GFLOP per CPU-second, one core, 2 rounds,
// load 1.9-2.5), packing B for A·B with n = 1024 or 2048 gained 2-8% from
// 112 rows up (m=128, k=1024, n=1024: 216 in place, 226 packed; k=784:
// 218, 223; n=2048: 204-210, 220-223), lost 1-4% at 64-96 rows and ~20%
// at 32 (203-206, 165); with rows not 4 KiB apart (n = 512, 768, 784) in
// place won at every m measured, up to 160 (5-13% at 112-128 rows).
// op(A)·Bᵀ (single strips of Bᵀ up to directMaxM against whole blocks)
// was within -6..+2% and keeps directMaxM. The set geometry is the same on
// Zen 4 and recent Intel cores (64 sets), so the rule carries over; the
// crossover of 96 rows was measured on Zen 5 only. In float64
// (avx512Set64) B in place stayed faster at 128 rows with rows 8 KiB apart
// (see there), so that set keeps 128. On Intel the crossover is lower: see
// aliasMaxM.
var avx512Set = tuned(&kernelSet[float32]{
	name: "avx512", mr: 12, nr: 32, nrHalf: 16,
	kc: 256, nc: 512, directMaxM: 128, directAliasMaxM: aliasMaxM(thisCPU.vendor), oneVectorM: true,
	kern:         avx512Kernels,
	kernT:        avx512TKernels,
	kernP:        avx512Kernels[flavC],
	packATStrips: true,
	packAT:       packAT12,
	packBn:       packB32,
	transpose:    transposeAVX,
	pools:        pools32,
})

// aliasMaxM is the AVX-512 float32 set's directAliasMaxM on a CPU of this
// vendor: 96 rows (measured on AMD EPYC Zen 5, above), 16 on Intel, where
// packing B whose rows are 4 KiB apart won from 32 rows up. On a Sapphire
// Rapids VM (BenchmarkSgemmDirect NN, k=1024, GFLOP per CPU-second, one
// core, 4 rounds, load 3-7, ranges in place against packed): n=1024
// m=32 73-80 / 74-80, m=64 92-97 / 88-106, m=96 101-109 / 105-117;
// n=2048 m=32 52-67 / 72-80, m=64 75-85 / 96-103, m=96 77-90 / 105-114.
// With rows not 4 KiB apart (n=768) the modes tied at 64-96 rows and in
// place won at 32 (86-96 / 87-91), so directMaxM stays 128.
func aliasMaxM(vendor string) int {
	if vendor == "GenuineIntel" {
		return 16
	}
	return 96
}

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
// half as many columns: a vector holds half as many elements. Without
// cache sizes from CPUID their B block is 256×256 (512 KiB, as the float32
// sets' 256×512): on AMD EPYC Zen 5 (AVX-512 set, 1024³, GFLOP per
// CPU-second, medians of 4-5 interleaved runs on a busy machine) 256×256,
// 192×336 (what blocking gives for Zen 5's 48 KiB L1d and 1 MiB L2),
// 128×512 and 256×384 were within noise of each other (70-77) and of
// OpenBLAS (73), 256×1024 lost (64). B is read in place up to 128 rows of
// C: m=32, n=k=1024 ran at 59 in place against 36 packed; m=128 at 52
// against 57 when measured first, 107 against 104 on 2026-11-28
// (GONOX_GEMM_DIRECT64=128 against 128,96, Dgemm/mlp_m128_k1024_n1024/fwd_NN).
var avx512Set64 = tuned(&kernelSet[float64]{
	name: "avx512", mr: 12, nr: 16, nrHalf: 8,
	kc: 256, nc: 256, directMaxM: 128,
	kern:      avx512Kernels64,
	kernP:     avx512Kernels64[flavC],
	transpose: transposeAVX64,
	pools:     pools64,
})

// The float64 AVX2 set packs A (with assembly packers, as the float32
// one): on Zen 5 with GONOX_KERNELS=avx2, 1024³ ran at 41 GFLOP per
// CPU-second packed against 38 in place; 256×256 and 128×256 blocks at
// 42-43, 256×512 at 41, 256×128 at 39 (OpenBLAS's Zen kernels: 44).
var avx2Set64 = tuned(&kernelSet[float64]{
	name: "avx2", mr: 6, nr: 8, nrHalf: 4,
	kc: 256, nc: 256, directMaxM: 16, packA: true,
	kern:      avx2Kernels64,
	kernP:     avx2PKernels64,
	packA4:    packA6d,
	packAT:    packAT6d,
	packBn:    packB8d,
	transpose: transposeAVX64,
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
// AVX-512 machine has AVX), or 4×4 ones where fewer than 8 rows or
// columns leave no 8×8 block (a classifier's 4 outputs: a tile of its
// weight gradient's Cᵀ, the rows of its input gradient's cotangent).
func transposeAVX(dst []float32, ldd int, src []float32, lds int, rows, cols int) {
	if rows < 8 || cols < 8 {
		transposeBlocked(dst, ldd, src, lds, rows, cols, 4, transpose4)
		return
	}
	transposeBlocked(dst, ldd, src, lds, rows, cols, 8, transpose8)
}

// transposeAVX64 is transposeFunc for float64 with 4×4 AVX blocks.
func transposeAVX64(dst []float64, ldd int, src []float64, lds int, rows, cols int) {
	transposeBlocked(dst, ldd, src, lds, rows, cols, 4, transpose4d)
}

// transposeBlocked transposes with blk, which transposes nb bs×bs blocks
// side by side. An edge narrower than a block (the last columns or rows)
// is one more block that overlaps the last whole one, writing some
// elements twice with the same values (dst and src never overlap): a
// classifier's 10-column rows take two blocks instead of one block and a
// scalar tail. Fewer rows or columns than a block go through transposeGo.
func transposeBlocked[T elem](dst []T, ldd int, src []T, lds int, rows, cols, bs int, blk func(dst *T, ldd int, src *T, lds int, nb int)) {
	nb := cols / bs
	if nb == 0 || rows < bs || !hasAVX2 {
		transposeGo(dst, ldd, src, lds, rows, cols)
		return
	}
	// Bounds: the last element read and the last written.
	_ = src[(rows-1)*lds+cols-1]
	_ = dst[(cols-1)*ldd+rows-1]
	for i := 0; i < rows; i += bs {
		i = min(i, rows-bs) // the last block row overlaps the one before
		blk(&dst[i], ldd, &src[i*lds], lds, nb)
		if nb*bs < cols {
			blk(&dst[(cols-bs)*ldd+i], ldd, &src[i*lds+cols-bs], lds, 1)
		}
	}
}
