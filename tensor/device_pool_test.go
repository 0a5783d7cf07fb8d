package tensor_test

import (
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestDeviceKernelsStayOffThePool: the kernels a device of shard.Map runs
// compute on its own goroutine, never asking the worker pool for helpers
// (their spinning would take the cores the other devices compute on).
// The case is the folded reduce-scatter of a weight gradient whose
// devices hold fewer than 64 rows each: their rows are gathered into one
// operand shared by the devices, which must still carry each device's
// mark (8674e85: without it the gemm asked the pool, ~1.5 CPU-ms a DP
// step on 8 devices). A product of the same size outside Map asks.
func TestDeviceKernelsStayOffThePool(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	const devices, rows, cols = 8, 32, 512
	m := shard.NewMesh([]int{devices}, []string{"dp"})
	p := tensor.Normal(tensor.NewKey(1), devices*rows, cols)
	q := tensor.Normal(tensor.NewKey(2), devices*rows, cols)

	before := tensor.PoolAsks()
	tensor.MatMulT(p, q, true, false)
	require.Greater(t, tensor.PoolAsks(), before, "a %d×%d×%d product outside Map asks the pool", cols, devices*rows, cols)

	before = tensor.PoolAsks()
	y := shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, in [2]*tensor.Tensor) *tensor.Tensor {
		return c.PsumScatterProductStart(in[0], in[1], shard.Axes{"dp"}, 0).Wait()
	})([2]*tensor.Tensor{p, q})
	require.Equal(t, []int{cols, cols}, y.Shape())
	require.Equal(t, before, tensor.PoolAsks(), "the devices' folded products asked the worker pool")
}
