package box

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestStrides(t *testing.T) {
	assert.Equal(t, []int{12, 4, 1}, Strides([]int{2, 3, 4}))
	assert.Equal(t, []int{}, Strides([]int{}))
}

func TestIntersect(t *testing.T) {
	lo, size, ok := Intersect([]int{0, 4}, []int{4, 4}, []int{2, 6}, []int{4, 4})
	assert.True(t, ok)
	assert.Equal(t, []int{2, 6}, lo)
	assert.Equal(t, []int{2, 2}, size)
	_, _, ok = Intersect([]int{0}, []int{4}, []int{4}, []int{4})
	assert.False(t, ok, "touching boxes do not overlap")
}

func TestCopy(t *testing.T) {
	// A 4x6 global array holding 10*row+col; copy the region rows 1-2,
	// cols 2-4 from the block at (0,2) of shape 4x4 into a block at (1,0)
	// of shape 3x6.
	global := func(r, c int) int { return 10*r + c }
	src := make([]int, 16)
	for r := 0; r < 4; r++ {
		for c := 0; c < 4; c++ {
			src[r*4+c] = global(r, c+2)
		}
	}
	dst := make([]int, 18)
	Copy(dst, []int{3, 6}, []int{1, 0}, src, []int{4, 4}, []int{0, 2}, []int{1, 2}, []int{2, 3})
	want := make([]int, 18)
	for r := 1; r <= 2; r++ {
		for c := 2; c <= 4; c++ {
			want[(r-1)*6+c] = global(r, c)
		}
	}
	assert.Equal(t, want, dst)
	// Scalars and empty regions.
	one := []int{0}
	Copy(one, nil, nil, []int{7}, nil, nil, nil, nil)
	assert.Equal(t, []int{7}, one)
	before := append([]int(nil), dst...)
	Copy(dst, []int{3, 6}, []int{0, 0}, src, []int{4, 4}, []int{0, 0}, []int{0, 0}, []int{0, 2})
	assert.Equal(t, before, dst, "an empty region copies nothing")
}
