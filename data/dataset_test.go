package data

import (
	"fmt"
	"os"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/tensor"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
	os.Exit(0) // not reached: VerifyTestMain exits
}

// rowsDataset returns n examples whose features are f32[n,2,3] with every
// element of row i equal to i + j/10 (j the position in the row) and whose
// labels are i32[n] with label i*7.
func rowsDataset(n int) *InMemory {
	x := make([]float32, n*6)
	y := make([]int32, n)
	for i := range n {
		for j := range 6 {
			x[i*6+j] = float32(i) + float32(j)/10
		}
		y[i] = int32(i * 7)
	}
	return FromTensors(tensor.FromFloat32(x, n, 2, 3), tensor.FromInt32(y, n))
}

// naiveRows gathers rows of a float32 or int32 tensor with loops, as the
// reference for Take.
func naiveRows(t *tensor.Tensor, idx []int) []float64 {
	all := t.Float64s()
	row := t.Size() / t.Dim(0)
	var out []float64
	for _, i := range idx {
		out = append(out, all[i*row:(i+1)*row]...)
	}
	return out
}

func TestInMemoryBatch(t *testing.T) {
	d := rowsDataset(10)
	for _, idx := range [][]int{
		{0}, {9}, {3, 1, 4, 1, 5}, {2, 3, 4, 5}, {7, 8, 9}, {9, 8, 7}, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, {},
	} {
		t.Run(fmt.Sprint(idx), func(t *testing.T) {
			b, err := d.Batch(idx)
			require.NoError(t, err)
			assert.Equal(t, []int{len(idx), 2, 3}, b.X.Shape())
			assert.Equal(t, []int{len(idx)}, b.Y.Shape())
			assert.Equal(t, tensor.Float32, b.X.DType())
			assert.Equal(t, tensor.Int32, b.Y.DType())
			assert.Equal(t, naiveRows(d.X, idx), nilIfEmpty(b.X.Float64s()))
			assert.Equal(t, naiveRows(d.Y, idx), nilIfEmpty(b.Y.Float64s()))
			assert.Equal(t, idx, b.Indices)
			assert.Equal(t, len(idx), b.Size())
		})
	}
}

func nilIfEmpty(v []float64) []float64 {
	if len(v) == 0 {
		return nil
	}
	return v
}

func TestInMemoryNoLabels(t *testing.T) {
	d := FromTensors(tensor.Arange(5), nil)
	b, err := d.Batch([]int{4, 0})
	require.NoError(t, err)
	assert.Nil(t, b.Y)
	assert.Equal(t, []int32{4, 0}, b.X.Int32s())
	tr, te := d.SplitAt(2)
	assert.Nil(t, tr.Y)
	assert.Nil(t, te.Y)
}

func TestInMemoryPanics(t *testing.T) {
	d := rowsDataset(4)
	assert.PanicsWithValue(t, "data.InMemory.Batch: index 4 (position 1) out of range [0,4)", func() { _, _ = d.Batch([]int{0, 4}) })
	assert.PanicsWithValue(t, "data.InMemory.Batch: index -1 (position 0) out of range [0,4)", func() { _, _ = d.Batch([]int{-1}) })
	assert.PanicsWithValue(t, "data.InMemory.Subset: index 7 (position 0) out of range [0,4)", func() { d.Subset([]int{7}) })
	assert.PanicsWithValue(t, "data.FromTensors: f32[4,2,3] and i32[3]: features and targets must have the same number of rows",
		func() { FromTensors(d.X, tensor.FromInt32([]int32{1, 2, 3})) })
	assert.PanicsWithValue(t, "data.FromTensors: features must have a batch dimension, got f32[]",
		func() { FromTensors(tensor.Scalar(1), nil) })
	assert.PanicsWithValue(t, "data.InMemory.SplitAt: 5 out of range [0,4]", func() { d.SplitAt(5) })
	assert.PanicsWithValue(t, "data.InMemory.Split: test fraction 1.5 outside [0,1]", func() { d.Split(tensor.NewKey(0), 1.5) })
	assert.PanicsWithValue(t, "data.InMemory.ClassCounts: labels must be an int32 vector, got <nil>", func() { FromTensors(d.X, nil).ClassCounts(3) })
}

func TestInMemorySplit(t *testing.T) {
	d := rowsDataset(101)
	for _, tc := range []struct {
		frac      float64
		nTrain, n int
	}{{0, 101, 0}, {0.2, 81, 20}, {0.25, 76, 25}, {0.5, 50, 51}, {1, 0, 101}} {
		t.Run(fmt.Sprint(tc.frac), func(t *testing.T) {
			tr, te := d.Split(tensor.NewKey(3), tc.frac)
			require.Equal(t, tc.nTrain, tr.Len())
			require.Equal(t, tc.n, te.Len())
			// Rows stay paired with their labels, and the two sides are
			// disjoint and cover everything: label/7 recovers the index.
			var seen []int
			for _, part := range []*InMemory{tr, te} {
				x, y := part.X.Float32s(), part.Y.Int32s()
				for i, lab := range y {
					require.Equal(t, float32(lab/7), x[i*6])
					seen = append(seen, int(lab/7))
				}
			}
			slices.Sort(seen)
			assert.Equal(t, seq(101), seen)
		})
	}
	// The same key gives the same split; another key another one.
	a, _ := d.Split(tensor.NewKey(3), 0.2)
	b, _ := d.Split(tensor.NewKey(3), 0.2)
	c, _ := d.Split(tensor.NewKey(4), 0.2)
	assert.Equal(t, a.Y.Int32s(), b.Y.Int32s())
	assert.NotEqual(t, a.Y.Int32s(), c.Y.Int32s())
	// The shuffle is tensor.Permutation with that key.
	perm := ints(tensor.Permutation(tensor.NewKey(3), 101))
	assert.Equal(t, naiveRows(d.Y, perm[:81]), a.Y.Float64s())
}

func TestInMemorySplitAtSubsetFlatten(t *testing.T) {
	d := rowsDataset(5)
	a, b := d.SplitAt(2)
	assert.Equal(t, naiveRows(d.X, []int{0, 1}), a.X.Float64s())
	assert.Equal(t, naiveRows(d.Y, []int{2, 3, 4}), b.Y.Float64s())
	s := d.Subset([]int{4, 4, 0})
	assert.Equal(t, naiveRows(d.X, []int{4, 4, 0}), s.X.Float64s())
	f := d.Flatten()
	assert.Equal(t, []int{5, 6}, f.X.Shape())
	assert.Equal(t, d.X.Float32s(), f.X.Float32s())
	assert.Equal(t, d.Y, f.Y)
}

func TestClassCounts(t *testing.T) {
	d := FromTensors(tensor.Zeros(tensor.Float32, 6, 1), tensor.FromInt32([]int32{0, 2, 2, 1, 2, 5}))
	assert.Equal(t, []int{1, 1, 3}, d.ClassCounts(3))
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

func TestSlice(t *testing.T) {
	d := rowsDataset(10)
	s := Slice(d, 3, 8)
	require.Equal(t, 5, s.Len())
	got, err := s.Batch([]int{4, 0})
	require.NoError(t, err)
	want, _ := d.Batch([]int{7, 3})
	assert.Equal(t, want.X.Float32s(), got.X.Float32s())
	assert.Equal(t, want.Y.Ints(), got.Y.Ints())
	assert.Equal(t, []int{4, 0}, got.Indices)
	assert.Panics(t, func() { _, _ = s.Batch([]int{5}) })
	assert.Panics(t, func() { Slice(d, 4, 11) })
	assert.Equal(t, 0, Slice(d, 10, 10).Len())
}
