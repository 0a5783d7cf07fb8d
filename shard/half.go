package shard

import "github.com/gonox/gonox/tensor"

// Collectives on bfloat16 and float16 blocks: see "bfloat16 and
// float16" in doc.go. tensor.Op.NativeHalf keeps Apply from widening
// their blocks; the sums widen here.

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
