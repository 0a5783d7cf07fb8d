package workers

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// The first goroutine takes chunks in order from the front, the others
// from the back, and every chunk is handed out once.
func TestChunksFrontAndBack(t *testing.T) {
	var c Chunks
	c.Reset(5)
	f, b := c.Front(), c.Front()
	require.True(t, f)
	require.False(t, b)
	var got []int
	for _, front := range []bool{true, false, true, false, true, true} {
		if k, ok := c.Next(front); ok {
			got = append(got, k)
		}
	}
	require.Equal(t, []int{0, 4, 1, 3, 2}, got)
	_, ok := c.Next(false)
	require.False(t, ok)

	c.Reset(0)
	require.True(t, c.Front())
	_, ok = c.Next(true)
	require.False(t, ok)
}

// Goroutines taking chunks at once get each chunk exactly once, the first
// one a run from chunk 0 and each of the others chunks in descending order.
func TestChunksConcurrent(t *testing.T) {
	old := runtime.GOMAXPROCS(4)
	defer runtime.GOMAXPROCS(old)
	for _, n := range []int{1, 2, 7, 1000} {
		var c Chunks
		c.Reset(n)
		seen := make([]int, n)
		var frontTook []int
		backTook := make([][]int, 4)
		var wg sync.WaitGroup
		var mu sync.Mutex
		for g := range 4 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				front := c.Front()
				var mine []int
				for {
					k, ok := c.Next(front)
					if !ok {
						break
					}
					mine = append(mine, k)
				}
				mu.Lock()
				for _, k := range mine {
					seen[k]++
				}
				if front {
					frontTook = mine
				} else {
					backTook[g] = mine
				}
				mu.Unlock()
			}()
		}
		wg.Wait()
		for k := range seen {
			require.Equal(t, 1, seen[k], "n=%d chunk %d", n, k)
		}
		for i, k := range frontTook {
			require.Equal(t, i, k, "n=%d: the front goroutine's chunks", n)
		}
		for _, mine := range backTook {
			for i := 1; i < len(mine); i++ {
				require.Less(t, mine[i], mine[i-1], "n=%d: a back goroutine's chunks", n)
			}
		}
	}
}
