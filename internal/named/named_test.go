package named

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestLike(t *testing.T) {
	x := tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, 2, 3), "batch", "embed")
	fresh := func() *tensor.Tensor { return tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3) }

	y := fresh()
	z := Like(y, x)
	require.NotSame(t, y, z)
	assert.Equal(t, []string{"batch", "embed"}, z.LogicalAxes())
	assert.Equal(t, []float32{1, 2, 3, 4, 5, 6}, z.Float32s(), "the named header keeps the values")
	assert.True(t, y.IsDonated(), "the unnamed header was left holding the storage")

	cases := []struct {
		name string
		y, x *tensor.Tensor
	}{
		{"x unnamed", fresh(), tensor.Zeros(tensor.Float32, 2, 3)},
		{"y named", tensor.WithLogicalAxes(fresh(), "a", "b"), x},
		{"other rank", tensor.FromFloat32([]float32{1, 2}, 2), x},
		{"nil x", fresh(), nil},
		{"y is x", x, x},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got := Like(c.y, c.x)
			assert.Same(t, c.y, got)
			assert.False(t, got.IsDonated())
		})
	}
	assert.Nil(t, Like(nil, x))

	// A traced result is named but not donated: its value belongs to the
	// trace.
	tr := tensor.NewTrace()
	yt := tensor.MulScalar(tr.Leaf(fresh()), 2)
	zt := Like(yt, x)
	assert.Equal(t, []string{"batch", "embed"}, zt.LogicalAxes())
	assert.False(t, yt.IsDonated())
}
