package kernels

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestChoose(t *testing.T) {
	tests := []struct {
		env     string
		max     Set
		want    Set
		wantErr string
	}{
		{"", AVX512, AVX512, ""},
		{"  ", AVX2, AVX2, ""},
		{"", Go, Go, ""},
		{"avx512", AVX512, AVX512, ""},
		{"AVX2", AVX512, AVX2, ""},
		{"go", AVX512, Go, ""},
		{"go", Go, Go, ""},
		{"avx2", AVX2, AVX2, ""},
		{"avx512", AVX2, Go, "GONOX_KERNELS=avx512: " + describe(AVX512) + "; it supports avx2, go"},
		{"avx2", Go, Go, "GONOX_KERNELS=avx2: " + describe(AVX2) + "; it supports go"},
		{"sse", AVX512, Go, `GONOX_KERNELS="sse": unknown kernel set (want avx512, avx2 or go); this machine supports avx512, avx2, go`},
	}
	for _, tc := range tests {
		t.Run(tc.env+"/"+tc.max.String(), func(t *testing.T) {
			got, err := choose(tc.env, tc.max)
			if tc.wantErr != "" {
				require.EqualError(t, err, tc.wantErr)
			} else {
				require.NoError(t, err)
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestSupported(t *testing.T) {
	s := Supported()
	require.NotEmpty(t, s)
	assert.Equal(t, Go, s[len(s)-1])
	assert.Equal(t, best(), s[0])
	if Err() == nil {
		assert.Contains(t, s, Active())
		for _, k := range []Set{Go, AVX2, AVX512} {
			assert.Equal(t, k <= Active(), Has(k), "Has(%v)", k)
		}
	}
	assert.Equal(t, "kernels.Set(7)", Set(7).String())
}
