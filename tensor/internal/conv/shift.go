package conv

// The shifted form of a stride-1 convolution without input dilation.
// With the input copied into a zero-padded buffer P (one plane of
// P0×P1×P2 per channel), output position t reads, through tap k, the
// element of P at q(t) + off(k), where q(t) = (t0·P1 + t1)·P2 + t2 and
// off(k) = (k0·dr0·P1 + k1·dr1)·P2 + k2·dr2. So the whole output, computed
// on the grid q ∈ [0, Q) that contains every q(t), is
//
//	Y'[o, q] = Σ_{c,k} W[o, c, k] · P[c, q + off(k)]
//
// a product whose column matrix has row (c, k) = P[c, · + off(k)]: the
// padded input itself, shifted (an implicit im2col). The positions q that
// are not some q(t) (the P2-O2 columns past the end of each row, the rows
// past the end of each plane) are computed and dropped: 6% more work for
// 32×32 with padding 1.
type shiftPlan struct {
	pd    [MaxDims]int // padded source dims
	lo    [MaxDims]int // where the source starts in them
	sd    [MaxDims]int // source dims
	od    [MaxDims]int // destination (output) dims
	psize int          // Π pd
	ssize int          // Π sd
	osize int          // Π od
	q     int          // length of the grid of computed positions
	offs  []int        // per tap
}

// shiftApplies reports whether the shifted form computes g's forward pass
// (stride 1, no input dilation, no negative padding).
func (g *geom) shiftApplies() bool {
	for _, e := range g.d {
		if e.s != 1 || e.dl != 1 || e.lo < 0 || e.out == 0 || e.in == 0 {
			return false
		}
		if hi := e.out + (e.k-1)*e.dr - e.in - e.lo; hi < 0 {
			return false
		}
	}
	return true
}

// newShiftPlan returns the plan of a stride-1 convolution from a source
// of dims sd, padded by lo, to a destination of dims od, with taps k and
// kernel dilations dr.
func newShiftPlan(sd, od, lo, k, dr [MaxDims]int) *shiftPlan {
	sp := &shiftPlan{sd: sd, od: od, lo: lo, psize: 1, ssize: 1, osize: 1}
	for d := 0; d < MaxDims; d++ {
		sp.pd[d] = od[d] + (k[d]-1)*dr[d]
		sp.psize *= sp.pd[d]
		sp.ssize *= sd[d]
		sp.osize *= od[d]
	}
	sp.q = ((od[0]-1)*sp.pd[1]+od[1]-1)*sp.pd[2] + od[2]
	for k0 := 0; k0 < k[0]; k0++ {
		for k1 := 0; k1 < k[1]; k1++ {
			for k2 := 0; k2 < k[2]; k2++ {
				sp.offs = append(sp.offs, (k0*dr[0]*sp.pd[1]+k1*dr[1])*sp.pd[2]+k2*dr[2])
			}
		}
	}
	return sp
}

// forwardShift is the plan of g's forward pass.
func (g *geom) forwardShift() *shiftPlan {
	var sd, od, lo, k, dr [MaxDims]int
	for d, e := range g.d {
		sd[d], od[d], lo[d], k[d], dr[d] = e.in, e.out, e.lo, e.k, e.dr
	}
	return newShiftPlan(sd, od, lo, k, dr)
}

// backwardShift is the plan of g's input gradient: a stride-1 convolution
// of dy by the flipped kernel, padded by dk-1-lo (dk the dilated kernel
// size), or nil when that padding would be negative.
func (g *geom) backwardShift() *shiftPlan {
	var sd, od, lo, k, dr [MaxDims]int
	for d, e := range g.d {
		sd[d], od[d], k[d], dr[d] = e.out, e.in, e.k, e.dr
		lo[d] = (e.k-1)*e.dr - e.lo
		if lo[d] < 0 || lo[d]+e.out > od[d]+(e.k-1)*e.dr {
			return nil
		}
	}
	return newShiftPlan(sd, od, lo, k, dr)
}

// compact copies the computed positions [q0, q1) of the grid, held in yt
// (rows of ld), to the destination planes of dst (osize apart) that are
// real positions.
func (sp *shiftPlan) compact(dst, yt []float32, ld, rows, q0, q1 int) {
	pd1, pd2 := sp.pd[1], sp.pd[2]
	o1, o2 := sp.od[1], sp.od[2]
	for r := q0 / pd2; r*pd2 < q1; r++ {
		t0, t1 := r/pd1, r%pd1
		if t1 >= o1 {
			continue
		}
		j0, j1 := max(q0, r*pd2)-r*pd2, min(q1, r*pd2+o2)-r*pd2
		if j0 >= j1 {
			continue
		}
		for c := 0; c < rows; c++ {
			copy(dst[c*sp.osize+(t0*o1+t1)*o2+j0:], yt[c*ld+r*pd2+j0-q0:c*ld+r*pd2+j1-q0])
		}
	}
}

// flipped stores the transposed flipped kernel of each group, the weights
// of the input gradient in runCol's layout: out[gi][c][o·kSize+k] =
// w[gi][o][c][kSize-1-k].
func (g *geom) flipped(out, w []float32) {
	ks, og, cg := g.kSize, g.og, g.cg
	for gi := 0; gi < g.groups; gi++ {
		wg := w[gi*og*cg*ks:]
		dst := out[gi*og*cg*ks:]
		for c := 0; c < cg; c++ {
			for o := 0; o < og; o++ {
				for k := 0; k < ks; k++ {
					dst[(c*og+o)*ks+k] = wg[(o*cg+c)*ks+ks-1-k]
				}
			}
		}
	}
}
