package conv

import (
	"fmt"
	"math"
	"strings"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// Window describes a windowed reduction (lax.reduce_window) over a
// contiguous row-major array of any rank: along each dimension d the
// input, padded by PadLo[d] and PadHi[d] elements that take no part (the
// reduction's identity), is covered by windows of Size[d] elements spaced
// Dilation[d] apart, Stride[d] apart from one window to the next:
//
//	window t of dimension d reads input indices t·Stride + k·Dilation - PadLo, k < Size
//
// Nil Stride and Dilation mean 1, nil pads 0. With AdaptiveOut set
// instead (and Size, Stride, pads and Dilation nil), dimension d has
// AdaptiveOut[d] windows, window t covering [⌊t·In/Out⌋, ⌈(t+1)·In/Out⌉),
// PyTorch's adaptive pooling.
type Window struct {
	Shape        []int
	Size, Stride []int
	PadLo, PadHi []int
	Dilation     []int
	AdaptiveOut  []int
}

// Check reports what is inconsistent in w, or nil.
func (w *Window) Check() error {
	r := len(w.Shape)
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	for d, n := range w.Shape {
		if n < 0 {
			bad("negative size %d in dimension %d", n, d)
		}
	}
	if w.AdaptiveOut != nil {
		if w.Size != nil || w.Stride != nil || w.PadLo != nil || w.PadHi != nil || w.Dilation != nil {
			bad("adaptive windows take no size, stride, padding or dilation")
		}
		if len(w.AdaptiveOut) != r {
			bad("%d adaptive output sizes for %d dimensions", len(w.AdaptiveOut), r)
		}
		for d := 0; d < min(r, len(w.AdaptiveOut)); d++ {
			if o := w.AdaptiveOut[d]; o < 0 || (o > 0 && w.Shape[d] == 0) {
				bad("adaptive output size %d for input size %d in dimension %d", o, w.Shape[d], d)
			}
		}
	} else {
		if len(w.Size) != r {
			bad("%d window sizes for %d dimensions", len(w.Size), r)
		}
		for _, s := range []struct {
			name string
			v    []int
		}{{"strides", w.Stride}, {"low paddings", w.PadLo}, {"high paddings", w.PadHi}, {"dilations", w.Dilation}} {
			if s.v != nil && len(s.v) != r {
				bad("%d %s for %d dimensions", len(s.v), s.name, r)
			}
		}
		for d := 0; d < r && len(errs) == 0; d++ {
			if w.Size[d] < 1 {
				bad("window size %d in dimension %d", w.Size[d], d)
			}
			if at(w.Stride, d, 1) < 1 {
				bad("stride %d in dimension %d", w.Stride[d], d)
			}
			if at(w.Dilation, d, 1) < 1 {
				bad("dilation %d in dimension %d", w.Dilation[d], d)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// Out returns the output's shape: per dimension ⌊(In + lo + hi - (Size-1)·Dilation - 1)/Stride⌋ + 1
// windows (0 when the padded input is shorter than a window), or
// AdaptiveOut. w must be valid.
func (w *Window) Out() []int {
	if w.AdaptiveOut != nil {
		return append([]int(nil), w.AdaptiveOut...)
	}
	out := make([]int, len(w.Shape))
	for d, n := range w.Shape {
		span := n + at(w.PadLo, d, 0) + at(w.PadHi, d, 0) - (w.Size[d]-1)*at(w.Dilation, d, 1) - 1
		if span >= 0 {
			out[d] = span/at(w.Stride, d, 1) + 1
		}
	}
	return out
}

// winPlan is a Window normalised: leading dimensions whose windows are
// single elements at stride 1 without padding are one batch dimension;
// the other r ≥ 1 dimensions keep, per output index t and window index k,
// the input index read (tab[d][t·k[d]+k], -1 for padding or past an
// adaptive window's end). The last dimension is also described by rules
// the inner loops use: for uniform windows, per window index j the output
// range [ta, tb) that reads x[t·s + off]; for adaptive ones, per output t
// the input range [st, en).
type winPlan struct {
	lead            int // leading dimensions in batch
	batch           int
	in, out, k      []int
	tab             [][]int32
	inStride        []int // of the r dimensions in x
	inSize, outSize int   // per batch element
	kSize           int
	rowsOut         int // output rows (dimensions but the last) per batch element
	lastOut, kl     int // the last dimension's output size and window size
	kOuter          int // window positions in the other dimensions
	uniform         bool
	ls              int      // the last dimension's stride (uniform)
	lastU           []rowMap // per j (uniform): ta, tb, off
	lastA           [][2]int // per t (adaptive): st, en
	rowStart        []int32  // see buildRows
	rows            []srcRow
	// dense: every tap of every window is inside the input (no padding);
	// orig[o] is output o's first tap, kofs[k] tap k's offset from it.
	dense      bool
	orig, kofs []int32
	// pool2: 2×2 windows at stride 2 without padding or dilation over the
	// last two dimensions, the others a batch (kernelSet.maxPool2).
	pool2 bool
	// whole: one window per batch element, reading each of its elements
	// once (a global pool).
	whole bool
}

// plan checks w and returns its normalised form; nx and ny, if not
// negative, are the input's and output's lengths to check.
func (w *Window) plan(op string, nx, ny int) *winPlan {
	if err := w.Check(); err != nil {
		panic("conv." + op + ": " + err.Error())
	}
	out := w.Out()
	r := len(w.Shape)
	lead := 0
	if w.AdaptiveOut == nil {
		for lead < r-1 && w.Size[lead] == 1 && at(w.Stride, lead, 1) == 1 && at(w.PadLo, lead, 0) == 0 && at(w.PadHi, lead, 0) == 0 {
			lead++
		}
	} else {
		for lead < r-1 && w.AdaptiveOut[lead] == w.Shape[lead] {
			lead++
		}
	}
	pl := &winPlan{lead: lead, batch: 1, inSize: 1, outSize: 1, kSize: 1, uniform: w.AdaptiveOut == nil}
	for d := 0; d < lead; d++ {
		pl.batch *= w.Shape[d]
	}
	for d := lead; d < r; d++ {
		n, o := w.Shape[d], out[d]
		var k int
		var src func(t, j int) int
		if !pl.uniform {
			for t := 0; t < o; t++ {
				k = max(k, ceilDiv((t+1)*n, o)-t*n/o)
			}
			src = func(t, j int) int {
				if i := t*n/o + j; i < ceilDiv((t+1)*n, o) {
					return i
				}
				return -1
			}
		} else {
			k = w.Size[d]
			s, lo, dl := at(w.Stride, d, 1), at(w.PadLo, d, 0), at(w.Dilation, d, 1)
			src = func(t, j int) int {
				if i := t*s + j*dl - lo; i >= 0 && i < n {
					return i
				}
				return -1
			}
		}
		tab := make([]int32, o*k)
		for t := 0; t < o; t++ {
			for j := 0; j < k; j++ {
				tab[t*k+j] = int32(src(t, j))
			}
		}
		pl.in, pl.out, pl.k = append(pl.in, n), append(pl.out, o), append(pl.k, k)
		pl.tab = append(pl.tab, tab)
		pl.inSize *= n
		pl.outSize *= o
		pl.kSize *= k
	}
	pl.inStride = make([]int, len(pl.in))
	st := 1
	for d := len(pl.in) - 1; d >= 0; d-- {
		pl.inStride[d] = st
		st *= pl.in[d]
	}
	last := len(pl.in) - 1
	pl.lastOut, pl.kl = pl.out[last], pl.k[last]
	pl.kOuter = pl.kSize / max(pl.kl, 1)
	if pl.lastOut > 0 {
		pl.rowsOut = pl.outSize / pl.lastOut
	}
	n := pl.in[last]
	if pl.uniform {
		d := r - 1
		s, lo, dl := at(w.Stride, d, 1), at(w.PadLo, d, 0), at(w.Dilation, d, 1)
		pl.ls = s
		pl.lastU = make([]rowMap, pl.kl)
		for j := range pl.lastU {
			m := &pl.lastU[j]
			m.off = j*dl - lo
			m.ta = min(max(0, floorDiv(-m.off+s-1, s)), pl.lastOut)
			m.tb = min(max(m.ta, floorDiv(n-1-m.off, s)+1), pl.lastOut)
		}
	} else {
		o := pl.lastOut
		pl.lastA = make([][2]int, o)
		for t := range pl.lastA {
			pl.lastA[t] = [2]int{t * n / o, ceilDiv((t+1)*n, o)}
		}
	}
	if nx >= 0 && (nx != pl.batch*pl.inSize || ny != pl.batch*pl.outSize) {
		panic(fmt.Sprintf("conv.%s: %d input and %d output elements, want %d and %d", op, nx, ny, pl.batch*pl.inSize, pl.batch*pl.outSize))
	}
	if nx >= 0 {
		pl.buildRows()
		pl.buildDense()
	}
	pl.whole = pl.outSize == 1 && pl.kSize == pl.inSize
	for d := range pl.tab {
		for j, i := range pl.tab[d] {
			pl.whole = pl.whole && int(i) == j
		}
	}
	pl.pool2 = pl.uniform && len(pl.in) == 2 && pl.k[0] == 2 && pl.k[1] == 2
	for d := r - 2; d < r && pl.pool2; d++ {
		pl.pool2 = at(w.Stride, d, 1) == 2 && at(w.Dilation, d, 1) == 1 && at(w.PadLo, d, 0) == 0 && at(w.PadHi, d, 0) == 0
	}
	return pl
}

// srcRow is an input row an output row reads: the window index of the
// dimensions but the last (row-major), times the last one's window size,
// and the row's offset in the batch element.
type srcRow struct{ kbase, xoff int }

// buildRows tabulates, for every output row of a batch element (the
// output's dimensions but the last, row-major), the input rows it reads:
// rows[rowStart[r]:rowStart[r+1]], in window order. The lists are the same
// for every batch element.
func (pl *winPlan) buildRows() {
	r := len(pl.out)
	pl.rowStart = make([]int32, pl.rowsOut+1)
	pos := make([]int, r)
	for row := 0; row < pl.rowsOut; row++ {
		rr := row
		for d := r - 2; d >= 0; d-- {
			pos[d] = rr % pl.out[d]
			rr /= pl.out[d]
		}
		for ko := 0; ko < pl.kOuter; ko++ {
			xoff, q := 0, ko
			for d := r - 2; d >= 0; d-- {
				j := q % pl.k[d]
				q /= pl.k[d]
				i := pl.tab[d][pos[d]*pl.k[d]+j]
				if i < 0 {
					xoff = -1
					break
				}
				xoff += int(i) * pl.inStride[d]
			}
			if xoff >= 0 {
				pl.rows = append(pl.rows, srcRow{ko * pl.kl, xoff})
			}
		}
		pl.rowStart[row+1] = int32(len(pl.rows))
	}
}

// buildDense sets dense, orig and kofs when no window reads padding.
func (pl *winPlan) buildDense() {
	if !pl.uniform || pl.outSize == 0 || pl.kSize == 0 || pl.batch*pl.inSize > math.MaxInt32 {
		return
	}
	for _, tab := range pl.tab {
		for _, i := range tab {
			if i < 0 {
				return
			}
		}
	}
	r := len(pl.out)
	pos := make([]int, r)
	pl.orig = make([]int32, pl.outSize)
	for o := range pl.orig {
		rr, off := o, 0
		for d := r - 1; d >= 0; d-- {
			pos[d] = rr % pl.out[d]
			rr /= pl.out[d]
			off += int(pl.tab[d][pos[d]*pl.k[d]]) * pl.inStride[d]
		}
		pl.orig[o] = int32(off)
	}
	pl.kofs = make([]int32, pl.kSize)
	for k := range pl.kofs {
		kk, off := k, 0
		for d := r - 1; d >= 0; d-- {
			j := kk % pl.k[d]
			kk /= pl.k[d]
			off += int(pl.tab[d][j]-pl.tab[d][0]) * pl.inStride[d]
		}
		pl.kofs[k] = int32(off)
	}
	pl.dense = true
}

// eachDense calls f on chunks of the outputs of every batch element, split
// over goroutines when the work is large: b the batch element, [o0, o1)
// the outputs.
func (pl *winPlan) eachDense(threads int, f func(b, o0, o1 int)) {
	const chunk = 4096
	per := ceilDiv(pl.outSize, chunk)
	units := pl.batch * per
	t := threadCount(threads, pl.visitFlops())
	parallel(min(units, 4*t), t, func(c int, _ *workspace) {
		n := min(units, 4*t)
		for u := c * units / n; u < (c+1)*units/n; u++ {
			b, q := u/per, u%per
			f(b, q*chunk, min((q+1)*chunk, pl.outSize))
		}
	})
}

// visitCost weighs a window's element visits against the flops of
// parMinFlops when deciding to split: windows split from 128K visits
// (LeNet's first max pool visits 600K elements in about 0.2 ms on Zen 5,
// BenchmarkWindow, far more than starting a goroutine costs).
const visitCost = 128

// visitFlops returns the visits of one pass over every window, weighed by
// visitCost.
func (pl *winPlan) visitFlops() float64 {
	return visitCost * float64(pl.batch) * float64(pl.outSize) * float64(pl.kSize)
}

// eachBatch calls f(b) for every batch element b, split over goroutines
// when the work is large.
func (pl *winPlan) eachBatch(threads int, f func(b int)) {
	t := threadCount(threads, pl.visitFlops())
	chunks := min(pl.batch, 4*t)
	parallel(chunks, t, func(ch int, _ *workspace) {
		for b := ch * pl.batch / chunks; b < (ch+1)*pl.batch/chunks; b++ {
			f(b)
		}
	})
}

// srcRows returns the input rows output row rr of a batch element reads.
func (pl *winPlan) srcRows(rr int) []srcRow {
	return pl.rows[pl.rowStart[rr]:pl.rowStart[rr+1]]
}

// eachRow calls f(b, rr, yoff) for every output row rr of every batch
// element b, yoff being the row's offset in y, split over up to threads
// goroutines when the work (elements visited) is large. With byBatch,
// rows of one batch element stay on one goroutine (for kernels that add
// into the input, where rows overlap).
func (pl *winPlan) eachRow(threads int, byBatch bool, f func(b, rr, yoff int)) {
	rows := pl.batch * pl.rowsOut
	t := threadCount(threads, pl.visitFlops())
	units, per := rows, 1
	if byBatch {
		units, per = pl.batch, pl.rowsOut
	}
	chunks := min(units, 4*t)
	parallel(chunks, t, func(ch int, _ *workspace) {
		for u := ch * units / chunks; u < (ch+1)*units/chunks; u++ {
			for row := u * per; row < (u+1)*per; row++ {
				f(row/pl.rowsOut, row%pl.rowsOut, row*pl.lastOut)
			}
		}
	})
}

// MaxForward sets y to the maximum of each window of x (-Inf for a window
// of padding only) and, if arg is not nil, arg to the position of the
// first element holding it within its batch element (the leading
// dimensions whose windows are single elements: x's elements
// [b·inSize, (b+1)·inSize) for batch element b), -1 for a window of
// padding only. A NaN in a window makes its maximum NaN, and arg the
// position of its last NaN; +0 and -0 compare equal (the first is kept).
func MaxForward(w *Window, y []float32, arg []int32, x []float32, threads int) {
	pl := w.plan("MaxForward", len(x), len(y))
	if arg == nil {
		arg = make([]int32, len(y))
	} else if len(arg) != len(y) {
		panic(fmt.Sprintf("conv.MaxForward: %d positions for %d outputs", len(arg), len(y)))
	}
	if pl.pool2 && active.maxPool2 != nil {
		pl.eachBatch(threads, func(b int) {
			ys, xs := y[b*pl.outSize:(b+1)*pl.outSize], x[b*pl.inSize:(b+1)*pl.inSize]
			active.maxPool2(ys, arg[b*pl.outSize:(b+1)*pl.outSize], xs, pl.out[0], pl.out[1], pl.in[1])
		})
		return
	}
	if pl.dense {
		pl.eachDense(threads, func(b, o0, o1 int) {
			off := b * pl.outSize
			active.maxDense(y[off+o0:off+o1], arg[off+o0:off+o1], x[b*pl.inSize:(b+1)*pl.inSize], pl.orig[o0:o1], pl.kofs)
		})
		return
	}
	pl.eachRow(threads, false, func(b, rr, yoff int) {
		yr := y[yoff : yoff+pl.lastOut]
		ar := arg[yoff : yoff+pl.lastOut]
		for t := range yr {
			yr[t], ar[t] = float32(math.Inf(-1)), -1
		}
		xb := x[b*pl.inSize : (b+1)*pl.inSize]
		srcs := pl.srcRows(rr)
		for _, sr := range srcs {
			xr := xb[sr.xoff:]
			if !pl.uniform {
				for t, se := range pl.lastA {
					c, a := yr[t], ar[t]
					for i, v := range xr[se[0]:se[1]] {
						if v > c || v != v {
							c, a = v, int32(sr.xoff+se[0]+i)
						}
					}
					yr[t], ar[t] = c, a
				}
				continue
			}
			for j := range pl.lastU {
				m := &pl.lastU[j]
				if m.ta >= m.tb {
					continue
				}
				base := m.ta*pl.ls + m.off
				active.maxStride(yr[m.ta:m.tb], ar[m.ta:m.tb], xr[base:], pl.ls, int32(sr.xoff+base), int32(pl.ls))
			}
		}
		// Windows whose elements are all -Inf: the first one.
		for t := range ar {
			if ar[t] < 0 && len(srcs) > 0 {
				ar[t] = int32(pl.firstValid(srcs[0], t))
			}
		}
	})
}

// firstValid returns the position of the first input element window t
// of an output row whose first input row is sr reads, or -1.
func (pl *winPlan) firstValid(sr srcRow, t int) int {
	if !pl.uniform {
		if se := pl.lastA[t]; se[0] < se[1] {
			return sr.xoff + se[0]
		}
		return -1
	}
	for j := range pl.lastU {
		if m := &pl.lastU[j]; t >= m.ta && t < m.tb {
			return sr.xoff + t*pl.ls + m.off
		}
	}
	return -1
}

// MaxBackward sets dx to the gradient of MaxForward: each dy[o] added at
// the element of x its window's arg names (select-and-scatter), zero
// elsewhere.
func MaxBackward(w *Window, dx []float32, arg []int32, dy []float32, threads int) {
	pl := w.plan("MaxBackward", len(dx), len(dy))
	if len(arg) != len(dy) {
		panic(fmt.Sprintf("conv.MaxBackward: %d positions for %d outputs", len(arg), len(dy)))
	}
	// Clearing dx and scattering measured 4× faster than writing each
	// window's elements with a select, for windows that tile x (LeNet's
	// 2×2 pools, BenchmarkWindow). Each batch element's block is cleared
	// by the goroutine that scatters into it, before its first row.
	if pl.rowsOut == 0 {
		clear(dx)
	}
	if pl.pool2 && active.maxPool2Grad != nil {
		pl.eachBatch(threads, func(b int) {
			xb := dx[b*pl.inSize : (b+1)*pl.inSize]
			if pl.in[0] != 2*pl.out[0] || pl.in[1] != 2*pl.out[1] {
				clear(xb) // a row or a column no window covers
			}
			active.maxPool2Grad(xb, arg[b*pl.outSize:(b+1)*pl.outSize], dy[b*pl.outSize:(b+1)*pl.outSize], pl.out[0], pl.out[1], pl.in[1])
		})
		return
	}
	pl.eachRow(threads, true, func(b, rr, yoff int) {
		xb := dx[b*pl.inSize : (b+1)*pl.inSize]
		if rr == 0 {
			clear(xb)
		}
		for t, a := range arg[yoff : yoff+pl.lastOut] {
			if a >= 0 {
				xb[a] += dy[yoff+t]
			}
		}
	})
}

// SelectScatter sets dx to what MaxBackward gives for the positions
// MaxForward finds in x (each g[o] at its window's first maximum, the
// last NaN, zero elsewhere: select-and-scatter) in one pass, without the
// positions, and reports true; or it reports false, leaving dx as it was,
// when no kernel of the active set does that for w: the caller then runs
// MaxForward and MaxBackward. The kernels: 2×2 windows at stride 2
// (AVX-512).
func SelectScatter(w *Window, dx, x, g []float32, threads int) bool {
	pl := w.plan("SelectScatter", len(x), len(g))
	if len(dx) != len(x) {
		panic(fmt.Sprintf("conv.SelectScatter: %d gradient elements for %d inputs", len(dx), len(x)))
	}
	if !pl.pool2 || active.selectScatter2 == nil {
		return false
	}
	if pl.rowsOut == 0 {
		clear(dx)
	}
	pl.eachBatch(threads, func(b int) {
		xb, db := x[b*pl.inSize:(b+1)*pl.inSize], dx[b*pl.inSize:(b+1)*pl.inSize]
		if pl.in[0] != 2*pl.out[0] || pl.in[1] != 2*pl.out[1] {
			clear(db) // a row or a column no window covers
		}
		active.selectScatter2(db, xb, g[b*pl.outSize:(b+1)*pl.outSize], pl.out[0], pl.out[1], pl.in[1])
	})
	return true
}

// MaxGather sets ddy[o] to ddx at the element window o's arg names (0 for
// a window of padding only): the transpose of MaxBackward.
func MaxGather(w *Window, ddy []float32, arg []int32, ddx []float32, threads int) {
	pl := w.plan("MaxGather", len(ddx), len(ddy))
	if len(arg) != len(ddy) {
		panic(fmt.Sprintf("conv.MaxGather: %d positions for %d outputs", len(arg), len(ddy)))
	}
	pl.eachRow(threads, false, func(b, _, yoff int) {
		xb := ddx[b*pl.inSize : (b+1)*pl.inSize]
		for t, a := range arg[yoff : yoff+pl.lastOut] {
			v := float32(0)
			if a >= 0 {
				v = xb[a]
			}
			ddy[yoff+t] = v
		}
	})
}

// SumForward sets y to the sum of each window of x (0 for padding).
func SumForward(w *Window, y, x []float32, threads int) {
	pl := w.plan("SumForward", len(x), len(y))
	if pl.whole { // a global pool: each batch element summed in one call
		pl.eachBatch(threads, func(b int) {
			y[b] = float32(vec.SumF64(x[b*pl.inSize : (b+1)*pl.inSize]))
		})
		return
	}
	if pl.dense {
		pl.eachDense(threads, func(b, o0, o1 int) {
			off := b * pl.outSize
			active.sumDense(y[off+o0:off+o1], nil, x[b*pl.inSize:(b+1)*pl.inSize], pl.orig[o0:o1], pl.kofs)
		})
		return
	}
	pl.eachRow(threads, false, func(b, rr, yoff int) {
		yr := y[yoff : yoff+pl.lastOut]
		clear(yr)
		xb := x[b*pl.inSize : (b+1)*pl.inSize]
		for _, sr := range pl.srcRows(rr) {
			xr := xb[sr.xoff:]
			if pl.uniform {
				for j := range pl.lastU {
					m := &pl.lastU[j]
					for t := m.ta; t < m.tb; t++ {
						yr[t] += xr[t*pl.ls+m.off]
					}
				}
				continue
			}
			for t, se := range pl.lastA {
				yr[t] += float32(vec.SumF64(xr[se[0]:se[1]]))
			}
		}
	})
}

// SumBackward sets dx to the transpose of SumForward applied to dy: each
// input element gets the sum of dy over the windows that read it.
func SumBackward(w *Window, dx, dy []float32, threads int) {
	pl := w.plan("SumBackward", len(dx), len(dy))
	if pl.whole { // a global pool: dy spread over each batch element
		pl.eachBatch(threads, func(b int) {
			vec.Fill(dx[b*pl.inSize:(b+1)*pl.inSize], dy[b]+0) // +0: the bits of 0 + dy
		})
		return
	}
	if pl.rowsOut == 0 {
		clear(dx)
	}
	pl.eachRow(threads, true, func(b, rr, yoff int) {
		yr := dy[yoff : yoff+pl.lastOut]
		xb := dx[b*pl.inSize : (b+1)*pl.inSize]
		if rr == 0 { // the goroutine adding into a batch element's block clears it
			clear(xb)
		}
		for _, sr := range pl.srcRows(rr) {
			xr := xb[sr.xoff:]
			if pl.uniform {
				for j := range pl.lastU {
					m := &pl.lastU[j]
					for t := m.ta; t < m.tb; t++ {
						xr[t*pl.ls+m.off] += yr[t]
					}
				}
				continue
			}
			for t, se := range pl.lastA {
				seg := xr[se[0]:se[1]]
				vec.AddVS(seg, seg, yr[t])
			}
		}
	})
}

// Counts returns, for each window of one batch element, how many input
// elements it reads (the divisor of a mean that leaves padding out), and
// lead, the number of leading dimensions that form the batch (those whose
// windows are single elements at stride 1 without padding): counts has
// the shape of the output's dimensions after the first lead.
func Counts(w *Window) (counts []float32, lead int) {
	pl := w.plan("Counts", -1, -1)
	r := len(pl.out)
	per := make([][]float32, r)
	for d := range per {
		per[d] = make([]float32, pl.out[d])
		for t := range per[d] {
			for _, i := range pl.tab[d][t*pl.k[d] : (t+1)*pl.k[d]] {
				if i >= 0 {
					per[d][t]++
				}
			}
		}
	}
	counts = make([]float32, pl.outSize)
	pos := make([]int, r)
	for o := range counts {
		c, rr := float32(1), o
		for d := r - 1; d >= 0; d-- {
			pos[d] = rr % pl.out[d]
			rr /= pl.out[d]
			c *= per[d][pos[d]]
		}
		counts[o] = c
	}
	return counts, pl.lead
}
