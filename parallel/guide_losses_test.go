package parallel_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
)

// The JAX sharding guide trains its model (built from jax.random.key(0))
// with each strategy on Mesh('dp': 4, 'tp': 2) and prints each loss:
// "DP Loss: 4.0431547", "FSDP Loss: 4.0431547", "TP Loss: 4.0431542",
// "FSDP_TP Loss: 4.0431542". gonox's strategies give each within one
// float32 ulp (the order of the reductions differs from XLA's).
func TestGuideStrategyLosses(t *testing.T) {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	for _, c := range []struct {
		strategy parallel.Strategy
		guide    float32
	}{
		{parallel.DP, 4.0431547},
		{parallel.FSDP, 4.0431547},
		{parallel.TP, 4.0431542},
		{parallel.FSDPTP, 4.0431542},
	} {
		m, b := guideModel(guideSizes, 16, 0)
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Optimizer: optim.SGD(optim.Constant(0)),
			Strategy: c.strategy, Mesh: mesh})
		require.NoError(t, err, c.strategy)
		l, err := tr.Eval(b)
		require.NoError(t, err, c.strategy)
		got := float32(l)
		ulp := math.Nextafter32(c.guide, 5) - c.guide
		t.Logf("%v: %.7f (guide %.7f)", c.strategy, got, c.guide)
		assert.LessOrEqual(t, math.Abs(float64(got-c.guide)), float64(ulp), "%v: %v against the guide's %v", c.strategy, got, c.guide)
	}
}
