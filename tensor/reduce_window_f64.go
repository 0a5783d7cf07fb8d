package tensor

import (
	"math"

	"github.com/gonox/gonox/tensor/internal/conv"
)

// The window reductions in float64: direct loops over each output's
// window taps (the float32 kernels of package tensor/internal/conv plan
// rows and vector loops; this path is for float64's accuracy). The
// windows are conv.Window's: tap k of output t along a dimension reads
// input t·stride - padLo + k·dilation (padding outside the input), or,
// for adaptive windows, [⌊t·In/Out⌋, ⌈(t+1)·In/Out⌉).

// windowEach64 calls fn(o, i) for every output o of window w (flat, row
// major) and every input element i (flat) its window reads, the taps in
// row-major order; taps on padding are skipped.
func windowEach64(w *conv.Window, fn func(o, i int)) {
	out := w.Out()
	r := len(w.Shape)
	at := func(v []int, d, def int) int {
		if v == nil {
			return def
		}
		return v[d]
	}
	// taps[d][t*kd[d]+k]: the input index of tap k of output t, or -1.
	kd := make([]int, r)
	taps := make([][]int, r)
	for d := range r {
		n, m := w.Shape[d], out[d]
		if w.AdaptiveOut != nil {
			for t := range m {
				kd[d] = max(kd[d], (t+1)*n/m+b2i((t+1)*n%m != 0)-t*n/m)
			}
			taps[d] = make([]int, m*kd[d])
			for t := range m {
				st, en := t*n/m, (t+1)*n/m+b2i((t+1)*n%m != 0)
				for k := range kd[d] {
					taps[d][t*kd[d]+k] = -1
					if st+k < en {
						taps[d][t*kd[d]+k] = st + k
					}
				}
			}
			continue
		}
		kd[d] = w.Size[d]
		taps[d] = make([]int, m*kd[d])
		for t := range m {
			for k := range kd[d] {
				pos := t*at(w.Stride, d, 1) - at(w.PadLo, d, 0) + k*at(w.Dilation, d, 1)
				if pos < 0 || pos >= n {
					pos = -1
				}
				taps[d][t*kd[d]+k] = pos
			}
		}
	}
	inStride := contiguousStrides(w.Shape)
	no, nk := numel(out), numel(kd)
	oi, ki := make([]int, r), make([]int, r)
	for o := range no {
		rem := o
		for d := r - 1; d >= 0; d-- {
			oi[d] = rem % out[d]
			rem /= out[d]
		}
	taps:
		for k := range nk {
			rk := k
			for d := r - 1; d >= 0; d-- {
				ki[d] = rk % kd[d]
				rk /= kd[d]
			}
			off := 0
			for d := range r {
				p := taps[d][oi[d]*kd[d]+ki[d]]
				if p < 0 {
					continue taps
				}
				off += p * inStride[d]
			}
			fn(o, off)
		}
	}
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// windowMax64 returns each window's maximum of x and its position (the
// first maximum in tap order; NaN wins; the first tap for a window of
// -Inf; -1 and -Inf for a window of padding only), as conv.MaxForward.
func windowMax64(w *conv.Window, x []float64) (y []float64, arg []int) {
	n := numel(w.Out())
	y, arg = make([]float64, n), make([]int, n)
	for o := range y {
		y[o], arg[o] = math.Inf(-1), -1
	}
	first := make([]int, n)
	for o := range first {
		first[o] = -1
	}
	windowEach64(w, func(o, i int) {
		if first[o] < 0 {
			first[o] = i
		}
		if v := x[i]; (v > y[o] || v != v) && y[o] == y[o] {
			y[o], arg[o] = v, i
		}
	})
	for o, a := range arg {
		if a < 0 {
			arg[o] = first[o]
		}
	}
	return y, arg
}

// windowMaxImpl64, selectScatter64, selectGather64, windowSum64 and
// windowSumT64 are the window ops' Impls for float64 operands.
func windowMaxImpl64(p *windowParams, x *Tensor) *Tensor {
	w := p.window(x.shape)
	y, _ := windowMax64(w, x.f64())
	return &Tensor{dtype: Float64, shape: w.Out(), data: raw(y)}
}

func selectScatter64(p *windowParams, x, g *Tensor) *Tensor {
	w := p.window(x.shape)
	_, arg := windowMax64(w, x.f64())
	dx := newTensor(Float64, x.shape)
	d, gs := dx.f64(), g.f64()
	for o, a := range arg {
		if a >= 0 {
			d[a] += gs[o]
		}
	}
	return dx
}

func selectGather64(p *windowParams, x, h *Tensor) *Tensor {
	w := p.window(x.shape)
	_, arg := windowMax64(w, x.f64())
	y := newTensor(Float64, w.Out())
	d, hs := y.f64(), h.f64()
	for o, a := range arg {
		if a >= 0 {
			d[o] = hs[a]
		}
	}
	return y
}

func windowSum64(p *windowParams, x *Tensor) *Tensor {
	w := p.window(x.shape)
	y := newTensor(Float64, w.Out())
	d, xs := y.f64(), x.f64()
	windowEach64(w, func(o, i int) { d[o] += xs[i] })
	return y
}

func windowSumT64(p *windowParams, g *Tensor) *Tensor {
	shape := p.inShape(g.shape)
	dx := newTensor(Float64, shape)
	d, gs := dx.f64(), g.f64()
	windowEach64(p.window(shape), func(o, i int) { d[i] += gs[o] })
	return dx
}
