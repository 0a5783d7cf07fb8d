// Package maskprobe holds microbenchmarks of AVX-512 masked memory accesses
// (zero- and merge-masked loads, masked stores, FMAs with a masked memory
// operand) against their unmasked forms, to find which forms the gemm and
// conv kernels must avoid on a given CPU.
//
// Run them with
//
//	go test -run '^$' -bench . ./tensor/internal/gemm/internal/maskprobe
//
// Each benchmark reports ns/vec, the time of one 64-byte access. On the
// AMD EPYC Zen 5 of docs/performance.md masked and unmasked forms cost the
// same, except a masked access whose masked-off lanes, and no enabled
// lane, reach into a page that is not present (never touched, released by
// the scavenger, or PROT_NONE): 180-380 ns an access instead of 0.25, the
// fault suppression's assist; a load masked by a compare of data just
// loaded, which waits for that load (BenchmarkCmpMask, 1.15x over 8 MB);
// and a stream beyond L2 read only through masked loads, which the
// hardware prefetcher does not follow (BenchmarkStream, 1.8-2.2x over
// 64 MB, recovered by a software prefetch). The package is not used by
// gonox's code.
package maskprobe
