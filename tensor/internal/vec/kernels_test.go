package vec

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/kernels"
)

// TestKernelSet checks that the dispatch follows package kernels (the CPU
// and $GONOX_KERNELS): the AVX2 kernels run exactly when the chosen set is
// avx2 or wider.
func TestKernelSet(t *testing.T) {
	require.NoError(t, kernels.Err())
	require.Equal(t, kernels.Active() >= kernels.AVX2, useAVX2, "kernel set %v", kernels.Active())
}
