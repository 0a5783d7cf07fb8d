package nn_test

import (
	"slices"
	"testing"
	"time"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkMLPStepPolicy measures one training step (forward, backward,
// Adam update) of the MLP 784-1024-1024-10 at batch 256 with cross
// entropy, in float32 and in bf16 mixed precision (float32 master
// weights). Like a training loop, each step donates the loss, the
// gradients and the previous parameters and optimizer state, and the
// backward pass recycles the activations (see BenchmarkMLPStep). The two steps alternate within each iteration, so both see
// the same machine load; it reports the median µs/step of each and the
// speed-up (float32 median / mixed median), in wall time and in CPU time
// of the process (cpu-µs/step; at -cpu 1 the figure to quote on a shared
// machine, where wall time counts the waits for a core):
//
//	go test ./nn -run '^$' -bench MLPStepPolicy -benchtime 20x -cpu 1,2
func BenchmarkMLPStepPolicy(b *testing.B) {
	type run struct {
		step  func()
		times []float64
		cpu   []float64
	}
	mk := func(policy nn.Policy) *run {
		k1, k2 := tensor.NewKey(0).Split2()
		m := nn.NewMLP(k1, []int{784, 1024, 1024, 10}, nn.MLPOptions{Policy: policy})
		x := tensor.Normal(k2, 256, 784)
		y := tensor.Rem(tensor.Arange(256), tensor.ScalarInt(10))
		vg := autodiff.ValueAndGradWith(func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(x), y))
		}, autodiff.RecycleIntermediates())
		opt := optim.Adam(optim.Constant(1e-3))
		state := opt.Init(m)
		r := &run{}
		r.step = func() {
			loss, g := vg(m, x)
			m2, state2 := optim.Step(opt, m, g, state)
			// As a training loop (JAX's donate_argnums): the loss, the
			// gradients and the previous parameters and state are dead.
			tensor.Donate(loss)
			autodiff.DonateTree(g)
			autodiff.DonateTree(m)
			autodiff.DonateTree(state)
			m, state = m2, state2
		}
		r.step() // warm up, and fill the allocator cache
		r.step()
		return r
	}
	f32, mixed := mk(nn.Policy{}), mk(nn.MixedBFloat16)
	timeIt := func(r *run) {
		c0, t0 := cputime.Used(), time.Now()
		r.step()
		r.times = append(r.times, time.Since(t0).Seconds()*1e6)
		r.cpu = append(r.cpu, (cputime.Used()-c0).Seconds()*1e6)
	}
	for i := 0; b.Loop(); i++ {
		if i%2 == 0 { // alternate the order too
			timeIt(f32)
			timeIt(mixed)
		} else {
			timeIt(mixed)
			timeIt(f32)
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	m32, mbf := median(f32.times), median(mixed.times)
	b.ReportMetric(m32, "f32-µs/step")
	b.ReportMetric(mbf, "bf16mixed-µs/step")
	b.ReportMetric(m32/mbf, "speedup")
	c32, cbf := median(f32.cpu), median(mixed.cpu)
	b.ReportMetric(c32, "f32-cpu-µs/step")
	b.ReportMetric(cbf, "bf16mixed-cpu-µs/step")
	b.ReportMetric(c32/cbf, "cpu-speedup")
}
