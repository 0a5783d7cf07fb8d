//go:build amd64 && !noasm

package gemm

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAliasMaxM checks the AVX-512 set's row threshold for reading B in
// place when its rows are 4 KiB apart: 16 rows on Intel (packing won from
// 32 rows on Sapphire Rapids), 96 elsewhere (Zen 5), and what readsBInPlace
// then chooses for the data-parallel MLP's 32- and 64-row products.
func TestAliasMaxM(t *testing.T) {
	require.Equal(t, 16, aliasMaxM("GenuineIntel"))
	require.Equal(t, 96, aliasMaxM("AuthenticAMD"))
	require.Equal(t, 96, aliasMaxM(""))
	intel := &kernelSet[float32]{mr: 12, nr: 32, nrHalf: 16, kc: 256, nc: 512, directMaxM: 128, directAliasMaxM: aliasMaxM("GenuineIntel"), l1Sets: 64, l1Ways: 12}
	for _, c := range []struct {
		name   string
		m, ldb int
		want   bool
	}{
		{"rows 4 KiB apart, 16 rows", 16, 1024, true},
		{"rows 4 KiB apart, 32 rows", 32, 1024, false},
		{"rows 4 KiB apart, 64 rows", 64, 1024, false},
		{"rows 8 KiB apart, 32 rows", 32, 2048, false},
		{"rows 3 KiB apart, 64 rows", 64, 768, true},
		{"rows 784 floats apart, 128 rows", 128, 784, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &problem[float32]{m: c.m, n: 1024, k: 1024, ldb: c.ldb}
			require.Equal(t, c.want, intel.readsBInPlace(p))
		})
	}
}
