package conv

import "github.com/gonox/gonox/tensor/internal/gemm"

// The Winograd form F(2×2, 3×3) of a stride-1 3×3 convolution (Lavin and
// Gray, "Fast Algorithms for Convolutional Neural Networks", 2016): each
// 2×2 tile of the output is
//
//	Y = Aᵀ·[Σ_c U[o, c] ⊙ V[c]]·A,   U = G·g·Gᵀ, V = Bᵀ·d·B
//
// with g the 3×3 kernel of (o, c) and d the tile's 4×4 input (padded),
// so the 16 elements ξ of the 4×4 transformed tiles are 16 independent
// products M[ξ] = U[ξ]·V[ξ] of depth C, 16·C multiplications a tile
// against 36·C for the direct form (2.25x fewer), at the cost of the
// transforms (adds only) and of rounding: a few units in the last place
// more than the direct sum. The products run on the direct form's 8×32
// shift kernel (rows of B at offsets c·ldv, so no packing), the
// transforms in AVX-512 assembly (winograd_amd64.s) on 16 tiles of a tile
// row at once, their columns split into even and odd lanes. Work items
// are blocks of tile rows of a sample, whose V and M stay in L2.

// winoBlockTiles is the number of tiles a block aims at: V and M of a
// block then take 2·16·64·128·4 = 1 MB for 64 channels in and out.
const winoBlockTiles = 128

// winoPass is one pass (forward or input gradient) in Winograd form.
type winoPass struct {
	sp         *shiftPlan
	set        *kernelSet
	k          *igemmKernel // the 8×32 shift kernel
	rows, cols int          // output and input channels
	panels     []float32    // [ξ][rows/8][cols][8]: U packed for k
	offs       []int        // byte offset of row c of a V block: 4·c·ldv
	ngrp       int          // groups of 16 tiles in a tile row
	ntr        int          // tile rows of a plane
	trb        int          // tile rows of a block
	ldv        int          // a block's tiles rounded up to whole kernel tiles
	blocks     int          // blocks per sample
}

// winoFits reports whether the Winograd form computes the pass of g
// whose shift plan is sp: the set has the transforms, one group, a 2-D
// 3×3 kernel without dilation, an even number of output rows, output rows
// a multiple of 32 wide; and no other method is forced.
func (s *kernelSet) winoFits(g *geom, sp *shiftPlan) bool {
	if s.winoIn == nil || sp == nil || g.groups != 1 || (forceMethod != methodAuto && forceMethod != methodWinograd) {
		return false
	}
	od, pd := sp.od, sp.pd
	if od[0] != 1 || pd[0] != 1 || len(sp.offs) != 9 || od[1]%2 != 0 || od[2]%32 != 0 {
		return false
	}
	for i, off := range sp.offs {
		if off != (i/3)*pd[2]+i%3 {
			return false
		}
	}
	return true
}

// winograd returns the pass computing rows output channels from cols
// input channels by the shift plan sp with the row-major weights wr
// (rows×cols·9, columns c·9 + k) in Winograd form, or nil where that form
// does not apply (winoFits, and output channels a multiple of 8).
func (s *kernelSet) winograd(g *geom, sp *shiftPlan, wr []float32, rows, cols int) *winoPass {
	if !s.winoFits(g, sp) || rows%8 != 0 || cols == 0 {
		return nil
	}
	od := sp.od
	var k *igemmKernel
	for i := range s.igemm {
		if s.igemm[i].mr == 8 && s.igemm[i].cols() == 32 {
			k = &s.igemm[i]
		}
	}
	if k == nil {
		return nil
	}
	wp := &winoPass{sp: sp, set: s, k: k, rows: rows, cols: cols, ngrp: od[2] / 32, ntr: od[1] / 2}
	wp.trb = max(1, winoBlockTiles/(16*wp.ngrp))
	wp.blocks = ceilDiv(wp.ntr, wp.trb)
	wp.ldv = ceilDiv(wp.trb*16*wp.ngrp, 32) * 32
	wp.offs = make([]int, cols)
	for c := range wp.offs {
		wp.offs[c] = 4 * c * wp.ldv
	}
	wp.packWeights(wr)
	return wp
}

// packWeights sets panels to U = G·g·Gᵀ of every (o, c), G = [1 0 0; ½ ½
// ½; ½ -½ ½; 0 0 1], in float32 in that order (the halvings are exact).
func (wp *winoPass) packWeights(wr []float32) {
	mt := wp.rows / 8
	wp.panels = make([]float32, 16*mt*wp.cols*8)
	for o := 0; o < wp.rows; o++ {
		for c := 0; c < wp.cols; c++ {
			g := wr[(o*wp.cols+c)*9 : (o*wp.cols+c+1)*9]
			var gg [4][3]float32 // G·g
			for j := 0; j < 3; j++ {
				g0, g1, g2 := g[j], g[3+j], g[6+j]
				gg[0][j] = g0
				gg[1][j] = ((g0 + g1) + g2) * 0.5
				gg[2][j] = ((g0 - g1) + g2) * 0.5
				gg[3][j] = g2
			}
			for i := 0; i < 4; i++ {
				h0, h1, h2 := gg[i][0], gg[i][1], gg[i][2]
				u := [4]float32{h0, ((h0 + h1) + h2) * 0.5, ((h0 - h1) + h2) * 0.5, h2}
				for j, v := range u {
					xi := 4*i + j
					wp.panels[((xi*mt+o/8)*wp.cols+c)*8+o%8] = v
				}
			}
		}
	}
}

// run computes block b (tile rows [b·trb, (b+1)·trb)) of one sample: dst
// holds its rows output planes, src its cols input planes.
func (wp *winoPass) run(dst, src []float32, b int, ws *workspace) {
	sp := wp.sp
	od2 := sp.od[2]
	tr0 := b * wp.trb
	ntr := min(wp.trb, wp.ntr-tr0)
	ldv := wp.ldv
	v := buf(&ws.col, 16*wp.cols*ldv)
	m := buf(&ws.wino, 16*wp.rows*ldv)
	winoTransformIn(wp.set, sp, ws, v, src, wp.cols, tr0, ntr, wp.ngrp, ldv, wp.cols*ldv)
	tiles := ntr * 16 * wp.ngrp
	mt := wp.rows / 8
	for xi := 0; xi < 16; xi++ {
		vx := v[xi*wp.cols*ldv:]
		for mi := 0; mi < mt; mi++ {
			pan := &wp.panels[(xi*mt+mi)*wp.cols*8]
			mx := m[(xi*wp.rows+mi*8)*ldv:]
			for t0 := 0; t0 < tiles; t0 += 32 {
				wp.k.fn(wp.cols, pan, &vx[t0], &wp.offs[0], &mx[t0], ldv, 0)
			}
		}
	}
	for o := 0; o < wp.rows; o++ {
		wp.set.winoOut(&m[o*ldv], 4*wp.rows*ldv, ntr, wp.ngrp, &dst[o*sp.osize+2*tr0*od2], od2)
	}
}

// runAll computes the pass over n samples on t goroutines: sample s's
// output planes start at dst[s·dstride], its input planes at
// src[s·sstride].
func (wp *winoPass) runAll(dst, src []float32, n, dstride, sstride, t int) {
	if n == 0 {
		return
	}
	// The assembly reads and writes without bounds checks: check the last
	// sample's planes once.
	_ = dst[(n-1)*dstride+wp.rows*wp.sp.osize-1]
	_ = src[(n-1)*sstride+wp.cols*wp.sp.ssize-1]
	parallel(n*wp.blocks, t, func(i int, ws *workspace) {
		s, b := i/wp.blocks, i%wp.blocks
		wp.run(dst[s*dstride:], src[s*sstride:], b, ws)
	})
}

// backwardKernelWinograd computes BackwardKernel in Winograd form where
// it applies (winoFits), and reports whether it did. The gradient of U =
// G·g·Gᵀ is dU[ξ][o, c] = Σ_tiles M[ξ][o, tile]·V[ξ][c, tile] with M =
// A·dY·Aᵀ (the transpose of the output transform) and V the input's
// transform, 16 products of depth the tiles (SgemmBatch, per block of
// tile rows, added into one partial sum per chunk of the batch), and dw =
// Gᵀ·dU·G. The number of chunks depends on the problem only and they are
// added in order, so the bits do not depend on the thread budget.
func (g *geom) backwardKernelWinograd(dw, x, dy []float32, t int) bool {
	sp := g.forwardShift()
	s := active
	if s.winoGrad == nil || !s.winoFits(g, sp) {
		return false
	}
	og, cg := g.og, g.cg
	od2 := sp.od[2]
	ngrp, ntr := od2/32, sp.od[1]/2
	trb := max(1, winoBlockTiles/(16*ngrp))
	blocks := ceilDiv(ntr, trb)
	ldv := trb * 16 * ngrp
	usize := 16 * og * cg
	nchunk := min(g.n, maxChunks, max(1, chunkFloats/usize))
	pws := wsPool.Get().(*workspace)
	defer wsPool.Put(pws)
	part := buf(&pws.part, nchunk*usize)
	var offM, offV, offU [16]int
	for xi := range offM {
		offM[xi], offV[xi], offU[xi] = xi*og*ldv, xi*cg*ldv, xi*og*cg
	}
	parallel(nchunk, t, func(ch int, ws *workspace) {
		du := part[ch*usize : (ch+1)*usize]
		var beta float32
		for n := ch * g.n / nchunk; n < (ch+1)*g.n/nchunk; n++ {
			xs, dys := x[n*g.c*g.inSize:(n+1)*g.c*g.inSize], dy[n*g.o*g.outSize:(n+1)*g.o*g.outSize]
			for b := 0; b < blocks; b++ {
				tr0 := b * trb
				nb := min(trb, ntr-tr0)
				v := buf(&ws.col, 16*cg*ldv)
				m := buf(&ws.wino, 16*og*ldv)
				winoTransformIn(s, sp, ws, v, xs, cg, tr0, nb, ngrp, ldv, cg*ldv)
				for o := 0; o < og; o++ {
					s.winoGrad(&dys[o*g.outSize+2*tr0*od2], od2, nb, ngrp, &m[o*ldv], 4*og*ldv)
				}
				gemm.SgemmBatch(false, true, og, cg, nb*16*ngrp, 1, m, ldv, offM[:], v, ldv, offV[:], beta, du, cg, offU[:])
				beta = 1
			}
		}
	})
	du := buf(&pws.col, usize)
	sumChunks(du, part, nchunk)
	// dw = Gᵀ·dU·G, G = [1 0 0; ½ ½ ½; ½ -½ ½; 0 0 1].
	gt := func(u0, u1, u2, u3 float32) [3]float32 {
		return [3]float32{(u0 + (u1+u2)*0.5), (u1 - u2) * 0.5, ((u1+u2)*0.5 + u3)}
	}
	for o := 0; o < og; o++ {
		for c := 0; c < cg; c++ {
			var u [4][4]float32
			for xi := range 16 {
				u[xi/4][xi%4] = du[xi*og*cg+o*cg+c]
			}
			var r [4][3]float32 // dU·G, row by row
			for i := range 4 {
				r[i] = gt(u[i][0], u[i][1], u[i][2], u[i][3])
			}
			w := dw[(o*cg+c)*9 : (o*cg+c+1)*9]
			for kw := range 3 {
				col := gt(r[0][kw], r[1][kw], r[2][kw], r[3][kw])
				for kh := range 3 {
					w[kh*3+kw] = col[kh]
				}
			}
		}
	}
	return true
}

// transformIn writes V of tile rows [tr0, tr0+ntr) of the cols planes of
// src (ssize floats apart, as sp's source) into v (planes ξ xs floats
// apart, channel c at c·ldv): from the source rows themselves when the
// padding is one row and column on each side (no copy), else from the
// padded planes fill makes.
func winoTransformIn(s *kernelSet, sp *shiftPlan, ws *workspace, v, src []float32, cols, tr0, ntr, ngrp, ldv, xs int) {
	pd2 := sp.pd[2]
	if sp.lo[1] == 1 && sp.lo[2] == 1 && sp.sd[1] == sp.od[1] && sp.sd[2] == sp.od[2] {
		w := sp.sd[2]
		zero := buf(&ws.zero, w)
		clear(zero)
		row := func(c, r int) *float32 {
			if r < 0 || r >= sp.sd[1] {
				return &zero[0]
			}
			return &src[c*sp.ssize+r*w]
		}
		_ = src[(cols-1)*sp.ssize+sp.ssize-1]
		for c := 0; c < cols; c++ {
			for tr := tr0; tr < tr0+ntr; tr++ {
				r := 2*tr - 1
				s.winoInRows(row(c, r), row(c, r+1), row(c, r+2), row(c, r+3), ngrp, &v[c*ldv+(tr-tr0)*16*ngrp], 4*xs)
			}
		}
		return
	}
	p := sp.fill(ws, cols, 16, 2*tr0, 2*(tr0+ntr)+2, func(p []float32, r0, r1 int, interior bool) {
		sp.padRows(p, src, cols, r0, r1, interior)
	})
	for c := 0; c < cols; c++ {
		s.winoIn(&p[c*sp.psize+2*tr0*pd2], pd2, ntr, ngrp, &v[c*ldv], 4*xs)
	}
}
