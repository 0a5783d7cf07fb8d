package tensor

import "github.com/gonox/gonox/tensor/internal/conv"

// Convolutions in float64: a direct loop over every (output, kernel)
// pair, accumulated in float64. The float32 kernels (package
// tensor/internal/conv: im2col, shifted direct and Winograd-free gemm
// paths) are tuned for speed; this path is for float64's use, accuracy —
// gradient checks and scientific models — at the cost of speed.

// convEach64 calls fn for every product of a convolution with params p:
// the flat offsets of the output element y[n, o, out...], of the input
// element x[n, c, in...] it reads and of the kernel element w[o, c/G,
// k...]. Input positions come from out·stride - padLo + k·rhsDil, in
// the input dilated by lhsDil: only those on an input element count.
func convEach64(p *conv.Params, fn func(yo, xo, wo int)) {
	out := p.Out()
	nd := len(p.In)
	at := func(v []int, d, def int) int {
		if v == nil {
			return def
		}
		return v[d]
	}
	no, nk, ni := numel(out), numel(p.Kernel), numel(p.In)
	cg, og := p.C/p.Groups, p.O/p.Groups
	oi, ki := make([]int, nd), make([]int, nd)
	// xoff[j*nk + k]: the flat spatial input offset of output position j
	// and kernel position k, or -1 where it falls on padding or between
	// dilated input elements.
	xoff := make([]int, no*nk)
	for j := range no {
		rem := j
		for d := nd - 1; d >= 0; d-- {
			oi[d] = rem % out[d]
			rem /= out[d]
		}
		for k := range nk {
			rk := k
			for d := nd - 1; d >= 0; d-- {
				ki[d] = rk % p.Kernel[d]
				rk /= p.Kernel[d]
			}
			off := 0
			for d := range nd {
				pos := oi[d]*at(p.Stride, d, 1) - at(p.PadLo, d, 0) + ki[d]*at(p.RhsDil, d, 1)
				ld := at(p.LhsDil, d, 1)
				if pos < 0 || pos%ld != 0 || pos/ld >= p.In[d] {
					off = -1
					break
				}
				off = off*p.In[d] + pos/ld
			}
			xoff[j*nk+k] = off
		}
	}
	for n := range p.N {
		for o := range p.O {
			g := o / og
			for ci := range cg {
				c := g*cg + ci
				xb, wb := (n*p.C+c)*ni, (o*cg+ci)*nk
				yb := (n*p.O + o) * no
				for j := range no {
					for k := range nk {
						if xo := xoff[j*nk+k]; xo >= 0 {
							fn(yb+j, xb+xo, wb+k)
						}
					}
				}
			}
		}
	}
}

// conv64 is conv.Forward in float64.
func conv64(p *conv.Params, y, x, w []float64) {
	clear(y)
	convEach64(p, func(yo, xo, wo int) { y[yo] += x[xo] * w[wo] })
}

// convBackwardInput64 is conv.BackwardInput in float64.
func convBackwardInput64(p *conv.Params, dx, dy, w []float64) {
	clear(dx)
	convEach64(p, func(yo, xo, wo int) { dx[xo] += dy[yo] * w[wo] })
}

// convBackwardKernel64 is conv.BackwardKernel in float64.
func convBackwardKernel64(p *conv.Params, dw, x, dy []float64) {
	clear(dw)
	convEach64(p, func(yo, xo, wo int) { dw[wo] += x[xo] * dy[yo] })
}
