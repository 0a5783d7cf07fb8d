package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// TestWithLocals checks that WithLocals gives every block what WithLocal
// gives it (the mark, the logical axes, the values, no change to the
// operand), passes nil entries through, and makes its headers together.
func TestWithLocals(t *testing.T) {
	env := newFakeEnv([]string{"x"}, []float32{2})
	loc := env.Local(1)
	named := tensor.WithLogicalAxes(tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2), "batch", "")
	plain := tensor.FromFloat32([]float32{5, 6}, 2)
	marked := tensor.WithLocal(plain, loc)
	for _, tc := range []struct {
		name string
		l    *tensor.Local
	}{{"unmark", nil}, {"mark", loc}} {
		t.Run(tc.name, func(t *testing.T) {
			xs := []*tensor.Tensor{named, nil, plain, marked}
			got := tensor.WithLocals(xs, tc.l)
			require.Len(t, got, len(xs))
			assert.Nil(t, got[1])
			for i, x := range xs {
				if x == nil {
					continue
				}
				want := tensor.WithLocal(x, tc.l)
				assert.NotSame(t, x, got[i])
				assert.Equal(t, want.Local(), got[i].Local(), "block %d", i)
				assert.Equal(t, want.LogicalAxes(), got[i].LogicalAxes(), "block %d", i)
				assert.Equal(t, x.Float32s(), got[i].Float32s(), "block %d", i)
				assert.Equal(t, x.Shape(), got[i].Shape(), "block %d", i)
			}
			assert.Equal(t, []string{"batch", ""}, named.LogicalAxes(), "operand unchanged")
			assert.Nil(t, plain.Local(), "operand unchanged")
			assert.Same(t, loc, marked.Local(), "operand unchanged")
		})
	}
	xs := []*tensor.Tensor{named, plain, named, plain}
	allocs := testing.AllocsPerRun(20, func() { tensor.WithLocals(xs, nil) })
	assert.LessOrEqual(t, allocs, 2.0, "the slice and the headers: two allocations")
	assert.Panics(t, func() { tensor.WithLocals([]*tensor.Tensor{tensor.Tanh(tensor.NewTrace().Leaf(plain))}, nil) }, "a traced block")
}
