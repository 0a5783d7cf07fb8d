package gemm

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestBlocking(t *testing.T) {
	const K, M = 1 << 10, 1 << 20
	for _, c := range []struct {
		name           string
		mr, nr, l1, l2 int
		size           int // bytes per element; 0: 4
		kc, nc         int
	}{
		{"unknown caches keep the defaults", 12, 32, 0, 0, 0, 256, 512},
		{"sapphire rapids avx512", 12, 32, 48 * K, 2 * M, 0, 256, 1024},
		{"zen5 avx512", 12, 32, 48 * K, 1 * M, 0, 256, 512},
		{"zen4 avx512", 12, 32, 32 * K, 1 * M, 0, 128, 1024},
		{"zen3 avx2", 6, 16, 32 * K, 512 * K, 0, 320, 192},
		{"tiny caches clamp", 12, 32, 4 * K, 64 * K, 0, 128, 128},
		{"huge caches clamp", 6, 16, 1 * M, 64 * M, 0, 512, 4096},
		// float64 (Dgemm): 12×16 and 6×8 tiles of 8-byte elements.
		{"zen5 avx512 float64", 12, 16, 48 * K, 1 * M, 8, 192, 336},
		{"zen4 avx512 float64", 12, 16, 32 * K, 1 * M, 8, 128, 512},
		{"sapphire rapids avx512 float64", 12, 16, 48 * K, 2 * M, 8, 192, 672},
		{"zen3 avx2 float64", 6, 8, 32 * K, 512 * K, 8, 256, 128},
	} {
		t.Run(c.name, func(t *testing.T) {
			size := c.size
			if size == 0 {
				size = 4
			}
			kc, nc := blocking(c.mr, c.nr, size, c.l1, c.l2, 256, 512)
			assert.Equal(t, c.kc, kc, "kc")
			assert.Equal(t, c.nc, nc, "nc")
			assert.Zero(t, nc%c.nr, "nc is a multiple of nr")
		})
	}
}
