package shard_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
)

func TestMeshCoordsIndex(t *testing.T) {
	m := shard.NewMesh([]int{2, 3}, []string{"a", "b"})
	for i := range m.Size() {
		c := m.Coords(i)
		assert.Equal(t, []int{i / 3, i % 3}, c)
		assert.Equal(t, i, m.Index(c))
	}
	for _, tc := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"coords past the end", func() { m.Coords(6) }, "shard.Mesh.Coords: index 6 out of range for Mesh('a': 2, 'b': 3)"},
		{"negative coords", func() { m.Coords(-1) }, "shard.Mesh.Coords: index -1 out of range for Mesh('a': 2, 'b': 3)"},
		{"too few coordinates", func() { m.Index([]int{5}) }, "shard.Mesh.Index: 1 coordinates [5] for Mesh('a': 2, 'b': 3)"},
		{"coordinate out of range", func() { m.Index([]int{0, 3}) }, "shard.Mesh.Index: coordinates [0 3] out of range for Mesh('a': 2, 'b': 3)"},
	} {
		t.Run(tc.name, func(t *testing.T) { assert.PanicsWithValue(t, tc.msg, tc.f) })
	}
}

func TestMeshEqualNil(t *testing.T) {
	m := shard.NewMesh([]int{2}, []string{"dp"})
	var none *shard.Mesh
	assert.False(t, m.Equal(none))
	assert.False(t, none.Equal(m))
	assert.True(t, none.Equal(none))
	assert.False(t, shard.Sharding{}.Equal(shard.Replicated(m)), "the zero Sharding equals no placed one")
}

func TestParseMesh(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		sizes []int
		names []string
		err   string
	}{
		{desc: "dp=4,tp=2", sizes: []int{4, 2}, names: []string{"dp", "tp"}},
		{desc: " dp = 4 , tp = 2 ", sizes: []int{4, 2}, names: []string{"dp", "tp"}},
		{desc: "dp=0", err: `shard.ParseMesh: "dp=0": size of "dp" is not a positive integer`},
		{desc: "dp", err: `shard.ParseMesh: "dp": want name=size, got "dp"`},
		{desc: "dp=4,dp=2", err: `shard.ParseMesh: "dp=4,dp=2": axis names ["dp" "dp"] must be non-empty and distinct`},
		{desc: "dp=1024", err: `shard.ParseMesh: "dp=1024": mesh Mesh('dp': 1024) needs 1024 devices`},
		// Products that overflow an int: 2^64 wrapped to 0 devices (a mesh
		// of nothing), 3037000500^2 to a negative count.
		{desc: "dp=4294967296,tp=4294967296", err: `shard.ParseMesh: "dp=4294967296,tp=4294967296": mesh Mesh('dp': 4294967296, 'tp': 4294967296) has more devices than an int counts`},
		{desc: "a=65536,b=65536,c=65536,d=65536", err: `shard.ParseMesh: "a=65536,b=65536,c=65536,d=65536": mesh Mesh('a': 65536, 'b': 65536, 'c': 65536, 'd': 65536) has more devices than an int counts`},
		{desc: "dp=3037000500,tp=3037000500", err: "has more devices than an int counts"},
		{desc: "dp=9223372036854775807,tp=1", err: `shard.ParseMesh: "dp=9223372036854775807,tp=1": mesh Mesh('dp': 9223372036854775807, 'tp': 1) needs 9223372036854775807 devices`},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			m, err := shard.ParseMesh(tc.desc)
			if tc.err != "" {
				require.Error(t, err)
				assert.Contains(t, err.Error(), tc.err)
				// The error names its origin once: ParseMesh, not the
				// NewMesh it builds the mesh with.
				assert.Equal(t, 1, strings.Count(err.Error(), "shard."), err.Error())
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tc.sizes, m.Shape())
			assert.Equal(t, tc.names, m.AxisNames())
		})
	}
}

// NewSharding checks a spec's axes in place: each must name an axis of the
// mesh and appear once, in one dimension or across several.
func TestNewShardingAxes(t *testing.T) {
	m := shard.NewMesh([]int{2, 2, 2}, []string{"a", "b", "c"})
	for _, tc := range []struct {
		name string
		spec shard.Spec
		msg  string // "" for a valid spec
	}{
		{"one axis a dimension", shard.P("a", "b", "c"), ""},
		{"two axes in a dimension", shard.P([]string{"a", "b"}, nil, "c"), ""},
		{"replicated", shard.P(nil, nil), ""},
		{"across dimensions", shard.P("a", "a"), `shard.NewSharding: spec PartitionSpec('a', 'a') uses mesh axis "a" twice`},
		{"within a dimension", shard.P([]string{"b", "c", "b"}), `shard.NewSharding: spec PartitionSpec(('b', 'c', 'b'),) uses mesh axis "b" twice`},
		{"later dimension", shard.P([]string{"a", "c"}, nil, []string{"b", "c"}), `shard.NewSharding: spec PartitionSpec(('a', 'c'), None, ('b', 'c')) uses mesh axis "c" twice`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.msg == "" {
				s := shard.NewSharding(m, tc.spec)
				assert.Equal(t, tc.spec, s.Spec())
				return
			}
			assert.PanicsWithValue(t, tc.msg, func() { shard.NewSharding(m, tc.spec) })
		})
	}
}
