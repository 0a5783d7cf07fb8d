package conv

// im2col and col2im without the full matrix: a column tile holds, for a
// range [t0, t1) of flattened output positions and a range of input
// channels, one row per (channel, tap) pair, row r = c·kSize + k:
//
//	col[r][t-t0] = x[c, i(t, k)]   (0 where the tap reads padding or a hole)
//
// gather builds such a tile from the input (im2col), scatter adds a tile
// back into an input-shaped buffer (col2im, its transpose). The index maps
// are tabulated once per call in a colPlan: for the two outer spatial
// dimensions a table per tap, for the innermost one an affine rule per tap
// (a contiguous copy at stride 1), so the inner loops are copies and
// strided loads.

// rowMap says which input element output position j of a row reads
// through one tap of the innermost dimension: x[j·s + off] for j in
// [ta, tb), padding elsewhere; with input dilation, tab[j] (-1: padding).
type rowMap struct {
	ta, tb, s, off int
	tab            []int32
}

// colPlan holds the index maps of one convolution.
type colPlan struct {
	g     *geom
	outer [2][]int32 // outer[d][k*out+t]: input index of dims 0 and 1, or -1
	inner []rowMap   // per tap of dim 2
	ident bool       // one tap that reads x itself: col = x
}

// floorDiv returns ⌊a/b⌋ for b > 0.
func floorDiv(a, b int) int {
	q := a / b
	if a%b != 0 && a < 0 {
		q--
	}
	return q
}

func newColPlan(g *geom) *colPlan {
	pl := &colPlan{g: g}
	for d := 0; d < 2; d++ {
		e := &g.d[d]
		tab := make([]int32, e.k*e.out)
		for k := 0; k < e.k; k++ {
			for t := 0; t < e.out; t++ {
				tab[k*e.out+t] = int32(e.srcIndex(t, k))
			}
		}
		pl.outer[d] = tab
	}
	e := &g.d[2]
	pl.inner = make([]rowMap, e.k)
	for k := range pl.inner {
		m := &pl.inner[k]
		if e.dl != 1 {
			m.tab = make([]int32, e.out)
			for t := range m.tab {
				m.tab[t] = int32(e.srcIndex(t, k))
			}
			continue
		}
		// x index j·s + off with off = k·dr - lo, inside [0, in).
		m.s, m.off = e.s, k*e.dr-e.lo
		m.ta = min(max(0, floorDiv(-m.off+e.s-1, e.s)), e.out)
		m.tb = min(max(m.ta, floorDiv(e.in-1-m.off, e.s)+1), e.out)
	}
	pl.ident = g.ident()
	return pl
}

// ident reports whether the convolution reads its input unchanged: one
// tap, no stride, padding or dilation, so the column matrix is x itself.
func (g *geom) ident() bool {
	if g.kSize != 1 {
		return false
	}
	for _, e := range g.d {
		if e.s != 1 || e.lo != 0 || e.dl != 1 || e.out != e.in {
			return false
		}
	}
	return true
}

// gather fills the column tile col (row stride ld) for output positions
// [t0, t1) and input channels [0, nch) of x, which holds those channels'
// planes back to back (inSize elements each). Rows are ch·kSize + k.
func (pl *colPlan) gather(col []float32, ld int, x []float32, nch, t0, t1 int) {
	g := pl.g
	w := g.d[2].out
	k0n, k1n, k2n := g.d[0].k, g.d[1].k, g.d[2].k
	out0, out1 := g.d[0].out, g.d[1].out
	in1, in2 := g.d[1].in, g.d[2].in
	rowFirst, rowLast := t0/w, (t1-1)/w
	for ch := 0; ch < nch; ch++ {
		xs := x[ch*g.inSize : (ch+1)*g.inSize]
		r := ch * g.kSize
		for k0 := 0; k0 < k0n; k0++ {
			tab0 := pl.outer[0][k0*out0 : (k0+1)*out0]
			for k1 := 0; k1 < k1n; k1++ {
				tab1 := pl.outer[1][k1*out1 : (k1+1)*out1]
				for k2 := 0; k2 < k2n; k2++ {
					m := &pl.inner[k2]
					dst := col[r*ld : r*ld+t1-t0]
					r++
					for row := rowFirst; row <= rowLast; row++ {
						base := row * w
						j0, j1 := max(t0, base)-base, min(t1, base+w)-base
						seg := dst[base+j0-t0 : base+j1-t0]
						i0, i1 := tab0[row/out1], tab1[row%out1]
						if i0 < 0 || i1 < 0 {
							clear(seg)
							continue
						}
						src := xs[(int(i0)*in1+int(i1))*in2 : (int(i0)*in1+int(i1)+1)*in2]
						m.gatherRow(seg, src, j0, j1)
					}
				}
			}
		}
	}
}

// gatherRow sets seg[j-j0] to what output position j in [j0, j1) of a row
// reads from the input row src.
func (m *rowMap) gatherRow(seg, src []float32, j0, j1 int) {
	if m.tab != nil {
		for j := j0; j < j1; j++ {
			if i := m.tab[j]; i >= 0 {
				seg[j-j0] = src[i]
			} else {
				seg[j-j0] = 0
			}
		}
		return
	}
	a, b := min(max(m.ta, j0), j1), min(max(m.tb, j0), j1)
	clear(seg[:a-j0])
	if a < b {
		if m.s == 1 {
			copy(seg[a-j0:b-j0], src[a+m.off:b+m.off])
		} else {
			d := seg[a-j0 : b-j0]
			s := src[a*m.s+m.off:]
			for j := range d {
				d[j] = s[j*m.s]
			}
		}
	}
	clear(seg[b-j0:])
}

// scatter adds the column tile col (row stride ld) of output positions
// [t0, t1) into x, input channels [0, nch): the transpose of gather.
func (pl *colPlan) scatter(x []float32, col []float32, ld int, nch, t0, t1 int) {
	g := pl.g
	w := g.d[2].out
	k0n, k1n, k2n := g.d[0].k, g.d[1].k, g.d[2].k
	out0, out1 := g.d[0].out, g.d[1].out
	in1, in2 := g.d[1].in, g.d[2].in
	rowFirst, rowLast := t0/w, (t1-1)/w
	for ch := 0; ch < nch; ch++ {
		xs := x[ch*g.inSize : (ch+1)*g.inSize]
		r := ch * g.kSize
		for k0 := 0; k0 < k0n; k0++ {
			tab0 := pl.outer[0][k0*out0 : (k0+1)*out0]
			for k1 := 0; k1 < k1n; k1++ {
				tab1 := pl.outer[1][k1*out1 : (k1+1)*out1]
				for k2 := 0; k2 < k2n; k2++ {
					m := &pl.inner[k2]
					src := col[r*ld : r*ld+t1-t0]
					r++
					for row := rowFirst; row <= rowLast; row++ {
						base := row * w
						j0, j1 := max(t0, base)-base, min(t1, base+w)-base
						i0, i1 := tab0[row/out1], tab1[row%out1]
						if i0 < 0 || i1 < 0 {
							continue
						}
						dst := xs[(int(i0)*in1+int(i1))*in2 : (int(i0)*in1+int(i1)+1)*in2]
						m.scatterRow(dst, src[base+j0-t0:base+j1-t0], j0, j1)
					}
				}
			}
		}
	}
}

// scatterRow adds seg[j-j0], for output positions j in [j0, j1) of a row,
// to the input element of row dst each one reads.
func (m *rowMap) scatterRow(dst, seg []float32, j0, j1 int) {
	if m.tab != nil {
		for j := j0; j < j1; j++ {
			if i := m.tab[j]; i >= 0 {
				dst[i] += seg[j-j0]
			}
		}
		return
	}
	a, b := min(max(m.ta, j0), j1), min(max(m.tb, j0), j1)
	if a >= b {
		return
	}
	s := seg[a-j0 : b-j0]
	if m.s == 1 {
		d := dst[a+m.off : b+m.off]
		d = d[:len(s)]
		for j, v := range s {
			d[j] += v
		}
		return
	}
	d := dst[a*m.s+m.off:]
	for j, v := range s {
		d[j*m.s] += v
	}
}
