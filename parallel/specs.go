package parallel

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// pathSpecs is a SpecTree resolved once per model: the spec of each
// parameter by its path. It serves the parameters, their gradients and
// their device blocks alike (whatever logical names those still carry), and
// is an error for any other path.
type pathSpecs map[string]shard.Spec

func (p pathSpecs) SpecFor(path pytree.Path, x *tensor.Tensor) (shard.Spec, error) {
	var buf [128]byte // the path's string on the stack: a lookup a leaf, every step
	if s, ok := p[string(path.AppendString(buf[:0]))]; ok {
		return s, nil
	}
	return nil, fmt.Errorf("parallel: %s %v is not a parameter of the model the strategy placed", leafName(path), x)
}

// sharded reports whether any parameter is split.
func (p pathSpecs) sharded() bool {
	for _, s := range p {
		if len(s.Axes()) > 0 {
			return true
		}
	}
	return false
}

// within reports whether every leaf is replicated or split over some of
// axes only.
func (p pathSpecs) within(axes []string) bool {
	for _, s := range p {
		for _, a := range s.Axes() {
			if !slices.Contains(axes, a) {
				return false
			}
		}
	}
	return true
}

// resolveSpecs asks tree (nil: replicate) for the spec of every leaf of
// params and checks it against the mesh: known axes, each once, dimensions
// divisible by the devices they are split over.
func resolveSpecs(mesh *shard.Mesh, params any, tree shard.SpecTree) (pathSpecs, error) {
	out := pathSpecs{}
	paths, leaves := pytree.LeavesWithPath(params)
	for i, x := range leaves {
		var spec shard.Spec
		if tree != nil {
			s, err := tree.SpecFor(paths[i], x)
			if err != nil {
				return nil, err
			}
			spec = s
		}
		if err := checkSpec(mesh, paths[i], x, spec); err != nil {
			return nil, err
		}
		out[paths[i].String()] = spec
	}
	return out, nil
}

func checkSpec(mesh *shard.Mesh, path pytree.Path, x *tensor.Tensor, spec shard.Spec) error {
	if len(spec) > x.Rank() {
		return fmt.Errorf("parameter %s %v: spec %v has %d entries for %d dimensions", leafName(path), x, spec, len(spec), x.Rank())
	}
	seen := map[string]bool{}
	for d, axes := range spec {
		for _, a := range axes {
			if !slices.Contains(mesh.AxisNames(), a) {
				return fmt.Errorf("parameter %s %v: spec %v names mesh axis %q, which the mesh does not have", leafName(path), x, spec, a)
			}
			if seen[a] {
				return fmt.Errorf("parameter %s %v: spec %v uses mesh axis %q twice", leafName(path), x, spec, a)
			}
			seen[a] = true
		}
		if n := mesh.AxisSize(axes...); len(axes) > 0 && x.Dim(d)%n != 0 {
			return fmt.Errorf("parameter %s %v: dimension %d (%d) does not split over the %d devices of mesh axes %v", leafName(path), x, d, x.Dim(d), n, []string(axes))
		}
	}
	return nil
}

// gatherStep all-gathers one dimension of a block over some mesh axes.
type gatherStep struct {
	dim  int
	axes shard.Axes
}

// pathGathers says, per parameter path, which gathers turn its stored
// block into the block the loss sees, in order.
type pathGathers map[string][]gatherStep

func (g pathGathers) any() bool {
	for _, s := range g {
		if len(s) > 0 {
			return true
		}
	}
	return false
}

// gatherPlan compares each parameter's stored spec with its compute spec
// (nil: replicated): the axes a dimension is stored over but not computed
// over are gathered, and they must be the minor end of the stored axes.
func gatherPlan(params any, stored pathSpecs, compute shard.SpecTree) (pathGathers, error) {
	out := pathGathers{}
	paths, leaves := pytree.LeavesWithPath(params)
	for i, x := range leaves {
		key := paths[i].String()
		st := stored[key]
		var cs shard.Spec
		if compute != nil {
			s, err := compute.SpecFor(paths[i], x)
			if err != nil {
				return nil, err
			}
			cs = s
		}
		var steps []gatherStep
		for d, axes := range st {
			var keep shard.DimSpec
			if d < len(cs) {
				keep = cs[d]
			}
			if len(keep) > len(axes) || !slices.Equal([]string(keep), []string(axes[:len(keep)])) {
				return nil, fmt.Errorf("parameter %s %v: compute spec %v is not the stored spec %v with minor axes gathered", leafName(paths[i]), x, cs, st)
			}
			if rest := axes[len(keep):]; len(rest) > 0 {
				steps = append(steps, gatherStep{dim: d, axes: shard.Axes(slices.Clone(rest))})
			}
		}
		if len(steps) > 0 {
			out[key] = steps // a leaf without one gathers nothing
		}
	}
	return out, nil
}

// gatherTree gathers the blocks of p inside Map. Axes that hold data are gathered
// with AllGather (the copy varies with the data; its transpose
// reduce-scatters the gradient); other axes with AllGatherInvariant (every
// device along them computes the same thing; the transpose slices). Mixed
// runs are gathered minor group first, so each gather joins contiguous
// blocks.
//
// A plan without gathers (every parameter computed where it is stored)
// returns p as it is: no walk of the tree, no path strings, on every
// device at every step.
func gatherTree[M any](g pathGathers, c *shard.Ctx, p M, data []string) M {
	if len(g) == 0 {
		return p
	}
	return pytree.MapWithPath(p, func(path pytree.Path, x *tensor.Tensor) *tensor.Tensor {
		return gatherLeaf(c, x, g[path.String()], data)
	})
}

func gatherLeaf(c *shard.Ctx, x *tensor.Tensor, steps []gatherStep, data []string) *tensor.Tensor {
	for _, s := range steps {
		// Split the axes into runs of data and non-data axes; gather the
		// minor run first.
		axes := s.axes
		for len(axes) > 0 {
			last := len(axes) - 1
			isData := slices.Contains(data, axes[last])
			start := last
			for start > 0 && slices.Contains(data, axes[start-1]) == isData {
				start--
			}
			run := shard.Axes(slices.Clone(axes[start:]))
			if isData {
				x = c.AllGather(x, run, s.dim, true)
			} else {
				x = c.AllGatherInvariant(x, run, s.dim, true)
			}
			axes = axes[:start]
		}
	}
	return x
}

// ioSpecs places the fields of stepIn, stepOut and gradOut: the parameters
// and their gradients by the resolved specs, the optimizer state by its
// SpecTree, batch leaves split over the data axes, the loss replicated.
type ioSpecs struct {
	params pathSpecs
	state  shard.SpecTree
	data   shard.Spec
}

func (s ioSpecs) SpecFor(path pytree.Path, x *tensor.Tensor) (shard.Spec, error) {
	if len(path) == 0 || path[0].Kind != pytree.FieldElem {
		return nil, fmt.Errorf("parallel: unexpected leaf %s", leafName(path))
	}
	rest := path[1:]
	switch path[0].Name {
	case "Params", "Grads":
		return s.params.SpecFor(rest, x)
	case "State":
		return s.state.SpecFor(rest, x)
	case "Batch":
		if x.Rank() == 0 {
			return shard.P(), nil
		}
		return s.data, nil
	}
	return shard.P(), nil
}
