package data

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// shardedBatch gathers the examples idx (with gather) as a batch split
// along its first dimension by s, reading for each distinct block of this process's
// devices only its rows (replicas share the block), and assembles the
// global tensors with shard.FromBlocks. In a job of several processes each
// process thus reads only the examples its devices hold.
func shardedBatch(gather func([]int) (Batch, error), idx []int, s shard.Sharding) (Batch, error) {
	mesh := s.Mesh()
	spec := s.Spec()
	for i, ds := range spec {
		if i > 0 && len(ds) > 0 {
			return Batch{}, fmt.Errorf("data: Sharding %v splits dimension %d; a loader or stream splits batches along the first dimension only", spec, i)
		}
	}
	var axes []string
	if len(spec) > 0 {
		axes = spec[0]
	}
	parts := mesh.AxisSize(axes...)
	if len(idx)%parts != 0 {
		return Batch{}, fmt.Errorf("data: a batch of %d examples does not split into %d parts over %v", len(idx), parts, axes)
	}
	rows := len(idx) / parts
	names := mesh.AxisNames()
	sizes := mesh.Shape()
	byPart := map[int]Batch{}
	xs := make([]*tensor.Tensor, mesh.Size())
	ys := make([]*tensor.Tensor, mesh.Size())
	hasY := false
	var xShape, yShape []int
	for dev, dv := range mesh.Devices() {
		if !dv.IsLocal() {
			continue
		}
		c := mesh.Coords(dev)
		part := 0
		for _, a := range axes {
			k := slices.Index(names, a)
			part = part*sizes[k] + c[k]
		}
		b, ok := byPart[part]
		if !ok {
			var err error
			if b, err = gather(idx[part*rows : (part+1)*rows : (part+1)*rows]); err != nil {
				return Batch{}, err
			}
			byPart[part] = b
		}
		xs[dev], ys[dev] = b.X, b.Y
		hasY = b.Y != nil
		xShape = b.X.Shape()
		if hasY {
			yShape = b.Y.Shape()
		}
	}
	if xShape == nil {
		return Batch{}, fmt.Errorf("data: this process has no device of %v", mesh)
	}
	global := func(shape []int) []int {
		g := slices.Clone(shape)
		g[0] *= parts
		return g
	}
	sx := shard.NewSharding(mesh, spec)
	x, err := shard.FromBlocks(sx, global(xShape), xs)
	if err != nil {
		return Batch{}, err
	}
	out := Batch{X: x}
	if hasY {
		sy := shard.NewSharding(mesh, spec[:min(len(spec), len(yShape))])
		if out.Y, err = shard.FromBlocks(sy, global(yShape), ys); err != nil {
			return Batch{}, err
		}
	}
	return out, nil
}
