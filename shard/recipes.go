package shard

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// This file holds the matrix-multiplication recipes of the JAX sharding
// guide as functions to call inside Map. They are differentiable like
// everything else.
//
// The "ring" variants interleave ring shifts with partial products, the
// pattern that lets accelerators overlap communication with computation.
// On gonox's simulated devices each collective is a synchronous meeting, so
// the ring variants do not run faster than the plain ones here; they move
// the same bytes in n-1 steps instead of one, never materialise the whole
// gathered weight (all-gather ring) and are the building blocks for real
// overlap on multi-process meshes.

// AllGatherMatMul computes x @ W where W's rows are sharded over axes and
// x holds all columns: it all-gathers W's blocks and multiplies (the FSDP
// forward). x is [b, K], w is this device's [K/n, m] block; the result is
// [b, m].
func AllGatherMatMul(c *Ctx, x, w *tensor.Tensor, axes Axes) *tensor.Tensor {
	full := c.AllGather(w, axes, 0, true)
	return tensor.MatMul(x, full)
}

// AllGatherMatMulRing computes the same product as AllGatherMatMul
// without gathering W: each step multiplies the matching column slice of
// x by the block of W at hand and passes the block around the ring. With
// bidirectional, each block is split in two halves that travel in
// opposite directions (using both links of a ring). x's columns must split
// into n (or 2n) equal parts.
func AllGatherMatMulRing(c *Ctx, x, w *tensor.Tensor, axes Axes, bidirectional bool) *tensor.Tensor {
	n := c.AxisSize(axes...)
	idx := c.AxisIndex(axes...)
	k := x.Dim(-1)
	mod := func(i int) int { return ((i % n) + n) % n }
	if !bidirectional {
		if k%n != 0 {
			panic(fmt.Sprintf("shard.AllGatherMatMulRing: %v: %d columns do not split over %d devices", x, k, n))
		}
		s := k / n
		cols := func(j int) *tensor.Tensor { return tensor.SliceAxis(x, -1, j*s, (j+1)*s) }
		out := tensor.MatMul(cols(idx), w)
		for i := 1; i < n; i++ {
			w = c.RingShift(w, axes, 1)
			out = tensor.Add(out, tensor.MatMul(cols(mod(idx-i)), w))
		}
		return out
	}
	if k%(2*n) != 0 || w.Dim(0)%2 != 0 {
		panic(fmt.Sprintf("shard.AllGatherMatMulRing: %v, %v: bidirectional needs columns and block rows divisible by 2·%d", x, w, n))
	}
	h := k / (2 * n)
	cols := func(j, half int) *tensor.Tensor {
		return tensor.SliceAxis(x, -1, (2*j+half)*h, (2*j+half+1)*h)
	}
	parts := tensor.Split(w, 0, 2)
	up, down := parts[0], parts[1]
	out := tensor.Add(tensor.MatMul(cols(idx, 0), up), tensor.MatMul(cols(idx, 1), down))
	for i := 1; i < n; i++ {
		up = c.RingShift(up, axes, 1)
		down = c.RingShift(down, axes, -1)
		out = tensor.Add(out, tensor.MatMul(cols(mod(idx-i), 0), up))
		out = tensor.Add(out, tensor.MatMul(cols(mod(idx+i), 1), down))
	}
	return out
}

// MatMulReduceScatter computes the row block of x @ W this device owns when
// the contraction dimension is sharded over axes: each device multiplies
// its column block of x by its row block of W, and a reduce-scatter over
// the rows sums the partial products and leaves each device its rows (TP
// forward, FSDP backward). x is [b, K/n], w is [K/n, m]; the result is
// [b/n, m].
func MatMulReduceScatter(c *Ctx, x, w *tensor.Tensor, axes Axes) *tensor.Tensor {
	return c.PsumScatter(tensor.MatMul(x, w), axes, 0, true)
}

// MatMulReduceScatterRing computes what MatMulReduceScatter does by passing
// partial sums around the ring and adding one row block of the local
// product at each step. With bidirectional, the top and bottom halves of
// each row block travel in opposite directions.
func MatMulReduceScatterRing(c *Ctx, x, w *tensor.Tensor, axes Axes, bidirectional bool) *tensor.Tensor {
	n := c.AxisSize(axes...)
	idx := c.AxisIndex(axes...)
	b := x.Dim(0)
	mod := func(i int) int { return ((i % n) + n) % n }
	if !bidirectional {
		if b%n != 0 {
			panic(fmt.Sprintf("shard.MatMulReduceScatterRing: %v: %d rows do not split over %d devices", x, b, n))
		}
		s := b / n
		rows := func(j int) *tensor.Tensor { return tensor.SliceAxis(x, 0, j*s, (j+1)*s) }
		acc := tensor.MatMul(rows(mod(idx-(n-1))), w)
		for i := n - 2; i >= 0; i-- {
			acc = c.RingShift(acc, axes, -1)
			acc = tensor.Add(acc, tensor.MatMul(rows(mod(idx-i)), w))
		}
		return acc
	}
	if b%(2*n) != 0 {
		panic(fmt.Sprintf("shard.MatMulReduceScatterRing: %v: bidirectional needs rows divisible by 2·%d", x, n))
	}
	h := b / (2 * n)
	rows := func(j, half int) *tensor.Tensor {
		return tensor.SliceAxis(x, 0, (2*j+half)*h, (2*j+half+1)*h)
	}
	top := tensor.MatMul(rows(mod(idx-(n-1)), 0), w)
	bottom := tensor.MatMul(rows(mod(idx-1), 1), w)
	for i, j := n-2, 2; i >= 0; i, j = i-1, j+1 {
		top = c.RingShift(top, axes, -1)
		bottom = c.RingShift(bottom, axes, 1)
		top = tensor.Add(top, tensor.MatMul(rows(mod(idx-i), 0), w))
		bottom = tensor.Add(bottom, tensor.MatMul(rows(mod(idx-j), 1), w))
	}
	return tensor.Concat(0, top, bottom)
}
