package shard_test

import (
	"fmt"
	"math"
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// benchMLP is the MLP 784-1024-1024-10 of the parallel benchmarks, with a
// batch of 256 inputs and regression targets.
func benchMLP() (nn.MLP, *tensor.Tensor, *tensor.Tensor) {
	sizes := []int{784, 1024, 1024, 10}
	keys := tensor.NewKey(4).Split(len(sizes) + 1)
	m := nn.MLP{Activation: nn.Relu, FinalActivation: nn.Relu}
	for i := range len(sizes) - 1 {
		k1, k2 := keys[i].Split2()
		w := tensor.MulScalar(tensor.Normal(k1, sizes[i], sizes[i+1]), float32(1/math.Sqrt(float64(sizes[i]))))
		m.Layers = append(m.Layers, nn.Linear{W: w, B: tensor.Normal(k2, sizes[i+1])})
	}
	k1, k2 := keys[len(sizes)].Split2()
	return m, tensor.Normal(k1, 256, 784), tensor.Normal(k2, 256, 10)
}

// BenchmarkPropagatedStep times a training step (forward, backward, Adam)
// of the MLP 784-1024-1024-10 on batches of 256, DP and FSDP on 2 and 8
// simulated devices: "propagation" differentiates the plain loss of the
// model placed by FilterShard and the strategy's rules and steps the
// optimizer on the placed parameters; "handwritten" is package parallel's
// Trainer, the anchor. Compare ms/step within one run:
//
//	go test ./shard -run '^$' -bench PropagatedStep -benchtime 10x
func BenchmarkPropagatedStep(b *testing.B) {
	model, x, y := benchMLP()
	for _, n := range []int{2, 8} {
		mesh := shard.NewMesh([]int{n}, []string{"dp"})
		for _, st := range []parallel.Strategy{parallel.DP, parallel.FSDP} {
			tx := optim.Adam(optim.Constant(1e-3))
			tr := parallel.New(model, parallel.Config{Strategy: st, Mesh: mesh, Optimizer: tx})
			xs, ys := shard.Put(x, tr.BatchSharding()), shard.Put(y, tr.BatchSharding())
			params := shard.FilterShard(parallel.Annotate(model), mesh, st.Rules(mesh))
			state := tx.Init(params)
			loss := func(p nn.MLP, xy [2]*tensor.Tensor) *tensor.Tensor {
				return tensor.Mean(parallel.MSE(p.Forward(xy[0]), xy[1]))
			}
			xy := [2]*tensor.Tensor{xs, ys}
			step := func() {
				_, g := autodiff.ValueAndGradWith(loss)(params, xy)
				params, state = optim.Step(tx, params, g, state)
			}
			for _, v := range []struct {
				name string
				run  func()
			}{{"handwritten", func() { tr.Step(xs, ys) }}, {"propagation", step}} {
				b.Run(fmt.Sprintf("%v/devices=%d/%s", st, n, v.name), func(b *testing.B) {
					v.run()
					for b.Loop() {
						v.run()
					}
					b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
				})
			}
		}
	}
}
