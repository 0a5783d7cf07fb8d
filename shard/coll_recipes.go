package shard

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// This file holds the matrix-multiplication recipes of the JAX sharding
// guide as functions to call inside Map. They are differentiable like
// everything else.
//
// The "ring" variants are the collective matmuls: each step starts the
// ring shift of a block (RingShiftStart), multiplies the block at hand
// while it travels, and waits for the shifted block only when the next
// step needs it. They move the same bytes as the plain ones in n-1 steps
// and never materialise the whole gathered weight (all-gather ring). Their
// backward passes overlap the same way: the transpose of a started shift
// is the reverse shift, started where the forward one was waited for.
//
// What overlaps depends on where the devices are. Between devices of one
// process a shift is a pointer handoff: there is no transfer to hide, and
// the asynchronous shift only spares each step its barrier (a device that
// finishes its product early goes on to the next one instead of waiting
// for the slowest). Between processes (build tag mpi) the block travels
// with MPI_Isend/MPI_Irecv while the device multiplies, driven by a
// goroutine (see ProgressEnv). Measured on 2 processes of one 2-core
// machine (BenchmarkCollectiveMatMul, README "Overlapped collective
// matmuls"): the all-gather ring at batch 64, whose 8 MiB blocks outweigh
// each step's product, ran 1.1–2x faster and used a third less CPU; with
// large products (batch 1024) the transfer's copies compete with the
// multiplication for the same cores and the gain is within the noise.

// AllGatherMatMul computes x @ W where W's rows are sharded over axes and
// x holds all columns: it all-gathers W's blocks and multiplies (the FSDP
// forward). x is [b, K], w is this device's [K/n, m] block; the result is
// [b, m].
func AllGatherMatMul(c *Ctx, x, w *tensor.Tensor, axes Axes) *tensor.Tensor {
	full := c.AllGather(w, axes, 0, true)
	return tensor.MatMul(x, full)
}

// AllGatherMatMulRing computes the same product as AllGatherMatMul
// without gathering W: each step starts passing the block of W at hand
// around the ring, multiplies the matching column slice of x by it
// meanwhile, and waits for the next block. With
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
		var out *tensor.Tensor
		for i := 0; i < n; i++ {
			var h *Handle
			if i < n-1 {
				h = c.RingShiftStart(w, axes, 1)
			}
			p := tensor.MatMul(cols(mod(idx-i)), w)
			if out == nil {
				out = p
			} else {
				out = tensor.Add(out, p)
			}
			if h != nil {
				w = h.Wait()
			}
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
	var out *tensor.Tensor
	for i := 0; i < n; i++ {
		var hu, hd *Handle
		if i < n-1 {
			hu = c.RingShiftStart(up, axes, 1)
			hd = c.RingShiftStart(down, axes, -1)
		}
		if out == nil {
			out = tensor.Add(tensor.MatMul(cols(idx, 0), up), tensor.MatMul(cols(idx, 1), down))
		} else {
			out = tensor.Add(out, tensor.MatMul(cols(mod(idx-i), 0), up))
			out = tensor.Add(out, tensor.MatMul(cols(mod(idx+i), 1), down))
		}
		if hu != nil {
			up, down = hu.Wait(), hd.Wait()
		}
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
// product at each step: the product is computed while the partial sum
// travels. With bidirectional, the top and bottom halves of
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
			h := c.RingShiftStart(acc, axes, -1)
			p := tensor.MatMul(rows(mod(idx-i)), w)
			acc = tensor.Add(h.Wait(), p)
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
		ht := c.RingShiftStart(top, axes, -1)
		hb := c.RingShiftStart(bottom, axes, 1)
		pt := tensor.MatMul(rows(mod(idx-i), 0), w)
		pb := tensor.MatMul(rows(mod(idx-j), 1), w)
		top = tensor.Add(ht.Wait(), pt)
		bottom = tensor.Add(hb.Wait(), pb)
	}
	return tensor.Concat(0, top, bottom)
}
