package conv

import "github.com/gonox/gonox/tensor/internal/gemm"

// colBudget is the size, in floats, of a column tile: the tile a goroutine
// gathers and multiplies while it is still in L2.
var colBudget = 64 << 10

// minTile is the fewest output positions of a column tile (when there are
// that many): narrower tiles make short gemm rows.
const minTile = 128

// tiling is how one group's product is cut: tiles of tw output positions
// and chunks of cc input channels (cc·kSize gemm depth).
type tiling struct {
	tw, cc int
	tiles  int // ⌈outSize/tw⌉
}

func (g *geom) tiling() tiling {
	rows := g.cg * g.kSize
	tw, cc := g.outSize, g.cg
	if rows*tw > colBudget {
		tw = colBudget / max(rows, 1) / 32 * 32
		if tw < minTile {
			tw = min(g.outSize, minTile)
			cc = max(1, colBudget/(g.kSize*tw))
		}
	}
	tw = max(tw, 1)
	return tiling{tw: tw, cc: cc, tiles: (g.outSize + tw - 1) / tw}
}

// method names an algorithm; forceMethod, if set, overrides the choice
// (tests and benchmarks).
type method int

const (
	methodAuto method = iota
	methodIm2col
	methodDirect // the direct form in the grid layout
	methodRows   // the direct form in the rows layout wherever it applies
	// methodWinograd: the Winograd form wherever it applies (as auto
	// does), the direct form elsewhere.
	methodWinograd
)

var forceMethod method

// useDirect reports whether to compute a pass in direct form, given the
// function returning its shifted plan.
func (g *geom) useDirect(plan func() *shiftPlan) bool {
	if active.igemm == nil || !g.shiftApplies() || plan() == nil {
		return false
	}
	if g.ident() && forceMethod != methodDirect && forceMethod != methodRows {
		return false // a plain product on x as stored
	}
	return forceMethod != methodIm2col
}

// split returns how many goroutines take work items (items ≥ t: t, each
// calling gemm on one thread) and the thread budget of each gemm call
// (fewer items than threads: one goroutine, gemm splits).
func split(items, t int) (workers, gemmThreads int) {
	if items >= t {
		return t, 1
	}
	return 1, t
}

// flops returns 2·N·O·outSize·cg·kSize, a convolution's multiply-adds ×2.
func (g *geom) flops() float64 {
	return 2 * float64(g.n) * float64(g.o) * float64(g.outSize) * float64(g.cg) * float64(g.kSize)
}

// Forward computes y = conv(x, w) as Params describes, overwriting y
// (every element). threads bounds the goroutines it computes on, as for
// gemm.Sgemm: 1 is the calling goroutine, 0 or less GOMAXPROCS.
func Forward(p *Params, y, x, w []float32, threads int) {
	g := mustGeom("Forward", p, len(x), len(w), len(y))
	if len(y) == 0 {
		return
	}
	if g.cg == 0 {
		clear(y)
		return
	}
	t := threadCount(threads, g.flops())
	if g.useDirect(g.forwardShift) {
		g.forwardDirect(y, x, w, t)
		return
	}
	pl := newColPlan(g)
	tl := g.tiling()
	items := g.n * g.groups * tl.tiles
	workers, gt := split(items, t)
	parallel(items, workers, func(i int, ws *workspace) {
		n, gi, tile := i/(g.groups*tl.tiles), i/tl.tiles%g.groups, i%tl.tiles
		t0 := tile * tl.tw
		t1 := min(t0+tl.tw, g.outSize)
		xg := x[(n*g.c+gi*g.cg)*g.inSize:]
		wg := w[gi*g.og*g.cg*g.kSize:]
		yg := y[(n*g.o+gi*g.og)*g.outSize+t0:]
		for c0 := 0; c0 < g.cg; c0 += tl.cc {
			cc := min(tl.cc, g.cg-c0)
			var beta float32
			if c0 > 0 {
				beta = 1
			}
			b, ldb := pl.colTile(ws, xg[c0*g.inSize:], cc, t0, t1)
			gemm.Sgemm(false, false, g.og, t1-t0, cc*g.kSize, 1, wg[c0*g.kSize:], g.cg*g.kSize,
				b, ldb, beta, yg, g.outSize, gt)
		}
	})
}

// colTile returns the column tile of channels [0, nch) of x for output
// positions [t0, t1) and its row stride: x itself when the convolution
// reads it unchanged (a 1×1 kernel without stride or padding), otherwise
// gathered into ws.
func (pl *colPlan) colTile(ws *workspace, x []float32, nch, t0, t1 int) ([]float32, int) {
	if pl.ident {
		return x[t0:], pl.g.inSize
	}
	tw := t1 - t0
	col := buf(&ws.col, nch*pl.g.kSize*tw)
	pl.gather(col, tw, x, nch, t0, t1)
	return col, tw
}

// BackwardInput computes the gradient of Forward with respect to its
// input, dx = convᵀ(dy, w), overwriting dx: the transposed convolution
// (ConvTranspose's forward pass). Its operands are those of Forward with
// x and y replaced by dx and dy.
func BackwardInput(p *Params, dx, dy, w []float32, threads int) {
	g := mustGeom("BackwardInput", p, len(dx), len(w), len(dy))
	if len(dx) == 0 {
		return
	}
	if g.og == 0 || g.outSize == 0 {
		clear(dx)
		return
	}
	if g.useDirect(g.backwardShift) {
		g.backwardInputDirect(dx, dy, w, threadCount(threads, g.flops()))
		return
	}
	items := g.n * g.groups // each writes its own block of dx
	workers, gt := split(items, threadCount(threads, g.flops()))
	pl := newColPlan(g)
	tl := g.tiling()
	parallel(items, workers, func(i int, ws *workspace) {
		n, gi := i/g.groups, i%g.groups
		dxg := dx[(n*g.c+gi*g.cg)*g.inSize : (n*g.c+(gi+1)*g.cg)*g.inSize]
		wg := w[gi*g.og*g.cg*g.kSize:]
		dyg := dy[(n*g.o+gi*g.og)*g.outSize:]
		if pl.ident {
			gemm.Sgemm(true, false, g.cg, g.outSize, g.og, 1, wg, g.cg, dyg, g.outSize, 0, dxg, g.inSize, gt)
			return
		}
		clear(dxg)
		for t0 := 0; t0 < g.outSize; t0 += tl.tw {
			t1 := min(t0+tl.tw, g.outSize)
			tw := t1 - t0
			for c0 := 0; c0 < g.cg; c0 += tl.cc {
				cc := min(tl.cc, g.cg-c0)
				col := buf(&ws.col, cc*g.kSize*tw)
				gemm.Sgemm(true, false, cc*g.kSize, tw, g.og, 1, wg[c0*g.kSize:], g.cg*g.kSize,
					dyg[t0:], g.outSize, 0, col, tw, gt)
				pl.scatter(dxg[c0*g.inSize:], col, tw, cc, t0, t1)
			}
		}
	})
}

// maxChunks bounds the partial sums BackwardKernel keeps (one per chunk of
// the batch), and chunkFloats their total size.
const (
	maxChunks   = 16
	chunkFloats = 8 << 20
)

// BackwardKernel computes the gradient of Forward with respect to its
// kernel, dw = Σ_n dy_n ⋆ x_n, overwriting dw.
//
// The sum over the batch and the output positions is cut into a number of
// chunks that depends on the problem only, each accumulated in a buffer
// of its own, and the chunks are added in order: the result has the same
// bits whatever the thread budget.
func BackwardKernel(p *Params, dw, x, dy []float32, threads int) {
	g := mustGeom("BackwardKernel", p, len(x), len(dw), len(dy))
	if len(dw) == 0 {
		return
	}
	tl := g.tiling()
	units := g.n * tl.tiles // (sample, tile) pairs, in order
	if units == 0 || g.outSize == 0 {
		clear(dw)
		return
	}
	if g.useDirect(g.forwardShift) {
		if !g.backwardKernelWinograd(dw, x, dy, threadCount(threads, g.flops())) {
			g.backwardKernelDirect(dw, x, dy, threadCount(threads, g.flops()))
		}
		return
	}
	pl := newColPlan(g)
	wsize := len(dw)
	nchunk := min(units, maxChunks, max(1, chunkFloats/wsize))
	rows := g.cg * g.kSize // rows of one group's dwᵀ
	pws := wsPool.Get().(*workspace)
	defer wsPool.Put(pws)
	part := buf(&pws.part, nchunk*wsize)
	items := nchunk * g.groups
	workers, gt := split(items, threadCount(threads, g.flops()))
	parallel(items, workers, func(i int, ws *workspace) {
		ch, gi := i/g.groups, i%g.groups
		u0, u1 := ch*units/nchunk, (ch+1)*units/nchunk
		pt := part[ch*wsize+gi*rows*g.og : ch*wsize+(gi+1)*rows*g.og] // dwᵀ of group gi
		for u := u0; u < u1; u++ {
			n, tile := u/tl.tiles, u%tl.tiles
			t0 := tile * tl.tw
			t1 := min(t0+tl.tw, g.outSize)
			xg := x[(n*g.c+gi*g.cg)*g.inSize:]
			dyg := dy[(n*g.o+gi*g.og)*g.outSize+t0:]
			var beta float32
			if u > u0 {
				beta = 1
			}
			for c0 := 0; c0 < g.cg; c0 += tl.cc {
				cc := min(tl.cc, g.cg-c0)
				a, lda := pl.colTile(ws, xg[c0*g.inSize:], cc, t0, t1)
				gemm.Sgemm(false, true, cc*g.kSize, g.og, t1-t0, 1, a, lda, dyg, g.outSize,
					beta, pt[c0*g.kSize*g.og:], g.og, gt)
			}
		}
	})
	// dw[gi][o][r] = Σ_chunk part[chunk][gi][r][o], chunks in order.
	for gi := 0; gi < g.groups; gi++ {
		off := gi * rows * g.og
		for o := 0; o < g.og; o++ {
			d := dw[off+o*rows : off+(o+1)*rows]
			for r := range d {
				s := part[off+r*g.og+o]
				for ch := 1; ch < nchunk; ch++ {
					s += part[ch*wsize+off+r*g.og+o]
				}
				d[r] = s
			}
		}
	}
}
