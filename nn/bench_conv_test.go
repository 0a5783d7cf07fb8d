package nn_test

import (
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// LeNet is LeNet-5 for 28×28 images, as bench/anchors.py's PyTorch model:
// conv 1→6 5×5 padding 2, ReLU, max-pool 2, conv 6→16 5×5, ReLU, max-pool 2,
// linear 400→120→84→10 with ReLU between.
type LeNet struct {
	C1, C2     nn.Conv
	Pool       nn.Pool
	F1, F2, F3 nn.Linear
}

func newLeNet(key tensor.Key) LeNet {
	k := key.Split(5)
	return LeNet{
		C1:   nn.NewConv2d(k[0], 1, 6, 5, nn.ConvOptions{Padding: nn.Padding(2)}),
		C2:   nn.NewConv2d(k[1], 6, 16, 5, nn.ConvOptions{}),
		Pool: nn.NewMaxPool2d(2, nn.PoolOptions{Stride: []int{2}}),
		F1:   nn.NewLinear(k[2], 400, 120, nn.LinearOptions{}),
		F2:   nn.NewLinear(k[3], 120, 84, nn.LinearOptions{}),
		F3:   nn.NewLinear(k[4], 84, 10, nn.LinearOptions{}),
	}
}

func (m LeNet) Forward(x *tensor.Tensor) *tensor.Tensor {
	h := m.Pool.Forward(m.C1.ForwardAct(x, nn.Relu)) // bias and ReLU in one sweep
	h = m.Pool.Forward(m.C2.ForwardAct(h, nn.Relu))
	h = tensor.Reshape(h, h.Dim(0), -1)
	h = m.F1.ForwardAct(h, nn.Relu)
	h = m.F2.ForwardAct(h, nn.Relu)
	return m.F3.Forward(h)
}

// ResBlock is a ResNet basic block with a classifier head, as
// bench/anchors.py's: conv 3×3 64→64 padding 1 without bias, BatchNorm,
// ReLU, conv 3×3, BatchNorm, plus the input, ReLU, global average pool,
// linear 64→10.
type ResBlock struct {
	C1, C2   nn.Conv
	B1, B2   nn.BatchNorm
	Head     nn.Linear
	Pool     nn.AdaptivePool
	Channels int
}

func newResBlock(key tensor.Key, c int) ResBlock {
	k := key.Split(3)
	opts := nn.ConvOptions{Padding: nn.Padding(1), NoBias: true}
	return ResBlock{
		C1: nn.NewConv2d(k[0], c, c, 3, opts), C2: nn.NewConv2d(k[1], c, c, 3, opts),
		B1: nn.NewBatchNorm(c, nn.BatchNormOptions{}), B2: nn.NewBatchNorm(c, nn.BatchNormOptions{}),
		Head: nn.NewLinear(k[2], c, 10, nn.LinearOptions{}), Pool: nn.NewAdaptiveAvgPool(1, 1), Channels: c,
	}
}

func (m ResBlock) Forward(x *tensor.Tensor, s nn.State) (*tensor.Tensor, nn.State) {
	h, s := m.B1.ForwardAct(m.C1.Forward(x), s, nn.Relu)        // ReLU fused into the normalisation
	h, s = m.B2.ForwardResidual(m.C2.Forward(h), x, s, nn.Relu) // + x and ReLU fused into the normalisation
	h = tensor.Reshape(m.Pool.Forward(h), x.Dim(0), m.Channels)
	return m.Head.Forward(h), s
}

// BenchmarkConvNetStep is a training step (forward, backward and an Adam
// update) of LeNet-5 on a batch of 128 28×28 images and of a ResNet basic
// block on [32, 64, 32, 32], the models and batches bench/compare.sh runs
// in PyTorch beside it:
//
//	go test -run '^$' -bench ConvNetStep -cpu 1,2 ./nn/
func BenchmarkConvNetStep(b *testing.B) {
	opt := optim.Adam(optim.Constant(1e-3))
	b.Run("lenet/batch=128", func(b *testing.B) {
		k1, k2 := tensor.NewKey(0).Split2()
		m := newLeNet(k1)
		x := tensor.Normal(k2, 128, 1, 28, 28)
		y := labels(128)
		st := opt.Init(m)
		vg := autodiff.ValueAndGradWith(func(m LeNet, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(x), y))
		}, autodiff.RecycleIntermediates())
		step := func() {
			loss, g := vg(m, x)
			var m2 LeNet
			m2, st = optim.Step(opt, m, g, st)
			tensor.Donate(loss)
			autodiff.DonateTree(g)
			m = m2
		}
		// LeNet-5 forward: 2·(6·784·25 + 16·100·150 + 400·120 + 120·84 + 84·10) per
		// example; backward twice that (the first layer's input gradient
		// is not computed, and is not counted).
		fwd := 2.0 * (6*784*25 + 16*100*150 + 400*120 + 120*84 + 84*10)
		runStep(b, step, 128*fwd*3-128*2*6*784*25)
	})
	b.Run("resblock/batch=32", func(b *testing.B) {
		k1, k2 := tensor.NewKey(0).Split2()
		m, s := nn.MakeWithState(newResBlock(k1, 64))
		x := tensor.Normal(k2, 32, 64, 32, 32)
		y := labels(32)
		st := opt.Init(m)
		vg := autodiff.ValueAndGradWithAux(func(m ResBlock, x *tensor.Tensor) (*tensor.Tensor, nn.State) {
			logits, s2 := m.Forward(x, s)
			return tensor.Mean(tensor.SoftmaxCrossEntropy(logits, y)), s2
		}, autodiff.RecycleIntermediates())
		step := func() {
			loss, s2, g := vg(m, x)
			var m2 ResBlock
			m2, st = optim.Step(opt, m, g, st)
			tensor.Donate(loss)
			autodiff.DonateTree(g)
			m, s = m2, s2
		}
		// Two 3×3 convolutions forward, two kernel gradients and one input
		// gradient (the block's input needs none).
		conv := 2.0 * 32 * 64 * 1024 * 64 * 9
		runStep(b, step, 5*conv)
	})
}

func runStep(b *testing.B, step func(), flops float64) {
	for range 2 { // warm up, and fill the allocator cache
		step()
	}
	b.ResetTimer()
	cpu0 := cputime.Used().Seconds()
	for b.Loop() {
		step()
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(sec*1e6, "µs/step")
	b.ReportMetric(flops/sec/1e9, "GFLOP/s")
	if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
		b.ReportMetric(cpu/float64(b.N)*1e6, "cpu-µs/step")
	}
}

// labels returns n class labels 0, 1, ..., 9, 0, ...
func labels(n int) *tensor.Tensor {
	v := make([]int, n)
	for i := range v {
		v[i] = i % 10
	}
	return tensor.FromInts(v, n)
}
