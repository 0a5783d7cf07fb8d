package gemm

// blocking returns the k block (kc) and n block (nc) of a kernel set with
// mr×nr tiles of size-byte elements for a core with l1d bytes of L1 data
// cache and l2 bytes of L2 (0 if unknown: then the defaults kc, nc are
// kept).
//
// In our loop nest (see run) an A strip of mr×kc elements is reused from L1
// by every micro-kernel call along a B block, while the B block (kc×nc,
// packed in nr-wide strips) is read from L2 once per A strip:
//
//   - kc: an A strip and the B strip streaming past it fit in L1,
//     (mr+nr)·kc·size ≤ l1d, in multiples of 64 between 128 and 512. A larger
//     kc means fewer passes over C (C is read and written ⌈k/kc⌉ times).
//   - nc: a B block fills at most half of L2, kc·nc·size ≤ l2/2 (the rest
//     holds the A strips and C tiles on their way), in multiples of nr
//     between 4·nr and 4096.
//
// On a 48 KiB L1 / 2 MiB L2 core (Sapphire Rapids) the AVX-512 set (12×32)
// gets kc=256, nc=1024; with 48 KiB / 1 MiB (Zen 5) kc=256, nc=512; with
// 32 KiB / 1 MiB (Zen 4) kc=128, nc=1024; the AVX2 set (6×16) on Zen 3
// (32 KiB / 512 KiB) kc=320, nc=192.
//
// The float64 sets (size 8) get, with the same caches: AVX-512 (12×16)
// kc=192, nc=672 on Sapphire Rapids, kc=192, nc=336 on Zen 5, kc=128,
// nc=512 on Zen 4; AVX2 (6×8) on Zen 3 kc=256, nc=128.
//
// On Zen 3 (AMD EPYC, family 25 model 1, CPUID as above) the alternatives
// kc,nc = 320,320, 256,256, 344,176, 256,384 and 320,512 measured within
// noise of 320,192 for 1024³ on one thread (medians 73-75 GFLOP per
// CPU-second, interleaved in one process), as does OpenBLAS's choice for
// Zen (its P=Q=320 with the same 16×6 register tile); the time that was
// lost went to packing (see packAPays and packBRows), not to blocking.
func blocking(mr, nr, size, l1d, l2, kc, nc int) (int, int) {
	if l1d <= 0 || l2 <= 0 {
		return kc, nc
	}
	kc = l1d / ((mr + nr) * size) / 64 * 64
	kc = min(max(kc, 128), 512)
	nc = l2 / 2 / (kc * size) / nr * nr
	nc = min(max(nc, 4*nr), 4096)
	return kc, nc
}
