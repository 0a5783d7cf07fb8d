package parallel_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// guideModel builds the JAX sharding guide's model and batch exactly as
// its Python does, with gonox's JAX-compatible random numbers:
//
//	key_model, key_batch = jax.random.split(jax.random.key(0))
//	keys = jax.random.split(key_model, num_layers)
//	w = jax.random.normal(k1, (n_in, n_out)) / jnp.sqrt(n_in)
//	b = jax.random.normal(k2, (n_out,))
//
// with relu after every layer, the last one included.
func guideModel(sizes []int, batch int, seed uint64) (nn.MLP, *tensor.Tensor, *tensor.Tensor) {
	keys := tensor.NewKey(seed).Split(2)
	keyModel, keyBatch := keys[0], keys[1]
	m := nn.MLP{Activation: nn.Relu, FinalActivation: nn.Relu}
	for i, k := range keyModel.Split(len(sizes) - 1) {
		k1, k2 := k.Split2()
		nIn, nOut := sizes[i], sizes[i+1]
		w := tensor.MulScalar(tensor.Normal(k1, nIn, nOut), float32(1/math.Sqrt(float64(nIn))))
		m.Layers = append(m.Layers, nn.Linear{W: w, B: tensor.Normal(k2, nOut)})
	}
	k1, k2 := keyBatch.Split2()
	return m, tensor.Normal(k1, batch, sizes[0]), tensor.Normal(k2, batch, sizes[len(sizes)-1])
}

var guideSizes = []int{32, 128, 256, 128, 4}

func TestGuideBaselineLoss(t *testing.T) {
	m, x, y := guideModel(guideSizes, 16, 0)
	tr := parallel.New(m, parallel.Config{Strategy: parallel.Single, Optimizer: optim.SGD(optim.Constant(0))})
	loss, _ := tr.LossAndGrad(x, y)
	// The guide prints "Baseline Loss: 4.0431547".
	assert.InDelta(t, 4.0431547, loss, 2e-6)
}

func meshes() map[string]*shard.Mesh {
	out := map[string]*shard.Mesh{}
	for _, s := range [][2]int{{1, 8}, {2, 4}, {4, 2}, {8, 1}} {
		out[fmt.Sprintf("%dx%d", s[0], s[1])] = shard.NewMesh([]int{s[0], s[1]}, []string{"dp", "tp"})
	}
	return out
}

// maxRelDiff is the largest |a-b| over all leaves, relative to the largest
// |a| of that leaf.
func maxRelDiff(t *testing.T, a, b nn.MLP) float64 {
	t.Helper()
	worst := 0.0
	la, lb := pytree.Leaves(a), pytree.Leaves(b)
	require.Len(t, lb, len(la))
	for i := range la {
		x, y := la[i].Float64s(), lb[i].Float64s()
		scale := 0.0
		for _, v := range x {
			scale = math.Max(scale, math.Abs(v))
		}
		for j := range x {
			worst = math.Max(worst, math.Abs(x[j]-y[j])/math.Max(scale, 1e-12))
		}
	}
	return worst
}

func TestStrategiesEqualSingleDevice(t *testing.T) {
	for _, tc := range []struct {
		name  string
		sizes []int
		batch int
		loss  parallel.Loss
	}{
		{"guide model", guideSizes, 16, parallel.MSE},
		{"larger model", []int{64, 256, 512, 256, 8}, 64, parallel.MSE},
	} {
		m, x, y := guideModel(tc.sizes, tc.batch, 1)
		base := parallel.New(m, parallel.Config{Strategy: parallel.Single, Optimizer: optim.SGD(optim.Constant(0))})
		baseLoss, baseGrad := base.LossAndGrad(x, y)
		for meshName, mesh := range meshes() {
			for _, s := range []parallel.Strategy{parallel.DP, parallel.FSDP, parallel.TP, parallel.FSDPTP} {
				t.Run(fmt.Sprintf("%s/%s/%v", tc.name, meshName, s), func(t *testing.T) {
					tr := parallel.New(m, parallel.Config{Strategy: s, Mesh: mesh, Optimizer: optim.SGD(optim.Constant(0))})
					loss, grad := tr.LossAndGrad(x, y)
					assert.InEpsilon(t, baseLoss, loss, 1e-5)
					assert.Less(t, maxRelDiff(t, baseGrad, grad), 1e-5)
				})
			}
		}
	}
}
