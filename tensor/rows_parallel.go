package tensor

import (
	"runtime"

	"github.com/gonox/gonox/tensor/internal/vec"
)

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
// With zero, dst is uninitialised and the sums start from +0: a row's
// first contribution is written as upd + 0 (the bits of 0 + upd, -0
// included) and the rows nobody adds into are cleared, each chunk of rows
// by the goroutine that owns it, instead of a clearing pass before the
// adds (the MoE layer's combine gradient and dispatch transpose, 1 MB
// each). With w (one weight per row of upd, nil otherwise) row j adds
// w[j]·upd[j], the product rounded before the add: the bits of Mul then
// the scatter (SegmentWeightedSum).
func scatterRowsF32(dst, upd, w []float32, idx []int32, n, inner int, dropOut, zero, local bool) {
	scatterRowsOfF32(dst, upd, nil, w, idx, n, inner, dropOut, zero, local)
}

// scatterRowsOfF32 is scatterRowsF32 whose rows of upd are rowsOf[j]
// instead when rowsOf is not nil (SegmentSumRows: rows read where
// another device's block holds them).
func scatterRowsOfF32(dst, upd []float32, rowsOf [][]float32, w []float32, idx []int32, n, inner int, dropOut, zero, local bool) {
	rows := func(lo, hi int) {
		var seenBuf [64]uint64
		var seen []uint64
		var scratch [256]float32 // addScaledRow's products, zeroed once a chunk
		if zero {
			if w := (hi - lo + 63) / 64; w <= len(seenBuf) {
				seen = seenBuf[:w]
			} else {
				seen = make([]uint64, w)
			}
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
				var u []float32
				if rowsOf != nil {
					u = rowsOf[j][:inner]
				} else {
					u = upd[j*inner : (j+1)*inner]
				}
				first := false
				if r := k - lo; zero && seen[r/64]&(1<<(r%64)) == 0 {
					seen[r/64] |= 1 << (r % 64)
					first = true
				}
				switch {
				case w != nil:
					addScaledRow(d, u, w[j], first, &scratch)
				case first:
					vec.AddVS(d, u, 0)
				default:
					vec.AddVV(d, d, u)
				}
			}
		}
		for r := range len(seen) * 64 {
			if r < hi-lo && seen[r/64]&(1<<(r%64)) == 0 {
				clear(dst[(lo+r)*inner : (lo+r+1)*inner])
			}
		}
	}
	work := len(upd)
	if rowsOf != nil {
		work = len(rowsOf) * inner
	}
	if serial(work*costCheap, local) {
		rows(0, n)
		return
	}
	// One chunk a goroutine: every chunk scans all the indices, which at
	// parallelFor's 4 chunks a goroutine cost more than the late-join
	// balance they buy (a top-2 MoE layer's 4096 rows of 128 into 2048
	// tokens at 2 threads: 51-55 µs in 8 chunks, 42 µs in 2, AMD EPYC
	// Zen 5, BenchmarkScatterRowsFromZero).
	p := min(runtime.GOMAXPROCS(0), max(2, work*costCheap/(parallelMinWork/2)), n)
	spread(p, func(c int) int { return n * c / p }, rows)
}

// addScaledRow adds s·u into d (or, with first, writes s·u + 0 over it),
// each product rounded to float32 before the add, in pieces staged in buf
// (the caller's, zeroed once for all its rows: a buffer declared here was
// zeroed at every row, 1 KB a row, which made the MoE combine's weighted
// segment sum ~60% slower than the unweighted one).
func addScaledRow(d, u []float32, s float32, first bool, buf *[256]float32) {
	if first {
		vec.MulVS(d, u, s)
		vec.AddVS(d, d, 0)
		return
	}
	for len(u) > 0 {
		m := min(len(u), len(buf))
		vec.MulVS(buf[:m], u[:m], s)
		vec.AddVV(d[:m], d[:m], buf[:m])
		d, u = d[m:], u[m:]
	}
}
