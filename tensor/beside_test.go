package tensor_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Beside's host work has run once when wait returns; it asks the worker
// pool outside shard.Map and never from a device's block, whose host work
// runs on the device's goroutine.
func TestBeside(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	x := tensor.Normal(tensor.NewKey(1), 8, 4)

	before := tensor.PoolAsks()
	calls := 0
	wait := tensor.Beside(x, func() { calls++ })
	y := tensor.Sum(x) // the caller's operations meanwhile
	wait()
	require.Equal(t, 1, calls)
	require.Greater(t, tensor.PoolAsks(), before, "Beside outside Map asks the pool")
	require.InDelta(t, tensor.Sum(x).Item(), y.Item(), 0)

	m := shard.NewMesh([]int{2}, []string{"dp"})
	before = tensor.PoolAsks()
	counts := make([]int, 2)
	shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		d := c.AxisIndex("dp")
		wait := tensor.Beside(b, func() { counts[d]++ })
		wait()
		return b
	})(x)
	require.Equal(t, []int{1, 1}, counts)
	require.Equal(t, before, tensor.PoolAsks(), "Beside inside Map asked the worker pool")
}
