package shard

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Mesh arranges devices in an n-dimensional grid with named axes, row-major
// (the last axis varies fastest), like jax.make_mesh. Meshes are immutable
// and may use any subset of the device pool, so two disjoint meshes can
// coexist (a teacher on devices 0-3, a student on 4-7).
type Mesh struct {
	names   []string
	sizes   []int
	devices []*Device
	net     *meshNet // devices of other processes (see Install); nil in one process
}

// NewMesh returns a mesh over the first devices of the pool:
//
//	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
//
// It panics if the names are empty, repeated or mismatched with sizes, if
// a size is not positive, or if the pool has too few devices.
func NewMesh(sizes []int, names []string) *Mesh {
	m, err := newMesh(sizes, names)
	if err != nil {
		panic("shard.NewMesh: " + err.Error())
	}
	return m
}

// newMesh is NewMesh returning its error (which names no function: the
// caller, NewMesh or ParseMesh, does).
func newMesh(sizes []int, names []string) (*Mesh, error) {
	n, err := meshShape(sizes, names)
	if err != nil {
		return nil, err
	}
	devs := Devices()
	if n > len(devs) {
		return nil, fmt.Errorf("mesh %s needs %d devices, the pool has %d (set %s)", meshString(sizes, names), n, len(devs), DevicesEnv)
	}
	return (&Mesh{names: slices.Clone(names), sizes: slices.Clone(sizes), devices: devs[:n]}).connect(), nil
}

// NewMeshOn returns a mesh over the given devices (in row-major order). It
// panics if the count does not match the shape or a device repeats.
func NewMeshOn(devices []*Device, sizes []int, names []string) *Mesh {
	n, err := meshShape(sizes, names)
	if err != nil {
		panic("shard.NewMeshOn: " + err.Error())
	}
	if len(devices) != n {
		panic(fmt.Sprintf("shard.NewMeshOn: mesh %s needs %d devices, got %d", meshString(sizes, names), n, len(devices)))
	}
	seen := map[*Device]bool{}
	for _, d := range devices {
		if d == nil || seen[d] {
			panic(fmt.Sprintf("shard.NewMeshOn: device %v repeated or nil", d))
		}
		seen[d] = true
	}
	return (&Mesh{names: slices.Clone(names), sizes: slices.Clone(sizes), devices: slices.Clone(devices)}).connect()
}

// ParseMesh parses a mesh description such as "dp=4,tp=2" (from a flag,
// say) and builds it over the first devices of the pool. Its errors name
// ParseMesh and the description once, then what is wrong:
//
//	shard.ParseMesh: "dp=1024": mesh Mesh('dp': 1024) needs 1024 devices, the pool has 8 (set GONOX_DEVICES)
func ParseMesh(desc string) (*Mesh, error) {
	var sizes []int
	var names []string
	for _, part := range strings.Split(desc, ",") {
		name, size, ok := strings.Cut(strings.TrimSpace(part), "=")
		if !ok {
			return nil, fmt.Errorf("shard.ParseMesh: %q: want name=size, got %q", desc, part)
		}
		v, err := strconv.Atoi(strings.TrimSpace(size))
		if err != nil || v <= 0 {
			return nil, fmt.Errorf("shard.ParseMesh: %q: size of %q is not a positive integer", desc, name)
		}
		names = append(names, strings.TrimSpace(name))
		sizes = append(sizes, v)
	}
	m, err := newMesh(sizes, names)
	if err != nil {
		return nil, fmt.Errorf("shard.ParseMesh: %q: %w", desc, err)
	}
	return m, nil
}

// meshShape checks a mesh's sizes and names and returns its number of
// devices.
func meshShape(sizes []int, names []string) (int, error) {
	if len(sizes) == 0 && len(names) == 0 {
		return 0, fmt.Errorf("no axes: a mesh needs at least one")
	}
	if len(sizes) == 0 || len(sizes) != len(names) {
		return 0, fmt.Errorf("%d sizes for %d axis names", len(sizes), len(names))
	}
	n := 1
	for i, s := range sizes {
		if s <= 0 {
			return 0, fmt.Errorf("axis %q has size %d", names[i], s)
		}
		if names[i] == "" || slices.Index(names, names[i]) != i {
			return 0, fmt.Errorf("axis names %q must be non-empty and distinct", names)
		}
		if n > math.MaxInt/s {
			return 0, fmt.Errorf("mesh %s has more devices than an int counts", meshString(sizes, names))
		}
		n *= s
	}
	return n, nil
}

func meshString(sizes []int, names []string) string {
	parts := make([]string, len(sizes))
	for i := range sizes {
		parts[i] = fmt.Sprintf("'%s': %d", names[i], sizes[i])
	}
	return "Mesh(" + strings.Join(parts, ", ") + ")"
}

// String returns the mesh as JAX prints it: Mesh('dp': 4, 'tp': 2).
func (m *Mesh) String() string { return meshString(m.sizes, m.names) }

// AxisNames returns the axis names.
func (m *Mesh) AxisNames() []string { return slices.Clone(m.names) }

// Shape returns the axis sizes.
func (m *Mesh) Shape() []int { return slices.Clone(m.sizes) }

// Size returns the number of devices.
func (m *Mesh) Size() int { return len(m.devices) }

// Devices returns the devices in row-major order.
func (m *Mesh) Devices() []*Device { return slices.Clone(m.devices) }

// AxisSize returns the product of the sizes of the named axes. It panics on
// an unknown axis.
func (m *Mesh) AxisSize(axes ...string) int {
	n := 1
	for _, a := range axes {
		n *= m.sizes[m.axis("Mesh.AxisSize", a)]
	}
	return n
}

// axis returns the index of a named axis or panics naming op.
func (m *Mesh) axis(op, name string) int {
	i := slices.Index(m.names, name)
	if i < 0 {
		panic(fmt.Sprintf("%s: mesh %v has no axis %q", op, m, name))
	}
	return i
}

// Coords returns the mesh coordinates of the device at row-major index i.
// It panics if i is not in [0, Size()).
func (m *Mesh) Coords(i int) []int {
	if i < 0 || i >= len(m.devices) {
		panic(fmt.Sprintf("shard.Mesh.Coords: index %d out of range for %v", i, m))
	}
	c := make([]int, len(m.sizes))
	for k := len(m.sizes) - 1; k >= 0; k-- {
		c[k] = i % m.sizes[k]
		i /= m.sizes[k]
	}
	return c
}

// coord returns coordinate k of device i (what Coords(i)[k] is, without
// the slice).
func (m *Mesh) coord(i, k int) int {
	for j := len(m.sizes) - 1; j > k; j-- {
		i /= m.sizes[j]
	}
	return i % m.sizes[k]
}

// Index returns the row-major index of the device at the given coordinates.
// It panics unless there is one coordinate per axis, within its size.
func (m *Mesh) Index(coords []int) int {
	if len(coords) != len(m.sizes) {
		panic(fmt.Sprintf("shard.Mesh.Index: %d coordinates %v for %v", len(coords), coords, m))
	}
	i := 0
	for k, c := range coords {
		if c < 0 || c >= m.sizes[k] {
			panic(fmt.Sprintf("shard.Mesh.Index: coordinates %v out of range for %v", coords, m))
		}
		i = i*m.sizes[k] + c
	}
	return i
}

// Equal reports whether two meshes have the same axes, sizes and devices
// in the same order (meshes are compared by value, as in JAX). A nil mesh
// equals only nil.
func (m *Mesh) Equal(o *Mesh) bool {
	return m == o || (m != nil && o != nil && slices.Equal(m.names, o.names) && slices.Equal(m.sizes, o.sizes) && slices.Equal(m.devices, o.devices))
}

// Overlaps reports whether the two meshes share a device.
func (m *Mesh) Overlaps(o *Mesh) bool {
	for _, d := range m.devices {
		if slices.Contains(o.devices, d) {
			return true
		}
	}
	return false
}
