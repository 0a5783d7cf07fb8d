package tensor

import (
	"fmt"
	"sync/atomic"
)

// This file is the sharding seam: how an op reaches package shard when an
// operand is a global placed tensor. Package tensor does not know meshes;
// shard installs one Placer, as ops reach the gemm kernels through one
// seam.

// Placer computes op on operands at least one of which is a global placed
// tensor (it has a Layout), returning one placed result per output of op.
// The operands may be traced: the placer records whatever autodiff needs
// by applying Distributed ops (see Op.Distributed), so differentiation
// works through it like through any other op.
type Placer func(op *Op, params any, in []*Tensor) []*Tensor

var placer atomic.Pointer[Placer]

// SetPlacer installs the placer. Package shard calls it once, from its
// init function; a second call panics.
func SetPlacer(p Placer) {
	if p == nil || !placer.CompareAndSwap(nil, &p) {
		panic("tensor.SetPlacer: a placer is already installed (package shard installs it)")
	}
}

// applyPlaced hands an op with placed operands to the placer.
func applyPlaced(op *Op, params any, in []*Tensor, loc *Local) []*Tensor {
	p := placer.Load()
	if p == nil {
		for _, x := range in {
			if x.layout != nil {
				panic(fmt.Sprintf("tensor: op %q: operand %v is sharded over a mesh; compute on it inside shard.Map or gather it first (shard.Gather), or import package shard, which computes on it", op.Name, x))
			}
		}
	}
	if loc != nil {
		var blk, glob *Tensor
		for _, x := range in {
			if x.local != nil && blk == nil {
				blk = x
			}
			if x.layout != nil && glob == nil {
				glob = x
			}
		}
		panic(fmt.Sprintf("tensor: op %q mixes %v, a block inside shard.Map, with %v, a global placed tensor; pass the global tensor into the Map through its input tree", op.Name, blk, glob))
	}
	return (*p)(op, params, in)
}
