package tensor

import "slices"

// Layout describes how a global tensor is sharded over a mesh. Package
// shard implements it; package tensor only prints it and asks it for a
// host copy when a sharded tensor is read.
type Layout interface {
	// DimAxes returns the mesh axes dimension i is split over, as printed
	// after '@' in type notation ("dp", "(dp,tp)"), or "" if replicated.
	DimAxes(i int) string
	// Gather returns the whole array as a host tensor.
	Gather(x *Tensor) *Tensor
	// MapBlocks returns a tensor sharded like x whose block on each device
	// is fn of x's block there (fn must keep the block's shape).
	MapBlocks(x *Tensor, fn func(block *Tensor) *Tensor) *Tensor
}

// NewSharded returns a global tensor of the given dtype and shape whose
// data lives in the blocks that layout describes. It has no host data.
// Package shard uses it; users call shard.Put.
func NewSharded(dt DType, shape []int, layout Layout) *Tensor {
	if !dt.valid() {
		panic("tensor.NewSharded: invalid dtype")
	}
	checkShape("tensor.NewSharded", shape)
	// The header, its record and a shape of rank up to 4 in one
	// allocation (package shard makes one for every Map output and
	// collective's global result).
	box := &struct {
		t    Tensor
		e    tensorExt
		dims [4]int
	}{}
	box.e.layout = layout
	t := &box.t
	t.dtype, t.ext = dt, &box.e
	if len(shape) <= len(box.dims) {
		k := copy(box.dims[:], shape)
		t.shape = box.dims[:k:k]
	} else {
		t.shape = slices.Clone(shape)
	}
	return t
}
