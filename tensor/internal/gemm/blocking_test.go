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
		kc, nc         int
	}{
		{"unknown caches keep the defaults", 12, 32, 0, 0, 256, 512},
		{"sapphire rapids avx512", 12, 32, 48 * K, 2 * M, 256, 1024},
		{"zen5 avx512", 12, 32, 48 * K, 1 * M, 256, 512},
		{"zen4 avx512", 12, 32, 32 * K, 1 * M, 128, 1024},
		{"zen3 avx2", 6, 16, 32 * K, 512 * K, 320, 192},
		{"tiny caches clamp", 12, 32, 4 * K, 64 * K, 128, 128},
		{"huge caches clamp", 6, 16, 1 * M, 64 * M, 512, 4096},
	} {
		t.Run(c.name, func(t *testing.T) {
			kc, nc := blocking(c.mr, c.nr, 4, c.l1, c.l2, 256, 512)
			assert.Equal(t, c.kc, kc, "kc")
			assert.Equal(t, c.nc, nc, "nc")
			assert.Zero(t, nc%c.nr, "nc is a multiple of nr")
		})
	}
}
