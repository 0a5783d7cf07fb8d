package conv

import "github.com/gonox/gonox/tensor/internal/vec"

// The direct (implicit im2col) form of a stride-1 convolution: the
// shifted products of shift.go computed by the micro-kernels of
// gen_kernels.go, whose rows of B are addressed through a table of
// offsets into the padded input, so the depth of one product is the whole
// C·kSize and no column matrix is ever written.

// shiftDirect is one pass (forward or input gradient) in direct form,
// in one of two layouts:
//
//   - grid: tiles of the kernel's width walk the grid q ∈ [0, Q) (see
//     shift.go) into a buffer, and compact copies the real positions out
//     (the grid's padding columns computed and dropped);
//   - rows: each output row (the innermost dimension, when it is at least
//     a tile wide) is cut into tiles that the kernel writes in place in
//     the destination, the last tile of a row overlapping the one before,
//     as the last tile of output channels does: no buffer, no copy, no
//     padding columns computed.
type shiftDirect struct {
	g          *geom
	sp         *shiftPlan
	k          *igemmKernel
	rows, cols int       // output and input channels per group
	depth      int       // cols·kSize
	mtiles     int       // ⌈rows/mr⌉
	panels     []float32 // [group][mtile][depth][mr], zero rows past rows (grid)
	offs       []int     // byte offset of B row (c, k): (c·psize + off(k))·4
	offMax     int       // largest tap offset, in floats
	byRows     bool      // the rows layout
	qpad       int       // grid: the grid rounded up to whole tiles
	qblock     int       // grid: columns of one work item, whole tiles; rows: output rows
	blocks     int       // work items per sample and group
}

// newShiftDirect prepares a pass computing rows output channels from cols
// input channels per group with the row-major weights wr (per group
// rows×cols·kSize, columns c·kSize+k), over items work items split on t
// goroutines.
func newShiftDirect(g *geom, sp *shiftPlan, wr []float32, rows, cols, t int) *shiftDirect {
	d := &shiftDirect{g: g, sp: sp, rows: rows, cols: cols}
	ks := len(sp.offs)
	d.depth = cols * ks
	d.k = active.pickIgemm(rows, sp.q)
	if kr := active.pickIgemmRows(rows, sp.od); kr != nil &&
		(forceMethod == methodRows || (forceMethod == methodAuto || forceMethod == methodWinograd) && kr.rowCost(rows, sp.od) <= d.k.gridCost(rows, sp.q)) {
		d.k, d.byRows = kr, true
	}
	d.packPanels(wr)
	d.offs = make([]int, d.depth)
	for c := 0; c < cols; c++ {
		for k, off := range sp.offs {
			d.offs[c*ks+k] = 4 * (c*sp.psize + off)
			d.offMax = max(d.offMax, off)
		}
	}
	per := g.n * g.groups
	if d.byRows {
		nrows := sp.od[0] * sp.od[1]
		d.qblock = nrows
		if per < t { // too few samples for the threads: cut each into t/per blocks
			d.qblock = ceilDiv(nrows, ceilDiv(t, per))
		}
		d.blocks = ceilDiv(nrows, d.qblock)
		return d
	}
	tc := d.k.cols()
	d.qpad = ceilDiv(sp.q, tc) * tc
	d.qblock = max(tc, colBudget/(d.mtiles*d.k.mr)/tc*tc)
	if per < t {
		d.qblock = min(d.qblock, ceilDiv(ceilDiv(d.qpad, ceilDiv(t, per)), tc)*tc)
	}
	d.qblock = min(d.qblock, d.qpad)
	d.blocks = ceilDiv(d.qpad, d.qblock)
	return d
}

// packPanels packs the weights wr into the kernel's A panels: per group
// and tile of mr output channels, depth steps of mr floats. Grid tiles
// past rows hold zeros; in the rows layout the last tile starts at
// rows-mr (overlapping the one before).
func (d *shiftDirect) packPanels(wr []float32) {
	mr := d.k.mr
	d.mtiles = ceilDiv(d.rows, mr)
	d.panels = make([]float32, d.g.groups*d.mtiles*d.depth*mr)
	for gi := 0; gi < d.g.groups; gi++ {
		wg := wr[gi*d.rows*d.depth:]
		for m := 0; m < d.mtiles; m++ {
			pan := d.panels[(gi*d.mtiles+m)*d.depth*mr:]
			r0 := d.tileRow(m)
			for i := 0; i < mr && r0+i < d.rows; i++ {
				row := wg[(r0+i)*d.depth : (r0+i+1)*d.depth]
				for p, v := range row {
					pan[p*mr+i] = v
				}
			}
		}
	}
}

// tileRow returns the first output channel of tile m.
func (d *shiftDirect) tileRow(m int) int {
	if d.byRows {
		return min(m*d.k.mr, d.rows-d.k.mr)
	}
	return m * d.k.mr
}

// run computes block b for one sample and group: dst and src hold that
// sample's group of output and input planes.
func (d *shiftDirect) run(dst, src []float32, gi, b int, ws *workspace) {
	if d.byRows {
		d.runRows(dst, src, gi, b, ws)
		return
	}
	sp := d.sp
	q0 := b * d.qblock
	q1 := min(q0+d.qblock, d.qpad)
	p := d.fill(ws, src, d.qpad-sp.q+16, q0, q1)
	mr, tc := d.k.mr, d.k.cols()
	ld := q1 - q0
	yt := buf(&ws.col, d.mtiles*mr*ld)
	pan := d.panels[gi*d.mtiles*d.depth*mr:]
	for q := q0; q < q1; q += tc {
		for m := 0; m < d.mtiles; m++ {
			d.k.fn(d.depth, &pan[m*d.depth*mr], &p[q], &d.offs[0], &yt[m*mr*ld+q-q0], ld, 0)
		}
	}
	sp.compact(dst, yt, ld, d.rows, q0, min(q1, sp.q))
}

// fill returns the padded input planes of src whose rows the grid
// positions [q0, q1) read, with slack zeros after them.
func (d *shiftDirect) fill(ws *workspace, src []float32, slack, q0, q1 int) []float32 {
	sp := d.sp
	pd2 := sp.pd[2]
	r0, r1 := q0/pd2, min(sp.pd[0]*sp.pd[1], ceilDiv(q1+d.offMax, pd2))
	return sp.fill(ws, d.cols, slack, r0, r1, func(p []float32, r0, r1 int, interior bool) {
		sp.padRows(p, src, d.cols, r0, r1, interior)
	})
}

// runRows is run in the rows layout: block b holds output rows
// [b·qblock, (b+1)·qblock) of every output channel.
func (d *shiftDirect) runRows(dst, src []float32, gi, b int, ws *workspace) {
	sp := d.sp
	o1, o2 := sp.od[1], sp.od[2]
	r0 := b * d.qblock
	r1 := min(r0+d.qblock, sp.od[0]*o1)
	grid := func(r int) int { return ((r/o1)*sp.pd[1] + r%o1) * sp.pd[2] } // q of row r's first position
	p := d.fill(ws, src, 16, grid(r0), grid(r1-1)+o2)
	mr, tc := d.k.mr, d.k.cols()
	pan := d.panels[gi*d.mtiles*d.depth*mr:]
	for r := r0; r < r1; r++ {
		q := grid(r)
		for m := 0; m < d.mtiles; m++ {
			y := dst[d.tileRow(m)*sp.osize+r*o2:]
			for j := 0; j < o2; j += tc {
				j = min(j, o2-tc)
				d.k.fn(d.depth, &pan[m*d.depth*mr], &p[q+j], &d.offs[0], &y[j], sp.osize, 0)
			}
		}
	}
}

// fill returns ws.aux holding nplanes padded planes (and slack zeros
// after them) whose rows [r0, r1) copy's calls have filled: copy fills
// rows [r0, r1) of every plane, and only their interior (the source's
// elements) when interior is set, because the padding around them is
// known to be zero from a previous fill of the same grid.
func (sp *shiftPlan) fill(ws *workspace, nplanes, slack, r0, r1 int, copy func(p []float32, r0, r1 int, interior bool)) []float32 {
	n := nplanes*sp.psize + slack
	ready := ws.padPlan == sp && ws.padPlanes >= nplanes && len(ws.aux) >= n
	if !ready {
		ws.padPlan = nil
	}
	p := buf(&ws.aux, max(n, len(ws.aux)))
	copy(p, r0, r1, ready)
	if !ready {
		clear(p[nplanes*sp.psize : n])
		if r0 == 0 && r1 == sp.pd[0]*sp.pd[1] {
			ws.padPlan, ws.padPlanes = sp, nplanes
		}
	}
	return p
}

// padRows is pad restricted to the padded rows [r0, r1) of each plane
// (rows of pd[2] elements, numbered over the first two dimensions); with
// interior, the padding is known to be zero already and only the
// source's elements are copied. The rows' coordinates are stepped, not
// divided out, and the padding is cleared with one call per plane: most
// rows are short (32 floats for a 32×32 image), so the per-row work is
// what this costs beyond the copy.
func (sp *shiftPlan) padRows(p, src []float32, nch, r0, r1 int, interior bool) {
	pd1, pd2 := sp.pd[1], sp.pd[2]
	s1, s2 := sp.sd[1], sp.sd[2]
	a := sp.lo[2]
	for c := 0; c < nch; c++ {
		pc := p[c*sp.psize : (c+1)*sp.psize]
		sc := src[c*sp.ssize : (c+1)*sp.ssize]
		if !interior {
			clear(pc[r0*pd2 : r1*pd2])
		}
		t0, t1 := r0/pd1, r0%pd1 // the padded row's coordinates
		for r := r0; r < r1; r++ {
			i0, i1 := t0-sp.lo[0], t1-sp.lo[1]
			if i0 >= 0 && i0 < sp.sd[0] && i1 >= 0 && i1 < s1 {
				o := (i0*s1 + i1) * s2
				copy(pc[r*pd2+a:r*pd2+a+s2], sc[o:o+s2])
			}
			if t1++; t1 == pd1 {
				t0, t1 = t0+1, 0
			}
		}
	}
}

// forwardDirect computes Forward in direct form; t is the thread budget.
func (g *geom) forwardDirect(y, x, w []float32, t int) {
	sp := g.forwardShift()
	if wp := active.winograd(g, sp, w, g.og, g.cg); wp != nil {
		wp.runAll(y, x, g.n, g.o*g.outSize, g.c*g.inSize, t)
		return
	}
	d := newShiftDirect(g, sp, w, g.og, g.cg, t)
	items := g.n * g.groups * d.blocks
	parallel(items, t, func(i int, ws *workspace) {
		b := i % d.blocks
		n, gi := i/d.blocks/g.groups, i/d.blocks%g.groups
		d.run(y[(n*g.o+gi*g.og)*g.outSize:], x[(n*g.c+gi*g.cg)*g.inSize:], gi, b, ws)
	})
}

// backwardInputDirect computes BackwardInput in direct form.
func (g *geom) backwardInputDirect(dx, dy, w []float32, t int) {
	wr := make([]float32, len(w))
	g.flipped(wr, w)
	sp := g.backwardShift()
	if wp := active.winograd(g, sp, wr, g.cg, g.og); wp != nil {
		wp.runAll(dx, dy, g.n, g.c*g.inSize, g.o*g.outSize, t)
		return
	}
	d := newShiftDirect(g, sp, wr, g.cg, g.og, t)
	items := g.n * g.groups * d.blocks
	parallel(items, t, func(i int, ws *workspace) {
		b := i % d.blocks
		n, gi := i/d.blocks/g.groups, i/d.blocks%g.groups
		d.run(dx[(n*g.c+gi*g.cg)*g.inSize:], dy[(n*g.o+gi*g.og)*g.outSize:], gi, b, ws)
	})
}

// dotBudget bounds, in floats, the padded inputs of the samples one dot
// kernel call walks through. Each call reduces its accumulators' lanes
// once at its end, so longer calls spread that over more products: 160 K
// floats (640 KB, within Zen 5's 1 MB L2) lets a call take two samples of
// 64 padded 34×34 planes (the ResNet block's kernel gradients, ~4% faster
// than one sample a call; 64 K before).
const dotBudget = 160 << 10

// backwardKernelDirect computes BackwardKernel with the dot kernels: for
// each output channel o and (input channel, tap) pair j, the dot product
// of dy's plane o with the padded input shifted by the tap, along every
// output row, summed over the samples.
func (g *geom) backwardKernelDirect(dw, x, dy []float32, t int) {
	sp := g.forwardShift()
	ks := g.kSize
	depth := g.cg * ks
	k := active.pickDot(g.og, depth)
	nchunk := min(g.n, maxChunks, max(1, chunkFloats/len(dw)))
	per := max(1, min(ceilDiv(g.n, nchunk), dotBudget/max(1, g.cg*sp.psize)))
	offs := make([]int, ceilDiv(depth, k.nr)*k.nr)
	for j := range offs {
		jj := min(j, depth-1) // the last tile's extra columns repeat the last one
		offs[j] = 4 * ((jj/ks)*sp.psize + sp.offs[jj%ks])
	}
	pws := wsPool.Get().(*workspace)
	defer wsPool.Put(pws)
	part := buf(&pws.part, nchunk*len(dw))
	o0, o1, o2 := g.d[0].out, g.d[1].out, g.d[2].out
	nvec, tail := o2/k.w, o2%k.w
	pd1, pd2 := sp.pd[1], sp.pd[2]
	// Whole tiles (no overlap, no columns past depth): the kernel adds
	// into the partial sums itself.
	inPlace := g.og%k.mr == 0 && depth%k.nr == 0
	items := nchunk * g.groups
	parallel(items, t, func(i int, ws *workspace) {
		ch, gi := i/g.groups, i%g.groups
		s0, s1 := ch*g.n/nchunk, (ch+1)*g.n/nchunk
		pt := part[ch*len(dw)+gi*g.og*depth : ch*len(dw)+(gi+1)*g.og*depth]
		ctile := buf(&ws.col, k.mr*k.nr)
		for sb := s0; sb < s1; sb += per {
			ns := min(per, s1-sb)
			rows := sp.pd[0] * sp.pd[1]
			p := sp.fill(ws, ns*g.cg, 16, 0, rows, func(p []float32, r0, r1 int, interior bool) {
				for s := 0; s < ns; s++ {
					sp.padRows(p[s*g.cg*sp.psize:], x[((sb+s)*g.c+gi*g.cg)*g.inSize:], g.cg, r0, r1, interior)
				}
			})
			for t0 := 0; t0 < o0; t0++ {
				a := dy[(sb*g.o+gi*g.og)*g.outSize+t0*o1*o2:]
				b := p[t0*pd1*pd2:]
				first := sb == s0 && t0 == 0
				for oa := 0; oa < g.og; oa += k.mr {
					ot := min(oa, g.og-k.mr) // the last tile overlaps the one before
					for j0 := 0; j0 < depth; j0 += k.nr {
						c, ldc, acc := &ctile[0], k.nr, 0
						if inPlace { // the kernel adds its tile into pt
							c, ldc, acc = &pt[ot*depth+j0], depth, b2i(!first)
						}
						k.fn(ns, o1, nvec, tail,
							&a[ot*g.outSize], g.outSize, 4*(o2-nvec*k.w), 4*(g.o*g.outSize-o1*o2),
							&b[0], &offs[j0], 4*(pd2-nvec*k.w), 4*(g.cg*sp.psize-o1*pd2),
							c, ldc, acc)
						if inPlace {
							continue
						}
						for o := oa; o < min(oa+k.mr, g.og); o++ {
							row := pt[o*depth+j0 : o*depth+min(j0+k.nr, depth)]
							cr := ctile[(o-ot)*k.nr:]
							if first {
								copy(row, cr[:len(row)])
								continue
							}
							for j := range row {
								row[j] += cr[j]
							}
						}
					}
				}
			}
		}
	})
	sumChunks(dw, part, nchunk)
}

// sumChunks sets dst to the sum, in order, of the nchunk partial results
// held back to back in part.
func sumChunks(dst, part []float32, nchunk int) {
	copy(dst, part[:len(dst)])
	for ch := 1; ch < nchunk; ch++ {
		vec.AddVV(dst, dst, part[ch*len(dst):(ch+1)*len(dst)])
	}
}

// b2i returns 1 for true, 0 for false.
func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}
