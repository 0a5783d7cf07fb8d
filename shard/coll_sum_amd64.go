//go:build amd64 && !noasm

package shard

import "github.com/gonox/gonox/internal/kernels"

// useAVX2 selects the AVX2 reduction kernel: under the kernel set the
// module uses (GONOX_KERNELS; AVX2 and AVX-512 sets both include AVX2), so
// GONOX_KERNELS=go runs the Go loop as every other kernel does. Tests
// switch it off to check that both give the same bits.
var useAVX2 = kernels.Has(kernels.AVX2)

//go:noescape
func sum8AVX2(d *float32, s *[8]*float32, n int, first bool)

//go:noescape
func sum4AVX2(d *float32, s *[4]*float32, n int, first bool)

//go:noescape
func sum2AVX2(d *float32, s *[2]*float32, n int, first bool)

// sumAsm sums the first multiple of 8 elements of the len(g) streams (8,
// 4 or 2) into d as sum8, sum4 or sum2 does, and returns how many it did
// (0 without AVX2).
func sumAsm(d []float32, g [][]float32, first bool) int {
	n := len(d) / 8
	if !useAVX2 || n == 0 {
		return 0
	}
	var s [8]*float32
	for k := range g {
		_ = g[k][8*n-1] // bounds: every stream holds 8n elements
		s[k] = &g[k][0]
	}
	switch len(g) {
	case 8:
		sum8AVX2(&d[0], &s, n, first)
	case 4:
		sum4AVX2(&d[0], (*[4]*float32)(s[:4]), n, first)
	case 2:
		sum2AVX2(&d[0], (*[2]*float32)(s[:2]), n, first)
	default:
		return 0
	}
	return 8 * n
}
