package tensor

import (
	"fmt"
	"sync/atomic"
)

// This file is the sharding seam: how an op reaches package shard when an
// operand is a global placed tensor. Package tensor does not know meshes;
// shard installs one Placer, as ops reach the gemm kernels through one
// seam.

// Placer computes ops on global placed tensors. Package shard implements
// it and installs it with SetPlacer.
type Placer interface {
	// Apply computes op on operands at least one of which is a global
	// placed tensor (it has a Layout), returning one placed result per
	// output of op. The operands may be traced: the placer records what
	// autodiff needs by applying Distributed ops (see Distributed), so
	// differentiation works through it like through any other op.
	Apply(op *Op, params any, in []*Tensor) []*Tensor
	// Settle returns a placed value that leaves a computation — a
	// gradient that Backward returns — with any pending work done (a
	// partial sum reduced), laid out as it says.
	Settle(x *Tensor) *Tensor
}

var placer atomic.Pointer[Placer]

// SetPlacer installs the placer. Package shard calls it once, from its
// init function; a second call panics.
func SetPlacer(p Placer) {
	if p == nil || !placer.CompareAndSwap(nil, &p) {
		panic("tensor.SetPlacer: a placer is already installed (package shard installs it)")
	}
}

// settle hands a placed gradient to the placer's Settle.
func settle(x *Tensor) *Tensor {
	if x.layout() == nil {
		return x
	}
	if p := placer.Load(); p != nil {
		return (*p).Settle(x)
	}
	return x
}

// applyPlaced hands an op with placed operands to the placer.
func applyPlaced(op *Op, params any, in []*Tensor, loc *Local) []*Tensor {
	p := placer.Load()
	if p == nil {
		for _, x := range in {
			if x.layout() != nil {
				panic(fmt.Sprintf("tensor: op %q: operand %v is sharded over a mesh; compute on it inside shard.Map or gather it first (shard.Gather), or import package shard, which computes on it", op.Name, x))
			}
		}
	}
	if loc != nil {
		var blk, glob *Tensor
		for _, x := range in {
			if x.local() != nil && blk == nil {
				blk = x
			}
			if x.layout() != nil && glob == nil {
				glob = x
			}
		}
		panic(fmt.Sprintf("tensor: op %q mixes %v, a block inside shard.Map, with %v, a global placed tensor; pass the global tensor into the Map through its input tree", op.Name, blk, glob))
	}
	return (*p).Apply(op, params, in)
}

// AbstractLayout is implemented by layouts that can describe a placed
// tensor without its data. The shape-only placeholders that autodiff
// keeps for the inputs and outputs a VJP does not save then hold no
// blocks (so they keep no device memory alive), and reading one panics
// like reading any placeholder.
type AbstractLayout interface {
	Layout
	// Abstract returns the layout without data.
	Abstract() Layout
	// IsAbstract reports whether the layout has no data.
	IsAbstract() bool
}

func abstractLayout(l Layout) Layout {
	if a, ok := l.(AbstractLayout); ok {
		return a.Abstract()
	}
	return l
}

func shapeOnly(l Layout) bool {
	a, ok := l.(AbstractLayout)
	return ok && a.IsAbstract()
}

// BlockLayout is implemented by layouts whose blocks live on devices: the
// residual report (Residuals) then counts a placed residual's blocks on
// the devices that hold them.
type BlockLayout interface {
	Layout
	// DeviceBlocks returns every block with the ID of the device holding
	// it (replicas are listed once per device).
	DeviceBlocks() (blocks []*Tensor, devices []int)
}

// CallBlock runs op's implementation on the host tensors in, as Apply
// would without tracing: bfloat16 and float16 operands are widened to
// float32 and the result rounded once to their dtype, unless op handles
// 16-bit data itself (Traits.Half). Package shard computes each device's
// block of a propagated op with it.
func CallBlock(op *Op, in []*Tensor, params any) *Tensor { return callImpl(op, in, params) }

// CallBlockN is CallBlock for ops with several outputs (op.ImplN).
func CallBlockN(op *Op, in []*Tensor, params any) []*Tensor {
	outs, _ := callImplN(op, op.ImplN, in, params)
	return outs
}
