//go:build amd64 && !noasm

package conv

import "github.com/gonox/gonox/internal/kernels"

var (
	avx512Set = &kernelSet{name: "avx512", igemm: igemmAVX512, dot: dotAVX512, maxStride: asmMaxStride(k512MaxStride),
		maxDense: asmDense(k512MaxDense), sumDense: asmDense(k512SumDense), maxPool2: asmMaxPool2, maxPool2Grad: asmMaxPool2Grad,
		selectScatter2: asmSelectScatter2, winoIn: k512WinoIn, winoOut: k512WinoOut, winoGrad: k512WinoGrad, winoInRows: k512WinoInRows}
	avx2Set = &kernelSet{name: "avx2", igemm: igemmAVX2, dot: dotAVX2, maxStride: asmMaxStride(k256MaxStride),
		maxDense: asmDense(k256MaxDense), sumDense: asmDense(k256SumDense)}
)

// asmDense wraps an assembly dense-window kernel, checking that the
// positions it reads are inside x (orig and kofs increase).
func asmDense(f func(n int, y *float32, a *int32, x *float32, orig *int32, kofs *int32, nk int)) func([]float32, []int32, []float32, []int32, []int32) {
	return func(ys []float32, as []int32, x []float32, orig, kofs []int32) {
		n, nk := len(ys), len(kofs)
		if n == 0 || nk == 0 {
			return
		}
		_ = x[orig[n-1]+kofs[nk-1]]
		if orig[0]+kofs[0] < 0 {
			panic("conv: negative window position")
		}
		var ap *int32 // nil for a sum, which writes no positions
		if as != nil {
			_ = as[n-1]
			ap = &as[0]
		}
		f(n, &ys[0], ap, &x[0], &orig[0], &kofs[0], nk)
	}
}

// asmMaxStride wraps an assembly max-pooling step, checking the bounds the
// assembly does not.
func asmMaxStride(f func(n int, y *float32, a *int32, x *float32, stride int, pos0, dpos int32)) func([]float32, []int32, []float32, int, int32, int32) {
	return func(ys []float32, as []int32, xs []float32, stride int, pos0, dpos int32) {
		n := len(ys)
		if n == 0 {
			return
		}
		_, _ = as[n-1], xs[(n-1)*stride]
		f(n, &ys[0], &as[0], &xs[0], stride, pos0, dpos)
	}
}

// kernelSets lists the sets this machine runs, best first, as package
// kernels allows; the Go set is last.
func kernelSets() []*kernelSet {
	var s []*kernelSet
	if kernels.Has(kernels.AVX512) {
		s = append(s, avx512Set)
	}
	if kernels.Has(kernels.AVX2) {
		s = append(s, avx2Set)
	}
	return append(s, goSet)
}

// asmMaxPool2 runs k512MaxPool2, checking the bounds the assembly does not.
func asmMaxPool2(ys []float32, as []int32, x []float32, rows, n, inW int) {
	if checkPool2(len(ys), len(as), len(x), rows, n, inW) {
		k512MaxPool2(rows, n, &ys[0], &as[0], &x[0], inW)
	}
}

// asmMaxPool2Grad runs k512MaxPool2Grad, checking the bounds.
func asmMaxPool2Grad(dx []float32, as []int32, dy []float32, rows, n, inW int) {
	if checkPool2(len(dy), len(as), len(dx), rows, n, inW) {
		k512MaxPool2Grad(rows, n, &dx[0], &as[0], &dy[0], inW)
	}
}

// asmSelectScatter2 runs k512SelectScatter2, checking the bounds.
func asmSelectScatter2(dx, x, g []float32, rows, n, inW int) {
	if checkPool2(len(g), len(g), min(len(x), len(dx)), rows, n, inW) {
		k512SelectScatter2(rows, n, &dx[0], &x[0], &g[0], inW)
	}
}

// checkPool2 panics unless a 2×2 pool of rows×n windows over rows of inW
// fits in outputs (and positions) of ny (na) and inputs of nx elements;
// it reports whether there are windows.
func checkPool2(ny, na, nx, rows, n, inW int) bool {
	if rows <= 0 || n <= 0 {
		return false
	}
	if inW < 2*n || ny < rows*n || na < rows*n || nx < (2*rows-1)*inW+2*n {
		panic("conv: 2x2 max pool operands too short")
	}
	return true
}

//go:noescape
func k512WinoIn(p *float32, pd2, ntr, ngrp int, v *float32, vstr int)

//go:noescape
func k512WinoOut(m *float32, mstr, ntr, ngrp int, y *float32, ldy int)

//go:noescape
func k512WinoGrad(dy *float32, ldy, ntr, ngrp int, m *float32, mstr int)

//go:noescape
func k512WinoInRows(r0, r1, r2, r3 *float32, ngrp int, v *float32, vstr int)
