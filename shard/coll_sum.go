package shard

import (
	"github.com/gonox/gonox/tensor"
)

// The reductions of the collectives: sumFloat32 for float32 blocks (the
// psum, the psum_scatter, the shared-memory all-reduce), sumHalf for
// bfloat16 and float16 blocks (see "bfloat16 and float16" in doc.go: the
// collectives declare tensor.NativeHalf in their Traits, which keeps Apply
// from widening their blocks; the sums widen here).

// sumGroup returns how many of n operands sumFloat32 adds in its next
// pass: eight, four, two or one (sumOrder follows the same rule).
func sumGroup(n int) int {
	switch {
	case n >= 8:
		return 8
	case n >= 4:
		return 4
	case n >= 2:
		return 2
	}
	return 1
}

// sumFloat32 writes dst = Σ ins[k][lo:hi] reading every input once. The
// inputs are taken in groups of up to eight, each group in a single pass
// whose loop the compiler keeps free of bounds checks; the first group
// writes dst and the others add to it.
func sumFloat32(dst []float32, ins [][]float32, lo, hi int) {
	n := hi - lo
	dst = dst[:n]
	first := true
	var streams [8][]float32 // a group's streams, on the stack
	for len(ins) > 0 {
		k := sumGroup(len(ins))
		g := streams[:k]
		for i := range g {
			g[i] = ins[i][lo:hi:hi]
		}
		switch k {
		case 8:
			sum8(dst, g, first)
		case 4:
			sum4(dst, g, first)
		case 2:
			sum2(dst, g, first)
		default:
			if first {
				copy(dst, g[0])
			} else {
				a := g[0][:n]
				for i := range dst {
					dst[i] += a[i]
				}
			}
		}
		first = false
		ins = ins[k:]
	}
}

// tail drops the first k elements sumAsm summed of d and of every
// stream of g, in place (g is sumFloat32's own).
func tail(d []float32, g [][]float32, k int) ([]float32, [][]float32) {
	if k == 0 {
		return d, g
	}
	for i, x := range g {
		g[i] = x[k:]
	}
	return d[k:], g
}

func sum8(d []float32, g [][]float32, first bool) {
	d, g = tail(d, g, sumAsm(d, g, first))
	n := len(d)
	a, b, c, e := g[0][:n], g[1][:n], g[2][:n], g[3][:n]
	f, h, p, q := g[4][:n], g[5][:n], g[6][:n], g[7][:n]
	if first {
		for i := range d {
			d[i] = ((a[i] + b[i]) + (c[i] + e[i])) + ((f[i] + h[i]) + (p[i] + q[i]))
		}
		return
	}
	for i := range d {
		d[i] += ((a[i] + b[i]) + (c[i] + e[i])) + ((f[i] + h[i]) + (p[i] + q[i]))
	}
}

func sum4(d []float32, g [][]float32, first bool) {
	d, g = tail(d, g, sumAsm(d, g, first))
	n := len(d)
	a, b, c, e := g[0][:n], g[1][:n], g[2][:n], g[3][:n]
	if first {
		for i := range d {
			d[i] = (a[i] + b[i]) + (c[i] + e[i])
		}
		return
	}
	for i := range d {
		d[i] += (a[i] + b[i]) + (c[i] + e[i])
	}
}

func sum2(d []float32, g [][]float32, first bool) {
	d, g = tail(d, g, sumAsm(d, g, first))
	n := len(d)
	a, b := g[0][:n], g[1][:n]
	if first {
		for i := range d {
			d[i] = a[i] + b[i]
		}
		return
	}
	for i := range d {
		d[i] += a[i] + b[i]
	}
}

// isHalf reports whether dt is bfloat16 or float16.
func isHalf(dt tensor.DType) bool { return dt == tensor.BFloat16 || dt == tensor.Float16 }

// sumHalf sums the 16-bit blocks ins (of dtype dt, each of len(dst)
// elements) in float32 and rounds the sum once into dst. It works in
// tiles that stay in cache: each tile of every block is widened into a
// small buffer, summed with the float32 kernel (the order of the float32
// psum, so the result is the float32 psum of the widened blocks, rounded)
// and rounded.
func sumHalf(dt tensor.DType, dst []uint16, ins [][]uint16) {
	const tile = 2048
	n := len(dst)
	buf := make([]float32, (len(ins)+1)*tile)
	wide := make([][]float32, len(ins))
	acc := buf[len(ins)*tile:]
	for lo := 0; lo < n; lo += tile {
		hi := min(lo+tile, n)
		for r, x := range ins {
			wide[r] = buf[r*tile : r*tile+hi-lo]
			widenHalf(dt, wide[r], x[lo:hi])
		}
		sumFloat32(acc, wide, 0, hi-lo)
		narrowHalf(dt, dst[lo:hi], acc[:hi-lo])
	}
}

// widenHalf writes the 16-bit elements src of dtype dt to dst as float32.
func widenHalf(dt tensor.DType, dst []float32, src []uint16) {
	tensor.WidenBits16(dst[:len(src)], dt, src)
}

// narrowHalf rounds src to dtype dt into dst (to nearest, ties to even;
// NaN stays NaN).
func narrowHalf(dt tensor.DType, dst []uint16, src []float32) {
	tensor.RoundBits16(dst[:len(src)], dt, src)
}
