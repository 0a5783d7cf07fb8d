package tensor

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestStepGroup: a StepGroup hands each parameter's PieceStep every element
// of its whole gradient exactly once, in pieces starting at multiples of 16
// of the parameter's elements (as StepFrom's split), giving the bits of
// AdamSteps and of StepFrom one parameter at a time. With the split
// threshold as it is, a parameter large enough to split is stepped within
// Add and the small ones wait for Flush; with a lower threshold the small
// ones are stepped together once enough of them wait, split over the cores
// (more pieces than parameters). At GOMAXPROCS 1 every parameter is
// stepped within Add. The gradients are
// float32 tensors of several sizes, an empty one and a view.
func TestStepGroup(t *testing.T) {
	r := rand.New(rand.NewPCG(21, 22))
	c := AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1 / 0.19, C2: 1 / 0.001999, Eps: 1e-8, Post: -0.003}
	shapes := [][]int{{37, 70}, {3}, {512, 1024}, {0}, {40, 50}, {1000}, {128, 128}, {64, 33}, {17}}
	const view = 4 // shapes[view]'s gradient is a transposed view
	ps, gs, mus, nus := make([]*Tensor, len(shapes)), make([]*Tensor, len(shapes)), make([]*Tensor, len(shapes)), make([]*Tensor, len(shapes))
	cs := make([]AdamCoeffs, len(shapes))
	for i, s := range shapes {
		ps[i], mus[i], nus[i], cs[i] = normalTensor(r, s...), normalTensor(r, s...), Abs(normalTensor(r, s...)), c
		gs[i] = normalTensor(r, s...)
	}
	gs[view] = Transpose(normalTensor(r, 50, 40), 1, 0)
	wp, wm, wv := AdamSteps(ps, gs, mus, nus, cs)
	for _, minWork := range []int{parallelMinWork, 1 << 14} {
		t.Run(fmt.Sprintf("minWork=%d", minWork), func(t *testing.T) {
			old := parallelMinWork
			parallelMinWork = minWork
			defer func() { parallelMinWork = old }()
			var mu sync.Mutex
			seen := make([][]int, len(shapes))
			pieces := 0
			var group StepGroup
			p2s, m2s, v2s := make([]*Tensor, len(shapes)), make([]*Tensor, len(shapes)), make([]*Tensor, len(shapes))
			for i := range shapes {
				p2, m2, v2, step := AdamStepIntoOverMomentsLater(nil, ps[i], mus[i], nus[i], c)
				p2s[i], m2s[i], v2s[i] = p2, m2, v2
				seen[i] = make([]int, ps[i].Size())
				group.Add(func(at int, g []float32) {
					mu.Lock()
					assert.Zero(t, at%16, "piece of parameter %d at %d", i, at)
					for k := range g {
						seen[i][at+k]++
					}
					pieces++
					mu.Unlock()
					step(at, g)
				}, gs[i])
			}
			stepped := func(i int) bool { return len(seen[i]) > 0 && seen[i][0] > 0 }
			switch {
			case runtime.GOMAXPROCS(0) < 2:
				for i := range shapes {
					assert.True(t, stepped(i) || ps[i].Size() == 0, "parameter %d stepped within Add at GOMAXPROCS 1", i)
				}
			case minWork == old:
				assert.True(t, stepped(2), "the large parameter stepped within Add")
				assert.False(t, stepped(0) || stepped(1) || stepped(8), "small parameters stepped before Flush")
			default:
				assert.True(t, stepped(0) && stepped(1), "small parameters stepped once enough work waited")
				assert.False(t, stepped(8), "the last small parameter stepped before Flush")
			}
			group.Flush()
			if minWork != old && runtime.GOMAXPROCS(0) > 1 {
				assert.Greater(t, pieces, len(shapes)-1, "pieces of the split groups")
			}
			for i, s := range shapes {
				for k, n := range seen[i] {
					require.Equal(t, 1, n, "element %d of parameter %d %v", k, i, s)
				}
				require.True(t, sameBits(wp[i].Float32s(), p2s[i].Float32s()), "p of %v", s)
				require.True(t, sameBits(wm[i].Float32s(), m2s[i].Float32s()), "mu of %v", s)
				require.True(t, sameBits(wv[i].Float32s(), v2s[i].Float32s()), "nu of %v", s)
			}
			group.Flush() // empty: nothing runs twice
			for i := range shapes {
				for k, n := range seen[i] {
					require.Equal(t, 1, n, "element %d of parameter %d after a second Flush", k, i)
				}
			}
		})
	}
}

// TestStepGroupPanics: the group's operands are checked in Add as
// StepFrom checks them, naming the method; a waiting step's panic reaches
// the caller of the call that runs it (Flush, or Add once enough work
// waits: split over the cores), and the group is empty afterwards.
func TestStepGroupPanics(t *testing.T) {
	const op = "tensor.(*StepGroup).Add"
	var group StepGroup
	assert.PanicsWithValue(t, op+": nil step", func() { group.Add(nil, Zeros(Float32, 3)) })
	assert.PanicsWithValue(t, op+": operand g is nil", func() { group.Add(func(int, []float32) {}, nil) })
	assert.PanicsWithValue(t, op+": i32[4]: want an untraced, unbatched float32 host gradient",
		func() { group.Add(func(int, []float32) {}, Zeros(Int32, 4)) })
	for _, split := range []bool{false, true} {
		old := parallelMinWork
		if split {
			parallelMinWork = 64 // the second Add has the work of a split
		}
		ran := 0
		group.Add(func(int, []float32) { ran++ }, Zeros(Float32, 8))
		fail := func() { group.Add(func(int, []float32) { panic("a failing step") }, Zeros(Float32, 8)) }
		if split || runtime.GOMAXPROCS(0) < 2 {
			assert.PanicsWithValue(t, "a failing step", fail, "split %v", split)
		} else {
			fail()
			assert.PanicsWithValue(t, "a failing step", group.Flush)
		}
		parallelMinWork = old
		assert.Equal(t, 1, ran, "split %v", split)
		group.Flush() // empty after the panic
		assert.Equal(t, 1, ran, "split %v: the group is empty after a panic", split)
	}
}
