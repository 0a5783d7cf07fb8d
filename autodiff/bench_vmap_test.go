package autodiff_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// The benchmarks of issue 30: per-example gradients and an ensemble, each
// through Vmap against the hand-written or looped alternative. Run them
// as
//
//	go test ./autodiff -run '^$' -bench 'PerExampleGrads|EnsembleStep' -count 5

// benchBatch is a batch of examples of the MLP 64-128-10.
func benchBatch(n int, seed uint64) example {
	r := rand.New(rand.NewPCG(seed, 1))
	labels := make([]int32, n)
	for i := range labels {
		labels[i] = int32(r.IntN(10))
	}
	return example{randT(r, n, 64), tensor.FromInt32(labels, n)}
}

// perExampleVmap returns the per-example gradients by Vmap of Grad.
var perExampleVmap = autodiff.Vmap2(autodiff.GradWith(mlpLoss), autodiff.InAxes(autodiff.None, autodiff.Axis(0)), autodiff.Strict())

// perExampleLoop returns the per-example gradients one example at a time.
func perExampleLoop(m nn.MLP, b example) nn.MLP {
	grad := autodiff.GradWith(mlpLoss)
	xs, ys := rows(b.X), rows(b.Y)
	gs := make([]nn.MLP, len(xs))
	for i := range xs {
		gs[i] = grad(m, example{xs[i], ys[i]})
	}
	return pytree.MapN(func(ls []*tensor.Tensor) *tensor.Tensor { return tensor.Stack(0, ls...) }, gs...)
}

// perExampleManual computes the per-example gradients of a two-layer ReLU
// MLP by hand, batched: the forward pass on the batch, the gradient of
// each example's loss with respect to its logits (softmax - onehot), and
// per layer the outer products of every example's input and gradient as
// one batched product.
func perExampleManual(m nn.MLP, b example) nn.MLP {
	l1, l2 := m.Layers[0], m.Layers[1]
	n := b.X.Dim(0)
	h := tensor.BiasAct(tensor.MatMul(b.X, l1.W), l1.B, tensor.ActRelu)
	logits := tensor.BiasAct(tensor.MatMul(h, l2.W), l2.B, tensor.ActIdentity)
	g2 := tensor.Sub(tensor.Softmax(logits, 1), tensor.OneHot(b.Y, 10))
	dW2 := tensor.MatMul(tensor.Reshape(h, n, 128, 1), tensor.Reshape(g2, n, 1, 10))
	g1 := tensor.Mul(tensor.MatMulT(g2, l2.W, false, true), tensor.Sign(h)) // ReLU': h is 0 or positive
	dW1 := tensor.MatMul(tensor.Reshape(b.X, n, 64, 1), tensor.Reshape(g1, n, 1, 128))
	out := m
	out.Layers = []nn.Linear{{W: dW1, B: g1}, {W: dW2, B: g2}}
	return out
}

// TestPerExampleGrads: the three ways of BenchmarkPerExampleGrads agree
// (to float32 rounding: their products sum in other orders).
func TestPerExampleGrads(t *testing.T) {
	m := nn.NewMLP(tensor.NewKey(1), []int{64, 128, 10}, nn.MLPOptions{})
	b := benchBatch(256, 2)
	v := perExampleVmap(m, b)
	requireTreesEqual(t, perExampleLoop(m, b), v, 1e-6, "vmap vs loop")
	requireTreesEqual(t, perExampleManual(m, b), v, 1e-6, "vmap vs manual")
}

func BenchmarkPerExampleGrads(b *testing.B) {
	m := nn.NewMLP(tensor.NewKey(1), []int{64, 128, 10}, nn.MLPOptions{})
	batch := benchBatch(256, 2)
	for _, c := range []struct {
		name string
		f    func(nn.MLP, example) nn.MLP
	}{
		{"vmap", perExampleVmap},
		{"manual", perExampleManual},
		{"loop", perExampleLoop},
	} {
		b.Run(c.name, func(b *testing.B) {
			defer reportStep(b)()
			for b.Loop() {
				g := c.f(m, batch)
				autodiff.DonateTree(g)
			}
		})
	}
}

// batchLoss is the mean loss of a model on a batch.
func batchLoss(m nn.MLP, b example) *tensor.Tensor {
	return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y))
}

// ensembleStep is one Adam step of every model of an ensemble stacked
// along axis 0, through Vmap: the gradients of the 8 models at once and
// one optimizer update of the stacked parameters.
func ensembleStep(opt optim.Transform) func(ens nn.MLP, st optim.State, b example) (nn.MLP, optim.State, *tensor.Tensor) {
	grad := autodiff.ValueAndGradWith(batchLoss, autodiff.RecycleIntermediates()) // made once, as loopStep's
	vg := autodiff.Vmap2(func(m nn.MLP, b example) lossGrad {
		l, g := grad(m, b)
		return lossGrad{l, g}
	}, autodiff.InAxes(autodiff.Axis(0), autodiff.None), autodiff.Strict())
	return func(ens nn.MLP, st optim.State, b example) (nn.MLP, optim.State, *tensor.Tensor) {
		lg := vg(ens, b)
		ens2, st2 := optim.StepDonating(opt, ens, lg.G, st)
		return ens2, st2, lg.L
	}
}

type lossGrad struct {
	L *tensor.Tensor
	G nn.MLP
}

// loopStep is the same step one model at a time, each with its own state.
func loopStep(opt optim.Transform) func(ms []nn.MLP, sts []optim.State, b example) ([]nn.MLP, []optim.State, *tensor.Tensor) {
	vg := autodiff.ValueAndGradWith(batchLoss, autodiff.RecycleIntermediates())
	return func(ms []nn.MLP, sts []optim.State, b example) ([]nn.MLP, []optim.State, *tensor.Tensor) {
		ls := make([]*tensor.Tensor, len(ms))
		out, outSt := make([]nn.MLP, len(ms)), make([]optim.State, len(ms))
		for i, m := range ms {
			l, g := vg(m, b)
			out[i], outSt[i] = optim.StepDonating(opt, m, g, sts[i])
			ls[i] = l
		}
		return out, outSt, tensor.Stack(0, ls...)
	}
}

// newEnsemble makes 8 MLPs 64-128-10 by Vmap over keys, and the same
// models one by one.
func newEnsemble() (nn.MLP, []nn.MLP) { return newEnsembleOf(8) }

// newEnsembleOf is newEnsemble for n models.
func newEnsembleOf(n int) (nn.MLP, []nn.MLP) {
	keys := tensor.NewKey(9).Split(n)
	newMLP := func(k tensor.Key) nn.MLP { return nn.NewMLP(k, []int{64, 128, 10}, nn.MLPOptions{}) }
	ens := autodiff.Vmap(newMLP)(tensor.StackKeys(keys))
	ms := make([]nn.MLP, len(keys))
	for i, k := range keys {
		ms[i] = newMLP(k)
	}
	return ens, ms
}

// TestEnsembleStep: three Adam steps of the ensemble through Vmap equal
// the steps of the 8 models one by one.
func TestEnsembleStep(t *testing.T) {
	opt := optim.Adam(optim.Constant(1e-2))
	ens, ms := newEnsemble()
	st := opt.Init(ens)
	sts := make([]optim.State, len(ms))
	for i, m := range ms {
		sts[i] = opt.Init(m)
	}
	vs, ls := ensembleStep(opt), loopStep(opt)
	for s := range 3 {
		b := benchBatch(16, uint64(10+s))
		var lv, ll *tensor.Tensor
		ens, st, lv = vs(ens, st, b)
		ms, sts, ll = ls(ms, sts, b)
		require.InDeltaSlice(t, ll.Float32s(), lv.Float32s(), 1e-6)
	}
	stacked := pytree.MapN(func(ls []*tensor.Tensor) *tensor.Tensor { return tensor.Stack(0, ls...) }, ms...)
	requireTreesEqual(t, stacked, ens, 1e-5, "ensemble after 3 steps")
}

func BenchmarkEnsembleStep(b *testing.B) {
	opt := optim.Adam(optim.Constant(1e-3))
	batch := benchBatch(16, 3)
	b.Run("vmap", func(b *testing.B) { benchEnsembleVmap(b, opt, batch, 8) })
	b.Run("loop", func(b *testing.B) { benchEnsembleLoop(b, opt, batch, 8) })
}

// BenchmarkEnsembleSize is BenchmarkEnsembleStep's vmapped step over 1,
// 2, 4 and 8 models and the loop over one: how the step's cost splits
// into Vmap's fixed cost and a cost per model (docs/transforms.md).
func BenchmarkEnsembleSize(b *testing.B) {
	opt := optim.Adam(optim.Constant(1e-3))
	batch := benchBatch(16, 3)
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("vmap=%d", n), func(b *testing.B) { benchEnsembleVmap(b, opt, batch, n) })
	}
	b.Run("loop=1", func(b *testing.B) { benchEnsembleLoop(b, opt, batch, 1) })
}

// benchEnsembleVmap times the vmapped training step of n stacked models.
func benchEnsembleVmap(b *testing.B, opt optim.Transform, batch example, n int) {
	ens, _ := newEnsembleOf(n)
	st := opt.Init(ens)
	step := ensembleStep(opt)
	defer reportStep(b)()
	for b.Loop() {
		ens, st, _ = step(ens, st, batch)
	}
}

// benchEnsembleLoop times a Go loop over the training steps of n models.
func benchEnsembleLoop(b *testing.B, opt optim.Transform, batch example, n int) {
	_, ms := newEnsembleOf(n)
	sts := make([]optim.State, len(ms))
	for i, m := range ms {
		sts[i] = opt.Init(m)
	}
	step := loopStep(opt)
	defer reportStep(b)()
	for b.Loop() {
		ms, sts, _ = step(ms, sts, batch)
	}
}

// reportStep starts measuring the CPU time of a benchmark; the function
// it returns reports µs/step (wall clock) and cpu-µs/step (the process's
// CPU time, all threads: the cost, less disturbed by other processes).
func reportStep(b *testing.B) func() {
	c0 := cpuTime()
	return func() {
		b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/step")
		b.ReportMetric(float64((cpuTime()-c0).Microseconds())/float64(b.N), "cpu-µs/step")
	}
}
