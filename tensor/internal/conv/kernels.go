package conv

//go:generate go run gen_kernels.go

// igemmKernel is a shift micro-kernel (see gen_kernels.go): an mr×(nv·w)
// tile of Σ_p A_panel[p][i] · B[offs[p] + j].
type igemmKernel struct {
	mr, nv, w int
	fn        func(k int, a *float32, b *float32, offs *int, c *float32, ldc int, acc int)
}

// cols is the tile's width in floats.
func (k *igemmKernel) cols() int { return k.nv * k.w }

// dotKernel is a dot-product micro-kernel (see gen_kernels.go): an mr×nr
// tile of dot products of rows of A with rows of B at offsets.
type dotKernel struct {
	mr, nr, w int
	fn        func(nsamp, rows, nvec, tail int, a *float32, lda, arow, asamp int, b *float32, offs *int, brow, bsamp int, c *float32, ldc int, acc int)
}

// kernelSet is one instruction set's micro-kernels; nil slices mean the
// set has none (the portable Go set: convolutions go through gemm).
type kernelSet struct {
	name  string
	igemm []igemmKernel
	dot   []dotKernel
	// winoIn and winoOut, if not nil, are the Winograd F(2×2, 3×3)
	// transforms of winograd.go (k512WinoIn, k512WinoOut).
	winoIn  func(p *float32, pd2, ntr, ngrp int, v *float32, vstr int)
	winoOut func(m *float32, mstr, ntr, ngrp int, y *float32, ldy int)
	// winoInRows is winoIn for one tile row read from the unpadded rows
	// (k512WinoInRows).
	winoInRows func(r0, r1, r2, r3 *float32, ngrp int, v *float32, vstr int)
	// winoGrad, if not nil, is winoOut's transpose (k512WinoGrad).
	winoGrad func(dy *float32, ldy, ntr, ngrp int, m *float32, mstr int)
	// maxStride is the max-pooling step: for t < len(ys), v = xs[t·stride];
	// where v > ys[t] or v is NaN, ys[t] = v and as[t] = pos0 + t·dpos.
	maxStride func(ys []float32, as []int32, xs []float32, stride int, pos0, dpos int32)
	// maxDense and sumDense reduce windows without padding: for t <
	// len(ys), the elements x[orig[t] + kofs[k]] in order of k; max keeps
	// the first maximum (the last NaN) in ys[t] and its position in as[t],
	// sum their sum in ys[t] (as unused). Every position must be inside x.
	maxDense, sumDense func(ys []float32, as []int32, x []float32, orig, kofs []int32)
	// maxPool2, if not nil, is the max pool of one plane by 2×2 windows
	// at stride 2 without padding: rows output rows of n, row r reading
	// x's rows 2r and 2r+1 (inW floats apart), as maxDense would.
	maxPool2 func(ys []float32, as []int32, x []float32, rows, n, inW int)
	// maxPool2Grad, if not nil, is its transpose: every element of x's
	// rows 2r and 2r+1 that a window covers gets dy at the position as
	// names, zero elsewhere (positions outside the windows untouched).
	maxPool2Grad func(dx []float32, as []int32, dy []float32, rows, n, inW int)
	// selectScatter2, if not nil, is maxPool2 then maxPool2Grad in one
	// pass without positions: g at each window's maximum of x.
	selectScatter2 func(dx, x, g []float32, rows, n, inW int)
}

// active is the set in use: the best package kernels allows
// ($GONOX_KERNELS). Tests switch it with useKernels.
var active = kernelSets()[0]

// useKernels makes the package use the named set and returns a function
// restoring the previous one; false if this machine cannot run it. Not
// safe to call while kernels run (tests and benchmarks).
func useKernels(name string) (restore func(), ok bool) {
	prev := active
	for _, s := range kernelSets() {
		if s.name == name {
			active = s
			return func() { active = prev }, true
		}
	}
	return func() {}, false
}

var goSet = &kernelSet{name: "go", maxStride: maxStrideGo, maxDense: maxDenseGo, sumDense: sumDenseGo}

func maxDenseGo(ys []float32, as []int32, x []float32, orig, kofs []int32) {
	as, orig = as[:len(ys)], orig[:len(ys)]
	for t := range ys {
		p := orig[t] + kofs[0]
		c, a := x[p], p
		for _, k := range kofs[1:] {
			if v := x[orig[t]+k]; v > c || v != v {
				c, a = v, orig[t]+k
			}
		}
		ys[t], as[t] = c, a
	}
}

func sumDenseGo(ys []float32, _ []int32, x []float32, orig, kofs []int32) {
	orig = orig[:len(ys)]
	for t := range ys {
		s := float32(0)
		for i, k := range kofs {
			if i == 0 {
				s = x[orig[t]+k]
			} else {
				s += x[orig[t]+k]
			}
		}
		ys[t] = s
	}
}

func maxStrideGo(ys []float32, as []int32, xs []float32, stride int, pos0, dpos int32) {
	as = as[:len(ys)]
	if len(ys) > 0 {
		_ = xs[(len(ys)-1)*stride]
	}
	for t, c := range ys {
		if v := xs[t*stride]; v > c || v != v {
			ys[t], as[t] = v, pos0+int32(t)*dpos
		}
	}
}

// pickIgemm returns the shift kernel that computes a rows×q output with
// depth steps fastest by a simple model (gridCost): per step, a tile
// costs the larger of its FMAs and its loads, both at two per cycle,
// where a B vector counts twice (the taps' offsets make nearly every B
// load cross a cache line) and a broadcast once; every tile is full
// (padding rows and columns cost too). On Zen 5 (AVX-512) the model picks
// the measured best shape, or one within 10% of it, for the classes of
// BenchmarkIgemmShape.
func (s *kernelSet) pickIgemm(rows, q int) *igemmKernel {
	if forceIgemm >= 0 {
		return &s.igemm[forceIgemm]
	}
	var best *igemmKernel
	for i := range s.igemm {
		if k := &s.igemm[i]; best == nil || k.gridCost(rows, q) < best.gridCost(rows, q) {
			best = k
		}
	}
	return best
}

// step is the modelled cost of one depth step of a tile (see pickIgemm).
func (k *igemmKernel) step() int { return max(k.mr*k.nv, k.mr+2*k.nv) }

// gridCost is the modelled cost of a rows×q grid of tiles.
func (k *igemmKernel) gridCost(rows, q int) int {
	return ceilDiv(rows, k.mr) * ceilDiv(q, k.cols()) * k.step()
}

// rowCost is the modelled cost of rows output channels of od's rows in
// the rows layout: whole tiles per row of od[2] positions.
func (k *igemmKernel) rowCost(rows int, od [MaxDims]int) int {
	return od[0] * od[1] * ceilDiv(rows, k.mr) * ceilDiv(od[2], k.cols()) * k.step()
}

// pickIgemmRows returns the shift kernel with the lowest rowCost among
// those whose tiles fit in rows channels and a row of od[2] positions, or
// nil if none does (or a grid kernel is forced).
func (s *kernelSet) pickIgemmRows(rows int, od [MaxDims]int) *igemmKernel {
	if forceIgemm >= 0 {
		return nil
	}
	var best *igemmKernel
	for i := range s.igemm {
		k := &s.igemm[i]
		if k.mr > rows || k.cols() > od[2] {
			continue
		}
		if best == nil || k.rowCost(rows, od) < best.rowCost(rows, od) {
			best = k
		}
	}
	return best
}

// pickDot returns the dot kernel for rows×cols dot products, with the
// same model as pickIgemm (loads: mr A vectors and nr B vectors per step).
// Tiles never exceed the problem (tails overlap the previous tile), so
// kernels with mr > rows are not candidates.
func (s *kernelSet) pickDot(rows, cols int) *dotKernel {
	var best *dotKernel
	bestCost := 0
	for i := range s.dot {
		k := &s.dot[i]
		if k.mr > rows {
			continue
		}
		tiles := ceilDiv(rows, k.mr) * ceilDiv(cols, k.nr)
		cost := tiles * max(k.mr*k.nr, k.mr+2*k.nr)
		if best == nil || cost < bestCost {
			best, bestCost = k, cost
		}
	}
	return best
}

// forceIgemm, if not negative, selects the shift kernel (benchmarks).
var forceIgemm = -1

func ceilDiv(a, b int) int { return (a + b - 1) / b }
