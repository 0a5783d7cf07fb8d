package tensor

import (
	"math"
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

// The scatters that start from zeros (take_grad, segment_sum) give the
// bits of a cleared result plus the adds: a row's first update of -0
// makes +0, a NaN stays, rows no index reaches are zeros whatever the
// result's storage held, serial and split, with more rows a chunk than
// the chunk's stack bitmap covers.
func TestScatterRowsFromZeroBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(85, 2))
	for _, tc := range []struct {
		name        string
		n, m, inner int
	}{{"small", 50, 120, 16}, {"long", 5000, 3000, 16}} {
		t.Run(tc.name, func(t *testing.T) {
			upd := randTensor(rng, tc.m, tc.inner).f32()
			wrap, seg := make([]int32, tc.m), make([]int32, tc.m)
			for j := range wrap {
				k := rng.IntN(tc.n)
				for k%3 == 0 { // rows 0, 3, 6, ... untouched
					k = rng.IntN(tc.n)
				}
				wrap[j], seg[j] = int32(k), int32(k)
				switch j % 4 {
				case 1:
					wrap[j] -= int32(tc.n) // wraps
				case 2:
					seg[j] = int32(tc.n + 2) // dropped
				}
				if j%7 == 0 {
					for e := range tc.inner {
						upd[j*tc.inner+e] = float32(math.Copysign(0, -1))
					}
				}
			}
			upd[3] = float32(math.NaN())
			for _, dropOut := range []bool{false, true} {
				idx := wrap
				if dropOut {
					idx = seg
				}
				want := make([]float32, tc.n*tc.inner)
				if dropOut {
					segmentSumKernel(want, upd, idx, tc.n, tc.inner)
				} else {
					scatterAddKernel(want, upd, idx, 1, tc.n, tc.inner)
				}
				for _, split := range []bool{false, true} {
					if split {
						withParallel(t, 16)
					}
					got := make([]float32, tc.n*tc.inner)
					for i := range got {
						got[i] = float32(math.NaN()) // uninitialised storage
					}
					scatterRowsF32(got, upd, nil, idx, tc.n, tc.inner, dropOut, true, false)
					for i := range want {
						if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
							t.Fatalf("dropOut %v split %v: element %d = %v (%#x), want %v (%#x)", dropOut, split, i,
								got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
						}
					}
				}
			}
		})
	}
}

// BenchmarkScatterRowsFromZero sums the 4096 rows of a top-2 MoE layer's
// expert outputs, f32[4096, 128], into their 2048 tokens (each token's two
// rows apart, as after the dispatch's sort by expert), as segment_sum and
// take_grad do, into one reused result (the training step's allocator
// cache recycles it). GB/s counts the rows read and the result written.
func BenchmarkScatterRowsFromZero(b *testing.B) {
	const tokens, inner = 2048, 128
	rng := rand.New(rand.NewPCG(86, 3))
	data := randTensor(rng, 2*tokens, inner).f32()
	ids := make([]int32, 2*tokens)
	for j := range ids {
		ids[j] = int32((j * 1031) % tokens)
	}
	dst := make([]float32, tokens*inner)
	for b.Loop() {
		scatterRowsF32(dst, data, nil, ids, tokens, inner, true, true, false)
	}
	b.ReportMetric(float64(4*(len(data)+len(dst)))*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
}
