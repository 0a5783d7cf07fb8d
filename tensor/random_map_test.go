package tensor_test

import (
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestSamplersInsideMapStaySerial checks that a random sampler called by a
// shard.Map device computes on the device's goroutine (as every kernel
// given a device's block does), though it has no operand carrying the
// device mark, and draws the same numbers as outside.
func TestSamplersInsideMapStaySerial(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(4))
	const n = 1 << 17 // large enough to fan out outside Map
	k := tensor.NewKey(3)
	before := tensor.ParallelSpawned()
	want := tensor.Normal(k, n).Float32s()
	require.Greater(t, tensor.ParallelSpawned(), before, "outside Map the sampler splits (the test can tell)")

	m := shard.NewMesh([]int{2}, []string{"dp"})
	var mu sync.Mutex
	var got [][]float32
	before = tensor.ParallelSpawned()
	shard.Map(m, shard.P(), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		y := tensor.Normal(k, n)
		tensor.Uniform(k, n)
		tensor.Bernoulli(k, 0.5, n)
		mu.Lock()
		got = append(got, y.Float32s())
		mu.Unlock()
		return x
	})(tensor.Scalar(1))
	require.Equal(t, before, tensor.ParallelSpawned(), "a sampler inside shard.Map started goroutines")
	require.Len(t, got, 2)
	for _, g := range got {
		require.Equal(t, want, g)
	}
}
