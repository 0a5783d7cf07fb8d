package shard

import (
	"fmt"
	"slices"
	"sync"

	"github.com/gonox/gonox/tensor"
)

// devEnv is one device's environment inside a Map call. It implements
// tensor.Env, so blocks know which mesh axes they vary over.
type devEnv struct {
	mesh   *Mesh
	dev    int // index in the mesh
	coords []int
	run    *run // the current run: forward, or a backward pass
	seq    int  // collectives issued in the current run

	mu     sync.Mutex
	locals map[uint64]*tensor.Local
	groups []axesGroup // the groups computed so far (group), guarded by mu

	// folds are the values whose products' cotangents this device
	// reduce-scatters as its backward pass computes them
	// (FoldPsumScatter), by storage; used on the device's goroutine only.
	folds map[foldKey]*FoldedGradient
	// gathered are the rows this device has gathered into operands its
	// group shares, which a later gather of the same rows may take as they
	// are (gatheredRows); used on the device's goroutine only.
	gathered []gatheredRows
}

func newEnvs(m *Mesh) []*devEnv {
	envs := make([]*devEnv, m.Size())
	for i := range envs {
		envs[i] = &devEnv{mesh: m, dev: i, coords: m.Coords(i), locals: map[uint64]*tensor.Local{}}
	}
	return envs
}

// AxisNames implements tensor.Env.
func (e *devEnv) AxisNames() []string { return e.mesh.names }

// Local implements tensor.Env: the interned mark for a mask.
func (e *devEnv) Local(mask uint64) *tensor.Local {
	e.mu.Lock()
	defer e.mu.Unlock()
	l := e.locals[mask]
	if l == nil {
		l = &tensor.Local{Env: e, Mask: mask}
		e.locals[mask] = l
	}
	return l
}

// PsumMask implements tensor.Env: the transpose of an implicit pvary.
func (e *devEnv) PsumMask(x *tensor.Tensor, mask uint64) *tensor.Tensor {
	return psum(e, x, e.axesOf(mask))
}

func (e *devEnv) maskOf(op string, axes []string) uint64 {
	var m uint64
	for _, a := range axes {
		m |= 1 << uint(e.mesh.axis(op, a))
	}
	return m
}

func (e *devEnv) axesOf(mask uint64) []string {
	var out []string
	for i, n := range e.mesh.names {
		if mask&(1<<uint(i)) != 0 {
			out = append(out, n)
		}
	}
	return out
}

func maskOf(x *tensor.Tensor) uint64 {
	if l := x.Local(); l != nil {
		return l.Mask
	}
	return 0
}

// group describes the devices a collective over some axes runs among: the
// devices that share this device's coordinates on every other axis.
type group struct {
	size    int
	rank    int   // this device's index over the axes, in the order given
	members []int // mesh indices of the group, by rank
	key     int   // identifies the group (its member 0)
	// meshRank maps a rank to the index over the axes in mesh order, the
	// order in which Ppermute's pairs count devices (as JAX does).
	meshRank []int
}

// axesGroup is a group of devEnv.groups with the axes it is over.
type axesGroup struct {
	axes []string
	g    group
}

// group returns this device's group over the axes (in the order given),
// computed once per list of axes: collectives and AxisIndex ask for it
// at every call. Its slices are shared: callers only read them.
func (e *devEnv) group(op string, axes []string) group {
	e.mu.Lock()
	for _, c := range e.groups {
		if slices.Equal(c.axes, axes) {
			e.mu.Unlock()
			return c.g
		}
	}
	e.mu.Unlock()
	g := e.newGroup(op, axes)
	e.mu.Lock()
	e.groups = append(e.groups, axesGroup{slices.Clone(axes), g})
	e.mu.Unlock()
	return g
}

func (e *devEnv) newGroup(op string, axes []string) group {
	if len(axes) == 0 {
		panic(fmt.Sprintf("%s: no mesh axes given", op))
	}
	idx := make([]int, len(axes))
	for i, a := range axes {
		idx[i] = e.mesh.axis(op, a)
		if slices.Index(axes, a) != i {
			panic(fmt.Sprintf("%s: mesh axis %q repeated in %q", op, a, axes))
		}
	}
	g := group{size: 1}
	for _, k := range idx {
		g.size *= e.mesh.sizes[k]
	}
	// Members by rank (listed order: first axis major).
	g.members = make([]int, g.size)
	g.meshRank = make([]int, g.size)
	sorted := slices.Clone(idx)
	slices.Sort(sorted)
	c := slices.Clone(e.coords)
	for r := 0; r < g.size; r++ {
		rem := r
		for i := len(idx) - 1; i >= 0; i-- {
			s := e.mesh.sizes[idx[i]]
			c[idx[i]] = rem % s
			rem /= s
		}
		g.members[r] = e.mesh.Index(c)
		mr := 0
		for _, k := range sorted {
			mr = mr*e.mesh.sizes[k] + c[k]
		}
		g.meshRank[r] = mr
		if g.members[r] == e.dev {
			g.rank = r
		}
	}
	g.key = g.members[0]
	return g
}

// Ctx is what fn receives in Map: the device it runs on, its position on
// the mesh, and the collectives. All collectives are differentiable.
//
// Collectives name the mesh axes they run over. With several axes, devices
// are ordered with the first axis listed as the most significant (so a
// tensor sharded P([]string{"tp", "dp"}) is gathered in block order by
// AllGather(x, Axes{"tp", "dp"}, ...)), except Ppermute, whose pairs count
// devices in mesh order as jax.lax.ppermute does; RingShift handles that.
type Ctx struct {
	env *devEnv
}

// Axes lists mesh axes, major to minor.
type Axes []string

// Device returns the device running this call.
func (c *Ctx) Device() *Device { return c.env.mesh.devices[c.env.dev] }

// Mesh returns the mesh.
func (c *Ctx) Mesh() *Mesh { return c.env.mesh }

// AxisIndex returns this device's index along the given axes, the first
// most significant: the index of the block it holds of a dimension sharded
// over those axes in that order (jax.lax.axis_index).
//
// The index is a Go int, so gonox cannot see that a tensor built from it
// differs between devices. A tensor made inside fn is taken to be the same
// on every device; if it is not (it depends on AxisIndex) and gradients flow
// through it, mark it with Vary, or gradients of replicated values that
// meet it will be summed at the wrong place.
func (c *Ctx) AxisIndex(axes ...string) int {
	return c.env.group("shard.Ctx.AxisIndex", axes).rank
}

// AxisSize returns the number of devices along the given axes
// (jax.lax.axis_size).
func (c *Ctx) AxisSize(axes ...string) int {
	return c.env.group("shard.Ctx.AxisSize", axes).size
}

// Vary marks x as varying over the given axes (jax.lax.pvary): the value is
// unchanged, and in backward its cotangent is summed over those axes. Use
// it before differentiating per device when you want to psum gradients
// yourself.
func (c *Ctx) Vary(x *tensor.Tensor, axes ...string) *tensor.Tensor {
	m := maskOf(x) | c.env.maskOf("shard.Ctx.Vary", axes)
	return tensor.Vary(x, c.env.Local(m))
}

// Local marks a tensor created inside fn (from constants, say) as a block
// of this device, invariant over every axis. Blocks that fn receives are
// already marked.
func (c *Ctx) Local(x *tensor.Tensor) *tensor.Tensor {
	if x.Local() != nil {
		return x
	}
	return tensor.Vary(x, c.env.Local(0))
}
