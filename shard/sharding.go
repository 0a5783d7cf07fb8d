package shard

import "fmt"

// Sharding places a tensor on a mesh: JAX's NamedSharding.
type Sharding struct {
	mesh *Mesh
	spec Spec
}

// NewSharding returns the sharding of spec over mesh. It panics if the spec
// names an axis the mesh lacks or uses one twice.
func NewSharding(mesh *Mesh, spec Spec) Sharding {
	// The axes are checked in place: a spec names a few, and Map makes a
	// sharding of every argument and result on every call.
	for i, d := range spec {
		for j, a := range d {
			if mesh == nil {
				panic("shard.NewSharding: mesh is nil")
			}
			mesh.axis("shard.NewSharding", a)
			if spec.usesBefore(a, i, j) {
				panic(fmt.Sprintf("shard.NewSharding: spec %v uses mesh axis %q twice", spec, a))
			}
		}
	}
	return Sharding{mesh: mesh, spec: append(Spec(nil), spec...)}
}

// Replicated returns the sharding that puts a whole copy on every device.
func Replicated(mesh *Mesh) Sharding { return Sharding{mesh: mesh} }

// Mesh returns the mesh.
func (s Sharding) Mesh() *Mesh { return s.mesh }

// Spec returns the partition spec.
func (s Sharding) Spec() Spec { return append(Spec(nil), s.spec...) }

// String prints the sharding as JAX does.
func (s Sharding) String() string {
	return fmt.Sprintf("NamedSharding(mesh=%v, spec=%v)", s.mesh, s.spec)
}

// Equal reports whether two shardings place tensors identically.
func (s Sharding) Equal(o Sharding) bool {
	return s.mesh.Equal(o.mesh) && s.spec.Equal(o.spec)
}

// IsReplicated reports whether every device holds the whole tensor.
func (s Sharding) IsReplicated() bool { return len(s.spec.Axes()) == 0 }

// geometry describes how a tensor of a given shape is cut into blocks.
type geometry struct {
	shape, block []int
	parts        []int // blocks along each dim
}

func (s Sharding) geometry(op string, shape []int) geometry {
	if msg := s.spec.check(s.mesh, shape); msg != "" {
		panic(fmt.Sprintf("%s: %s", op, msg))
	}
	g := geometry{shape: shape, block: make([]int, len(shape)), parts: make([]int, len(shape))}
	for i, d := range shape {
		n := 1
		for _, a := range s.spec.dim(i) {
			n *= s.mesh.sizes[s.mesh.axis(op, a)]
		}
		g.parts[i] = n
		g.block[i] = d / n
	}
	return g
}

// blockIndex returns, for the device at mesh index dev, the index of its
// block along each dimension.
func (s Sharding) blockIndex(dev int, rank int) []int {
	idx := make([]int, rank)
	for i := 0; i < rank; i++ {
		b := 0
		for _, a := range s.spec.dim(i) {
			k := s.mesh.axis("shard", a)
			b = b*s.mesh.sizes[k] + s.mesh.coord(dev, k)
		}
		idx[i] = b
	}
	return idx
}
