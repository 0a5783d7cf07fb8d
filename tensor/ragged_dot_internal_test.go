package tensor

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor/internal/gemm"
	"github.com/gonox/gonox/tensor/internal/workers"
)

// ragged_outer computed by whole groups in one region (outerGroupOrder)
// gives the bits of the per-group products, in float32 and bfloat16.
func TestRaggedOuterWholeGroups(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	sizes := []int{30, 0, 55, 7, 64, 12, 41, 3, 0, 20}
	m := 240 // rows past the groups (235) are ignored
	a, b := randTensor(rng, m, 24), randTensor(rng, m, 40)
	gs := FromInts(sizes)
	for _, compute := range []DType{Float32, BFloat16} {
		q := &raggedOuterParams{groups: len(sizes), compute: compute}
		old := parallelMinWork
		parallelMinWork = 1 << 40 // one gemm per group, each on one goroutine
		want := raggedOuterImpl(a, b, gs, q).Float32s()
		parallelMinWork = old

		withParallel(t, 64)
		require.NotNil(t, outerGroupOrder(sizes, 24*40, false))
		asked := workers.Asked()
		got := raggedOuterImpl(a, b, gs, q).Float32s()
		if compute == Float32 { // (bfloat16 operands may be rounded in regions of their own)
			require.Equal(t, int64(1), workers.Asked()-asked, "one region for all the groups")
		}
		require.Equal(t, want, got, "%v", compute)
	}
}

func TestOuterGroupOrder(t *testing.T) {
	withParallel(t, 64) // 4 procs
	sizes := []int{30, 0, 55, 7, 64, 12, 41, 3, 0, 20}
	order := outerGroupOrder(sizes, 1000, false)
	// Empty groups first, then the nonempty ones by decreasing rows (4
	// 2 6 0 9 5 3 7) alternately from the front and from the back: the
	// front goroutine computes 64, 41, 20 and 7 rows, the back one 55,
	// 30, 12 and 3.
	require.Equal(t, []int{1, 8, 4, 6, 9, 3, 7, 5, 0, 2}, order)

	require.Nil(t, outerGroupOrder(sizes, 1000, true), "local: per group")
	require.Nil(t, outerGroupOrder([]int{30, 20, 10, 5, 0, 0, 0}, 1000, false), "fewer than 2 nonempty groups a goroutine")
	parallelMinWork = 1 << 20
	require.Nil(t, outerGroupOrder(sizes, 1000, false), "too little work")
}

// BenchmarkRaggedOuter times ragged_outer (a grouped product's weight
// gradient) on a MoE layer's shapes, its groups whole in one region
// (whole) against one split gemm per group (pergroup, what it did
// before; parallelMinWork raised so that outerGroupOrder declines):
//
//	go test ./tensor -run '^$' -bench RaggedOuter -cpu 2
func BenchmarkRaggedOuter(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, s := range []struct {
		name   string
		ka, kb int
		sizes  []int
	}{
		{"128x256/even", 128, 256, []int{610, 590, 640, 575, 640, 600, 620, 605}},
		{"256x128/even", 256, 128, []int{610, 590, 640, 575, 640, 600, 620, 605}},
		{"128x256/uneven", 128, 256, []int{140, 280, 420, 560, 640, 640, 640, 640}},
	} {
		m := 0
		for _, r := range s.sizes {
			m += r
		}
		x, y := randTensor(rng, m, s.ka), randTensor(rng, m, s.kb)
		gs := FromInts(s.sizes)
		q := &raggedOuterParams{groups: len(s.sizes)}
		for _, mode := range []string{"whole", "pergroup"} {
			b.Run(s.name+"/"+mode, func(b *testing.B) {
				if mode == "pergroup" {
					old := parallelMinWork
					parallelMinWork = 1 << 40
					b.Cleanup(func() { parallelMinWork = old })
				}
				for b.Loop() {
					raggedOuterImpl(x, y, gs, q).release()
				}
				b.ReportMetric(2*float64(m*s.ka*s.kb)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}

// ragged_dot in bfloat16 computes each group whole on one goroutine when
// the groups are enough to share (one gemm a group, so w[g] is rounded
// and packed once), with the bits of the serial products, forward and
// with w transposed (dx); in float32 it still splits the rows.
func TestRaggedDotWholeGroupsBF16(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	sizes := []int{30, 0, 55, 7, 64, 12, 41, 3, 0, 20}
	m := 240 // rows past the groups (235) are 0
	x := randTensor(rng, m, 24)
	w := randTensor(rng, len(sizes), 24, 40)
	wt := randTensor(rng, len(sizes), 40, 24)
	gs := FromInts(sizes)
	var (
		mu    sync.Mutex
		calls []int // rows of each gemm
	)
	old := raggedGemm
	t.Cleanup(func() { raggedGemm = old })
	raggedGemm = func(compute DType, ta, tb bool, m, n, k int, a gemm.BF16Operand, lda int, b gemm.BF16Operand, ldb int, c []float32, ldc, threads int) {
		mu.Lock()
		calls = append(calls, m)
		mu.Unlock()
		groupGemm(compute, ta, tb, m, n, k, a, lda, b, ldb, c, ldc, threads)
	}
	for _, c := range []struct {
		name   string
		w      *Tensor
		transW bool
	}{{"x@w", w, false}, {"x@wT", wt, true}} {
		for _, compute := range []DType{BFloat16, Float32} {
			p := &raggedParams{transW: c.transW, compute: compute}
			oldWork := parallelMinWork
			parallelMinWork = 1 << 40 // serial: one gemm per group
			want := raggedDotImpl(x, c.w, gs, p).Float32s()
			parallelMinWork = oldWork

			withParallel(t, 64) // 4 procs
			calls = calls[:0]
			got := raggedDotImpl(x, c.w, gs, p).Float32s()
			require.Equal(t, want, got, "%s in %v", c.name, compute)
			if compute == BFloat16 && gemm.BF16Kernel() != "widen" {
				require.ElementsMatch(t, []int{64, 55, 41, 30, 20, 12, 7, 3}, calls, "%s: one gemm a nonempty group", c.name)
			} else {
				require.Greater(t, len(calls), 8, "%s in %v: rows split", c.name, compute)
			}
		}
	}
}

// BenchmarkRaggedDotBF16 times ragged_dot in bfloat16 from float32
// operands (a MoE layer's expert products under the bf16 policy) with its
// groups whole on one goroutine each (whole) against the rows split over
// the goroutines (rows, what it did before):
//
//	go test ./tensor -run '^$' -bench RaggedDotBF16 -cpu 1,2
func BenchmarkRaggedDotBF16(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := []int{510, 490, 540, 475, 540, 500, 520, 521} // 4096 rows: 2048 tokens, top 2 of 8
	for _, s := range []struct {
		name   string
		k, n   int
		transW bool
	}{{"128x256", 128, 256, false}, {"256x128", 256, 128, false}, {"dx_256x128T", 128, 256, true}} {
		m := 0
		for _, r := range sizes {
			m += r
		}
		x := randTensor(rng, m, s.k)
		w := randTensor(rng, len(sizes), s.k, s.n)
		if s.transW {
			w = randTensor(rng, len(sizes), s.n, s.k)
		}
		gs := FromInts(sizes)
		p := &raggedParams{transW: s.transW, compute: BFloat16}
		for _, mode := range []string{"whole", "rows"} {
			b.Run(s.name+"/"+mode, func(b *testing.B) {
				raggedWholeGroups = mode == "whole"
				b.Cleanup(func() { raggedWholeGroups = true })
				for b.Loop() {
					raggedDotImpl(x, w, gs, p).release()
				}
				b.ReportMetric(2*float64(m*s.k*s.n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
