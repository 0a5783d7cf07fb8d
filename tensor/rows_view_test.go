package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// RowsView is rows of a matrix over its storage: the values of those
// rows, writes through the view land in the matrix, and the view keeps the
// storage when the matrix's header is donated; anything but a float32
// matrix of host storage, or rows outside it, panics naming the op.
func TestRowsView(t *testing.T) {
	for _, tc := range []struct {
		name   string
		r0, r1 int
		want   []float32
	}{
		{"first row", 0, 1, []float32{0, 1, 2}},
		{"middle rows", 1, 3, []float32{3, 4, 5, 6, 7, 8}},
		{"all", 0, 4, []float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x := tensor.Empty(tensor.Float32, 4, 3)
			for i := range x.BorrowFloat32() {
				x.BorrowFloat32()[i] = float32(i)
			}
			v := tensor.RowsView(x, tc.r0, tc.r1)
			assert.Equal(t, []int{tc.r1 - tc.r0, 3}, v.Shape())
			assert.Equal(t, tc.want, v.Float32s())
			v.BorrowFloat32()[0] = -1
			assert.Equal(t, float32(-1), x.BorrowFloat32()[tc.r0*3], "a write through the view")
			assert.Equal(t, float32(-1), v.Float32s()[0])
		})
	}
	// The view holds the storage: donating the matrix's header does not
	// hand it out again (storage large enough for the allocator cache).
	x := tensor.Empty(tensor.Float32, 256, 1024)
	v := tensor.RowsView(x, 32, 64)
	base := &x.BorrowFloat32()[0]
	tensor.Donate(x)
	for range 4 {
		y := tensor.Empty(tensor.Float32, 256, 1024)
		require.NotSame(t, &y.BorrowFloat32()[0], base, "storage handed out while a view holds it")
	}
	tensor.Donate(v)
	y := tensor.Empty(tensor.Float32, 256, 1024)
	assert.Same(t, &y.BorrowFloat32()[0], base, "storage back in the cache once the view is donated")
	for _, bad := range []struct {
		name   string
		x      *tensor.Tensor
		r0, r1 int
		msg    string
	}{
		{"vector", tensor.Normal(tensor.NewKey(1), 4), 0, 1, "tensor.RowsView: f32[4]: want a float32 matrix of untraced host storage"},
		{"float64", tensor.Zeros(tensor.Float64, 2, 2), 0, 1, "tensor.RowsView: f64[2,2]: want a float32 matrix of untraced host storage"},
		{"past the end", tensor.Normal(tensor.NewKey(1), 4, 3), 2, 5, "tensor.RowsView: rows [2, 5) of f32[4,3]"},
		{"empty", tensor.Normal(tensor.NewKey(1), 4, 3), 2, 2, "tensor.RowsView: rows [2, 2) of f32[4,3]"},
	} {
		t.Run(bad.name, func(t *testing.T) {
			require.PanicsWithValue(t, bad.msg, func() { tensor.RowsView(bad.x, bad.r0, bad.r1) })
		})
	}
}
