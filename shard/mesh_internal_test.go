package shard

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

// coord is Coords(i)[k] without the slice, on meshes of one to three axes.
func TestMeshCoord(t *testing.T) {
	for _, sizes := range [][]int{{8}, {2, 4}, {4, 2}, {2, 2, 2}, {1, 3, 2}} {
		names := []string{"a", "b", "c"}[:len(sizes)]
		m := NewMesh(sizes, names)
		for i := range m.Size() {
			c := m.Coords(i)
			for k := range sizes {
				assert.Equal(t, c[k], m.coord(i, k), "mesh %v device %d axis %d", sizes, i, k)
			}
		}
	}
}
