package tensor

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
	return &Tensor{dtype: dt, shape: append([]int(nil), shape...), ext: &tensorExt{layout: layout}}
}
