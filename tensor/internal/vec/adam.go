package vec

import "math"

// AdamCoeffs are the scalars of one Adam step (tensor.AdamCoeffs). The
// assembly reads the fields by offset: keep their order.
type AdamCoeffs struct {
	B1, B2, G1, G2, A, B, C2, Eps, EpsRoot, WD, Post float32
}

// Adam computes one Adam step over slices of equal length: the new moments
//
//	m2 = B1·m + G1·g
//	v2 = B2·v + G2·g²
//
// and the update u = Post·((A·m2 + B·g)/(sqrt(C2·v2 + EpsRoot) + Eps) + WD·p),
// without the WD term when p is nil. Every product is rounded on its own,
// in this order, on both paths, so the results are the same bits with and
// without assembly.
func Adam(u, m2, v2, g, m, v, p []float32, c *AdamCoeffs) {
	n := len(g)
	u, m2, v2, m, v = u[:n], m2[:n], v2[:n], m[:n], v[:n]
	k := 0
	if useAVX2 {
		k = n &^ 7
		var pk []float32
		if p != nil {
			pk = p[:k]
		}
		adamAVX2(u[:k], m2[:k], v2[:k], g[:k], m[:k], v[:k], pk, c)
	}
	for i := k; i < n; i++ {
		gi := g[i]
		mi := float32(c.B1*m[i]) + float32(c.G1*gi)
		vi := float32(c.B2*v[i]) + float32(c.G2*float32(gi*gi))
		m2[i], v2[i] = mi, vi
		den := float32(math.Sqrt(float64(float32(vi*c.C2)+c.EpsRoot))) + c.Eps
		ui := (float32(c.A*mi) + float32(c.B*gi)) / den
		if p != nil {
			ui += float32(c.WD * p[i])
		}
		u[i] = float32(c.Post * ui)
	}
}

// adamChunk is how many elements AdamStep updates at a time: the update of
// one chunk (4 KiB) stays in L1 between its computation and its addition to
// the parameter.
const adamChunk = 1024

// AdamStep is Adam followed by the update's addition to the parameter, in
// one pass over memory: p2 = p + u with u and the new moments m2, v2 as in
// Adam. The weight-decay term reads p only when c.WD != 0. Any of p2, m2,
// v2 may be the same slice as p, m, v respectively (an update in place).
// The results are the same bits as Adam then AddVV.
func AdamStep(p2, m2, v2, p, g, m, v []float32, c *AdamCoeffs) {
	n := len(g)
	p2, m2, v2, p, m, v = p2[:n], m2[:n], v2[:n], p[:n], m[:n], v[:n]
	k := 0
	if useAVX512 {
		// One pass, the update added as it is computed.
		k = n &^ 15
		wd := 0
		if c.WD != 0 {
			wd = 1
		}
		adamStepAVX512(p2[:k], m2[:k], v2[:k], p[:k], g[:k], m[:k], v[:k], c, wd)
	}
	var buf [adamChunk]float32
	for lo := k; lo < n; lo += adamChunk {
		hi := min(lo+adamChunk, n)
		u := buf[:hi-lo]
		var pw []float32
		if c.WD != 0 {
			pw = p[lo:hi]
		}
		Adam(u, m2[lo:hi], v2[lo:hi], g[lo:hi], m[lo:hi], v[lo:hi], pw, c)
		AddVV(p2[lo:hi], p[lo:hi], u)
	}
}

// SGDStep is one step of SGD in one pass: without a trace (t == nil)
//
//	p2 = p + s·g
//
// and with momentum mu
//
//	t2 = g + mu·t
//	p2 = p + s·t2              (p + s·(g + mu·t2) with nesterov)
//
// where s is the negated learning rate. Every product is rounded on its
// own (no fused multiply-add), so the results are the bits of the same
// steps done as separate elementwise passes. p2 may be p and t2 may be t.
func SGDStep(p2, t2, p, g, t []float32, mu, s float32, nesterov bool) {
	n := len(g)
	p2, p = p2[:n], p[:n]
	if t == nil {
		for i, gi := range g {
			p2[i] = p[i] + float32(gi*s)
		}
		return
	}
	t2, t = t2[:n], t[:n]
	for i, gi := range g {
		nt := gi + float32(t[i]*mu)
		u := nt
		if nesterov {
			u = gi + float32(nt*mu)
		}
		t2[i] = nt
		p2[i] = p[i] + float32(u*s)
	}
}
