package tensor

import "github.com/gonox/gonox/tensor/internal/vec"

// Row-parallel float32 forms of the gathers and scatters of whole rows
// (Take along the first axis, its gradient, SegmentSum and its transpose):
// an embedding's lookup and gradient and a MoE layer's dispatch and
// combine, [tokens, D] each. They split the rows of the result over
// goroutines, each scanning all the indices for the rows it owns, so a
// row still accumulates its contributions in index order: the bits of the
// serial loops, whatever the split.

// rowsMin is the shortest row the forms below take (shorter rows keep
// the generic loops).
const rowsMin = 16

// gatherRowsF32 sets dst[j] = src[idx[j]] (rows of inner elements; src
// has n rows, idx wraps negative indices; with zeroOut, an index outside
// [0, n) gives a zero row instead, as SegmentSum's transpose does).
func gatherRowsF32(dst, src []float32, idx []int32, n, inner int, zeroOut, local bool) {
	rows := func(lo, hi int) {
		for j := lo; j < hi; j++ {
			v := idx[j]
			d := dst[j*inner : (j+1)*inner]
			if zeroOut {
				if v < 0 || int(v) >= n {
					clear(d)
					continue
				}
			} else {
				v = int32(wrapIndex(v, n))
			}
			copy(d, src[int(v)*inner:(int(v)+1)*inner])
		}
	}
	if serial(len(dst)*costCheap, local) {
		rows(0, len(idx))
		return
	}
	parallelFor(len(idx), inner*costCheap, 1, false, rows)
}

// scatterRowsF32 adds row j of upd into row idx[j] of dst (n rows of
// inner elements), in the order of j. With dropOut an index outside [0,
// n) is skipped (SegmentSum); otherwise negative indices wrap (ScatterAdd).
// With zero, dst (uninitialised) is cleared first, each chunk of rows by
// the goroutine that adds into it.
func scatterRowsF32(dst, upd []float32, idx []int32, n, inner int, dropOut, zero, local bool) {
	rows := func(lo, hi int) {
		if zero {
			clear(dst[lo*inner : hi*inner])
		}
		for j, v := range idx {
			if dropOut {
				if v < 0 || int(v) >= n {
					continue
				}
			} else {
				v = int32(wrapIndex(v, n))
			}
			if k := int(v); k >= lo && k < hi {
				d := dst[k*inner : (k+1)*inner]
				vec.AddVV(d, d, upd[j*inner:(j+1)*inner])
			}
		}
	}
	if serial(len(upd)*costCheap, local) {
		rows(0, n)
		return
	}
	parallelFor(n, max(1, len(upd)/max(n, 1))*costCheap, 1, false, rows)
}
