package optim_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkStep measures one optimizer step (Update and Apply) on a model
// of 1M+ parameters. GB/s counts the bytes an ideal fused kernel would move:
// params, gradients and each state tensor read once, params and state written
// once.
func BenchmarkStep(b *testing.B) {
	k1, k2 := tensor.NewKey(1).Split2()
	params := wb{W: tensor.Normal(k1, 1024, 1024), B: tensor.Zeros(tensor.Float32, 1024)}
	grads := wb{W: tensor.Normal(k2, 1024, 1024), B: tensor.Ones(tensor.Float32, 1024)}
	n := float64(1024*1024 + 1024)
	lr := optim.Constant(1e-3)
	for _, bc := range []struct {
		name   string
		tx     optim.Transform
		states int
	}{
		{"SGD", optim.SGD(lr), 0},
		{"SGDMomentum", optim.SGD(lr, optim.SGDOptions{Momentum: 0.9}), 1},
		{"Adam", optim.Adam(lr), 2},
		{"AdamW", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1}), 2},
		{"Lion", optim.Lion(lr), 1},
		{"Adafactor", optim.Adafactor(lr), 0},
		{"ClipAdamW", optim.Chain(optim.ClipByGlobalNorm(1), optim.AdamW(lr)), 2},
	} {
		b.Run(bc.name, func(b *testing.B) {
			state := bc.tx.Init(params)
			p := params
			for b.Loop() {
				p, state = optim.Step(bc.tx, p, grads, state)
			}
			sec := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(sec*1e6, "µs/step")
			b.ReportMetric(4*n*float64(3+2*bc.states)/sec/1e9, "GB/s")
		})
	}
}

// mlpParamsAndGrads returns normal weights and biases of the MLP
// 784-1024-1024-10 (1.86M floats) and gradients of the same shapes.
func mlpParamsAndGrads() (params, grads []*tensor.Tensor) {
	keys := tensor.NewKey(7).Split(2)
	sizes := []int{784, 1024, 1024, 10}
	for i := 0; i+1 < len(sizes); i++ {
		params = append(params, tensor.Normal(keys[0], sizes[i], sizes[i+1]), tensor.Normal(keys[0], sizes[i+1]))
		grads = append(grads, tensor.Normal(keys[1], sizes[i], sizes[i+1]), tensor.Normal(keys[1], sizes[i+1]))
	}
	return params, grads
}

// zeroIn is one device's part of a ZeRO update: its blocks of the flat
// parameters and gradient, and its shard of the Adam state.
type zeroIn struct {
	P, G *tensor.Tensor
	S    optim.AdamState
}

// BenchmarkShardedUpdate times the ZeRO-sharded Adam update of the
// parameters of the MLP 784-1024-1024-10 (1.86M floats) inside shard.Map
// on 1 and 2 devices: each device updates its 1/n of the flat parameters
// and of the moments in one fused pass (the reduce-scatter before and the
// all-gather after are not included). "host" is optim.Step on the
// parameter tree outside any mesh, for scale.
func BenchmarkShardedUpdate(b *testing.B) {
	params, grads := mlpParamsAndGrads()
	tx := optim.Adam(optim.Constant(1e-3))
	report := func(b *testing.B, elems int) {
		sec := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(sec*1e3, "ms/update")
		// p, g, m, v read; p, m, v written.
		b.ReportMetric(7*4*float64(elems)/sec/1e9, "GB/s")
	}
	b.Run("adam/host", func(b *testing.B) {
		p, s := params, tx.Init(params)
		for b.Loop() {
			p, s = optim.Step(tx, p, grads, s)
		}
		report(b, optim.NewZeRO(tx, params, 1).Len())
	})
	for _, n := range []int{1, 2} {
		b.Run(fmt.Sprintf("adam/devices=%d", n), func(b *testing.B) {
			z := optim.NewZeRO(tx, params, n)
			mesh := shard.NewMesh([]int{n}, []string{"dp"})
			spec := shard.SpecFunc(func(_ pytree.Path, x *tensor.Tensor) shard.Spec {
				if x.Rank() == 0 {
					return shard.P() // the step count
				}
				return shard.P("dp")
			})
			update := shard.Map(mesh, spec, spec, func(_ *shard.Ctx, in zeroIn) zeroIn {
				p, s := z.UpdateShard(in.P, in.G, in.S)
				return zeroIn{P: p, G: in.G, S: s.(optim.AdamState)}
			})
			in := zeroIn{P: z.Flatten(params), G: z.Flatten(grads), S: z.Init().(optim.AdamState)}
			in = shard.FilterShard(in, mesh, spec)
			in = update(in)
			b.ResetTimer()
			for b.Loop() {
				in = update(in)
			}
			report(b, z.Len())
		})
	}
}
