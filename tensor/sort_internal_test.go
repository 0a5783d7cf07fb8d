package tensor

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

// Both lane sorters agree with each other and with a stable sort of the
// keys, for every length around the switch between them.
func TestSrtSorterModesAgree(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, n := range []int{0, 1, 2, 3, 15, 16, 63, 64, 65, 191, 500, 2000} {
		for _, spread := range []uint32{2, 300, 70000, 1 << 31} {
			keys := make([]uint32, n)
			for i := range keys {
				keys[i] = uint32(rng.Uint64()) % spread
				if spread == 1<<31 {
					keys[i] = uint32(rng.Uint64())
				}
			}
			want := make([]int, n)
			for i := range want {
				want[i] = i
			}
			slices.SortStableFunc(want, func(a, b int) int {
				switch {
				case keys[a] < keys[b]:
					return -1
				case keys[a] > keys[b]:
					return 1
				}
				return 0
			})
			for _, radix := range []bool{false, true} {
				st := newSrtSorterMode(n, radix)
				copy(st.keys, keys)
				got := make([]int, n)
				st.sort(func(j, src int) { got[j] = src })
				require.Equal(t, want, got, "n=%d spread=%d radix=%v", n, spread, radix)
			}
		}
	}
}

func BenchmarkSrtSorter(b *testing.B) {
	// 2¹⁸ random keys cut into lanes, so that the branch predictor cannot
	// learn one lane.
	rng := rand.New(rand.NewPCG(1, 1))
	all := make([]uint32, 1<<18)
	for i := range all {
		all[i] = uint32(rng.Uint64())
	}
	for _, n := range []int{16, 32, 64, 128, 256, 512, 1024} {
		for _, radix := range []bool{false, true} {
			b.Run(fmt.Sprintf("n=%d/radix=%v", n, radix), func(b *testing.B) {
				st := newSrtSorterMode(n, radix)
				sink := 0
				for b.Loop() {
					for off := 0; off+n <= len(all); off += n {
						copy(st.keys, all[off:off+n])
						st.sort(func(j, src int) { sink += src })
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(len(all)), "ns/elem")
			})
		}
	}
}
