// Package box does the geometry of n-dimensional blocks of row-major
// arrays: where two blocks overlap and how to copy one region between
// them. Packages shard (placing blocks on devices) and checkpoint
// (restoring blocks from saved shards) share it.
package box

// Strides returns the row-major strides, in elements, of an array of the
// given shape.
func Strides(shape []int) []int {
	s := make([]int, len(shape))
	acc := 1
	for i := len(shape) - 1; i >= 0; i-- {
		s[i] = acc
		acc *= shape[i]
	}
	return s
}

// Intersect returns the intersection of two boxes given by offset and
// size, and false if it is empty.
func Intersect(aOff, aSize, bOff, bSize []int) (lo, size []int, ok bool) {
	lo = make([]int, len(aOff))
	size = make([]int, len(aOff))
	for i := range aOff {
		l := max(aOff[i], bOff[i])
		h := min(aOff[i]+aSize[i], bOff[i]+bSize[i])
		if h <= l {
			return nil, nil, false
		}
		lo[i], size[i] = l, h-l
	}
	return lo, size, true
}

// Copy copies the global region [lo, lo+size) from src, a block of shape
// sshape whose element 0 sits at global offset soff, into dst, a block of
// shape dshape at offset doff. Runs along the last dimension are copied
// with the built-in copy.
func Copy[T any](dst []T, dshape, doff []int, src []T, sshape, soff []int, lo, size []int) {
	r := len(size)
	if r == 0 {
		if len(dst) > 0 {
			dst[0] = src[0]
		}
		return
	}
	for _, s := range size {
		if s == 0 {
			return
		}
	}
	dstr := Strides(dshape)
	sstr := Strides(sshape)
	idx := make([]int, r-1)
	run := size[r-1]
	for {
		di, si := 0, 0
		for k := 0; k < r; k++ {
			g := lo[k]
			if k < r-1 {
				g += idx[k]
			}
			di += (g - doff[k]) * dstr[k]
			si += (g - soff[k]) * sstr[k]
		}
		copy(dst[di:di+run], src[si:si+run])
		k := r - 2
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < size[k] {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return
		}
	}
}
