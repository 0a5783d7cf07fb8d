package data

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestPermutationIsBijection(t *testing.T) {
	for _, n := range []int{0, 1, 2, 3, 4, 5, 16, 17, 100, 1000, 65537} {
		p := NewPermutation(tensor.NewKey(uint64(n)), n)
		require.Equal(t, n, p.Len())
		seen := make([]bool, n)
		for i := range n {
			v := p.At(i)
			require.True(t, v >= 0 && v < n, "n=%d: At(%d) = %d", n, i, v)
			require.False(t, seen[v], "n=%d: %d twice", n, v)
			seen[v] = true
		}
		assert.Panics(t, func() { p.At(n) })
		assert.Panics(t, func() { p.At(-1) })
	}
	assert.Panics(t, func() { NewPermutation(tensor.NewKey(0), -1) })
}

// TestPermutationUniform: over many keys, element j lands at position i
// with frequency 1/n for every (i, j), within 5 standard deviations; and
// the permutations are not all alike.
func TestPermutationUniform(t *testing.T) {
	const n, keys = 7, 20000
	var counts [n][n]int
	distinct := map[[n]int]bool{}
	for k := range keys {
		p := NewPermutation(tensor.NewKey(uint64(k)), n)
		var perm [n]int
		for i := range n {
			perm[i] = p.At(i)
			counts[i][perm[i]]++
		}
		distinct[perm] = true
	}
	mean := float64(keys) / n
	sd := math.Sqrt(keys * (1.0 / n) * (1 - 1.0/n))
	for i := range n {
		for j := range n {
			assert.InDelta(t, mean, float64(counts[i][j]), 5*sd, "position %d element %d", i, j)
		}
	}
	// 5040 permutations of 7: 20000 draws should find nearly all.
	assert.Greater(t, len(distinct), 4900)
}

func TestPermutationLarge(t *testing.T) {
	const n = 1_000_000_000_007
	p := NewPermutation(tensor.NewKey(9), n)
	q := NewPermutation(tensor.NewKey(10), n)
	seen := map[int]bool{}
	same := 0
	for i := range 20000 {
		v := p.At(i * 49999991)
		require.True(t, v >= 0 && v < n)
		require.False(t, seen[v])
		seen[v] = true
		if v == q.At(i*49999991) {
			same++
		}
	}
	assert.Zero(t, same)
	assert.Equal(t, p.At(12345), NewPermutation(tensor.NewKey(9), n).At(12345), "deterministic")
}
