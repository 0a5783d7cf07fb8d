package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The row-parallel gathers and scatters give the generic loops' bits,
// serial and split over goroutines (repeated, negative and, for the
// segment ops, out-of-range indices included).
func TestRowsParallelMatchesLoops(t *testing.T) {
	rng := rand.New(rand.NewPCG(84, 1))
	const n, m, inner = 50, 300, 24
	src, upd := randTensor(rng, n, inner), randTensor(rng, m, inner)
	idx := make([]int32, m)
	seg := make([]int32, m)
	for j := range idx {
		idx[j] = int32(rng.IntN(2*n) - n)  // [-n, n): wraps
		seg[j] = int32(rng.IntN(n+10) - 5) // some outside [0, n): dropped
	}
	ids, segs := FromInt32(idx, m), FromInt32(seg, m)
	want := func() []*Tensor {
		take := make([]float32, m*inner)
		takeKernel(take, src.f32(), idx, 1, n, inner)
		scat := make([]float32, n*inner)
		scatterAddKernel(scat, upd.f32(), idx, 1, n, inner)
		ss := make([]float32, n*inner)
		segmentSumKernel(ss, upd.f32(), seg, n, inner)
		st := make([]float32, m*inner)
		segmentTakeKernel(st, src.f32(), seg, n, inner)
		return []*Tensor{FromFloat32(take, m, inner), FromFloat32(scat, n, inner), FromFloat32(ss, n, inner), FromFloat32(st, m, inner)}
	}()
	run := func() []*Tensor {
		return []*Tensor{Take(src, ids, 0), takeGrad(upd, ids, src.shape, 0), SegmentSum(upd, segs, n),
			Apply(segmentTakeOp, nil, src, segs)}
	}
	for i, g := range run() {
		require.Equal(t, want[i].f32(), g.f32(), "serial result %d", i)
	}
	withParallel(t, 16)
	spawned := parallelSpawned.Load()
	for i, g := range run() {
		require.Equal(t, want[i].f32(), g.f32(), "parallel result %d", i)
	}
	require.Greater(t, parallelSpawned.Load(), spawned, "no goroutine started")
}
