package tensor

import (
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The engine's allocations per op: every op result on every device of
// shard.Map pays them, so each is counted here.

// A header marked for a device and carrying nothing else shares its mark's
// record (Local.rec): marking, and the marked results of ops, make no
// record of their own.
func TestMarkRecordIsShared(t *testing.T) {
	l := &Local{Env: testEnv{}, Mask: 1}
	x, y := FromFloat32([]float32{1, 2, 3}, 3), FromFloat32([]float32{4, 5, 6}, 3)
	a, b := WithLocal(x, l), WithLocal(y, l)
	require.Same(t, l.rec(), a.ext)
	require.Same(t, l.rec(), b.ext)
	require.Same(t, l.rec(), Add(a, b).ext, "an op result")
	require.Same(t, l.rec(), Reshape(a, 1, 3).ext, "a view")
	named := WithLogicalAxes(a, "embed")
	require.Equal(t, []string{"embed"}, named.LogicalAxes())
	require.Same(t, l, named.Local())
	require.Same(t, l.rec(), WithLogicalAxes(named).ext, "names removed")
	require.Equal(t, 1.0, testing.AllocsPerRun(20, func() { WithLocal(x, l) }), "the header alone")
	require.Equal(t, []float32{5, 7, 9}, Add(a, b).Float32s())

	// Names: one record of the mark for equal names, however they are
	// set; none shared between marks or different names.
	names := []string{"embed"}
	n1 := WithLogicalAxes(b, names...)
	names[0] = "changed" // WithLogicalAxes copied the caller's names
	require.Same(t, named.ext, n1.ext)
	require.Equal(t, []string{"embed"}, n1.LogicalAxes())
	require.Same(t, named.ext, WithLocal(WithLogicalAxes(x, "embed"), l).ext, "marking a named value")
	require.NotSame(t, named.ext, WithLogicalAxes(a, "mlp").ext)
	other := &Local{Env: testEnv{}, Mask: 1}
	require.NotSame(t, named.ext, WithLogicalAxes(WithLocal(x, other), "embed").ext)
	require.Equal(t, 1.0, testing.AllocsPerRun(20, func() { WithLogicalAxes(a, "embed") }), "the header alone")
	y2 := Add(a, b)
	y2.setAxes(named.axes())
	require.Same(t, named.ext, y2.ext, "setAxes")
	z := WithLogicalAxes(Add(x, y), "embed")
	z.setLocal(l)
	require.Same(t, named.ext, z.ext, "setLocal")
}

// Devices share nothing, but a mark's records may be asked for from
// several goroutines at once (the host assembling a Map's output): every
// caller gets a record with its names, and equal names one record once
// kept.
func TestMarkRecordsConcurrent(t *testing.T) {
	l := &Local{Env: testEnv{}, Mask: 1}
	var wg sync.WaitGroup
	got := make([][]*tensorExt, 4)
	for g := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 40 {
				names := []string{fmt.Sprint("n", i%20)}
				got[g] = append(got[g], l.recNamed(names), l.rec())
			}
		}()
	}
	wg.Wait()
	for _, recs := range got {
		for i, e := range recs {
			require.Same(t, l, e.local)
			if i%2 == 1 {
				require.Same(t, l.rec(), e)
				continue
			}
			require.Equal(t, []string{fmt.Sprint("n", (i/2)%20)}, e.axes)
		}
	}
	require.Len(t, *l.named.Load(), maxNamedRecs)
	kept := (*l.named.Load())[0]
	require.Same(t, kept, l.recNamed(slices.Clone(kept.axes)))
}

// A traced op keeps no reference to its operand slice (the node copies
// the operands), so a caller's variadic slice stays on its stack: the
// node, the result's header and storage, and the traced header with its
// result slice (in the node's allocation when the trace recycles its
// intermediates), nothing more.
func TestTracedApplyKeepsNoOperandSlice(t *testing.T) {
	for _, recycle := range []bool{false, true} {
		tr := NewTrace()
		want := 5.0
		if recycle {
			tr.RecycleIntermediates()
			want = 3
		}
		x := tr.Leaf(FromFloat32([]float32{1, 2, 3, 4}, 2, 2))
		y := tr.Leaf(FromFloat32([]float32{1, 1, 1, 1}, 2, 2))
		require.Equal(t, want, testing.AllocsPerRun(50, func() { Add(x, y) }), "recycle %v", recycle)
		require.Equal(t, []float32{2, 3, 4, 5}, Add(x, y).Float32s())
	}
}

// A reshape of a value of no trace, level or placement (a VJP's reshape
// of a cotangent, an op on a device's block) is one allocation: the view's
// header with its shape; host tensors made from Go slices are two, the
// header with its shape and the data (one for a few indices).
func TestPlainReshapeAndHostTensorAllocations(t *testing.T) {
	x := FromFloat32(make([]float32, 24), 2, 3, 4)
	require.Equal(t, 1.0, testing.AllocsPerRun(50, func() { Reshape(x, 6, -1) }))
	require.Equal(t, 1.0, testing.AllocsPerRun(50, func() { reshapeTo(x, []int{4, 6}) }))
	require.Equal(t, []int{6, 4}, Reshape(x, 6, -1).Shape())
	require.Equal(t, 1.0, testing.AllocsPerRun(50, func() { FromInts([]int{1, 2, 3, 4}, 2, 2) }), "a few indices")
	require.Equal(t, 2.0, testing.AllocsPerRun(50, func() { FromInts(make([]int, 9)) }))
	require.Equal(t, []int32{1, -2, 3}, FromInts([]int{1, -2, 3}).Int32s())
	require.Equal(t, []int{0}, FromInts(nil).Shape())
	require.Equal(t, 2.0, testing.AllocsPerRun(50, func() { FromFloat32([]float32{1, 2}) }))
	require.Equal(t, []int{2}, FromFloat32([]float32{1, 2}).Shape())
	require.Equal(t, []int{1, 1, 1, 1, 2}, FromFloat32([]float32{1, 2}, 1, 1, 1, 1, 2).Shape(), "rank above 4")
	require.Equal(t, []int{}, FromFloat32([]float32{7}, []int{}...).Shape(), "a scalar")
}

// A device's blocks take the VJPs' direct paths (matmul's products, the
// fused backward ops) as unmarked values do: the bits and the mark of the
// result Apply's dispatch gives, the union of the operands' marks.
func TestMarkedOperandsDirectPaths(t *testing.T) {
	env := testEnv{}
	l1, l2 := env.Local(1), env.Local(2)
	x := WithLocal(FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3), l1)
	y := WithLocal(FromFloat32([]float32{0.5, -1, 2, 0.25, 3, -2}, 2, 3), l2)
	for _, tc := range []struct{ tx, ty bool }{{false, true}, {true, false}} {
		got, want := matmulT(x, y, tc.tx, tc.ty, Float32), MatMulT(x, y, tc.tx, tc.ty)
		require.Equal(t, want.Float32s(), got.Float32s())
		require.Equal(t, want.Shape(), got.Shape())
		require.Equal(t, uint64(3), got.Local().Mask, "the union of the marks")
		require.Equal(t, want.Local().Mask, got.Local().Mask)
	}
	// The direct path: the result's header and storage, no params, operand
	// copy or dispatch (one mark: testEnv makes a new union at each call).
	y1 := WithLocal(y, l1)
	require.Equal(t, 2.0, testing.AllocsPerRun(20, func() { matmulT(x, y1, false, true, Float32) }))
	unmarked := matmulT(FromFloat32([]float32{1, 2}, 1, 2), FromFloat32([]float32{3, 4}, 1, 2), false, true, Float32)
	require.Nil(t, unmarked.ext)
	require.Equal(t, []float32{11}, unmarked.Float32s())

	got, want := applyBwd(tanhBwdOp, x, WithLocal(y, l1)), Apply(tanhBwdOp, nil, x, WithLocal(y, l1))
	require.Equal(t, want.Float32s(), got.Float32s())
	require.Same(t, l1, got.Local())
	got = applyBwd(tanhBwdOp, x, y)
	require.Equal(t, uint64(3), got.Local().Mask)
	require.Equal(t, want.Float32s(), got.Float32s())

	// Writing over an operand keeps its header: only when the result's
	// mark is that operand's.
	plain := FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	require.True(t, markedOver(x, plain))
	require.True(t, markedOver(x, WithLocal(plain, l1)))
	require.False(t, markedOver(x, y), "the union varies over more axes")
	require.False(t, markedOver(plain, x))
	require.True(t, markedOver(plain, plain))
}
