//go:build mpi

package mpi_test

import (
	"math/rand/v2"
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

// TestStartedReductionsAcrossProcesses: PsumStart and PsumScatterStart,
// whose exchanges between processes run while the device computes and
// around synchronous collectives, give the synchronous results bit for
// bit on a mesh of every device of the job.
func TestStartedReductionsAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	r := rand.New(rand.NewPCG(5, 6)) // the same numbers on every process
	d := make([]float32, n*4*n*64)
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	x := tensor.FromFloat32(d, n*4*n, 64)
	work := func(x *tensor.Tensor) *tensor.Tensor { return tensor.MatMul(tensor.Transpose(x), x) }
	sync := func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		a := c.PsumScatter(b, shard.Axes{"d"}, 0, true)
		s := c.Psum(tensor.MulScalar(b, 3), "d")
		bias := c.Psum(tensor.SliceAxis(b, 0, 0, 1), "d")
		return tensor.Concat(0, a, c.Vary(tensor.SliceAxis(s, 0, 0, 4), "d"), c.Vary(bias, "d"))
	}
	started := func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		ha := c.PsumScatterStart(b, shard.Axes{"d"}, 0, true)
		work(b)
		s := c.Psum(tensor.MulScalar(b, 3), "d") // waits for the started exchange before its own
		hb := c.PsumStart(tensor.SliceAxis(b, 0, 0, 1), "d")
		work(b)
		bias := hb.Wait()
		a := ha.Wait()
		return tensor.Concat(0, a, c.Vary(tensor.SliceAxis(s, 0, 0, 4), "d"), c.Vary(bias, "d"))
	}
	spec := shard.P("d")
	want := floats(shard.Map(m, spec, spec, sync)(x))
	got := floats(shard.Map(m, spec, spec, started)(x))
	assert.Equal(t, want, got)
}

// TestStartedHalfReduceScatterAcrossProcesses: a started reduce-scatter
// of bfloat16 or float16 blocks (parallel.Config.ReduceDType), exchanged
// while the device computes, gives the synchronous one's result and the
// host's: every device's value widened, summed in float32 over the
// devices in rank order (treeSum) and rounded once.
func TestStartedHalfReduceScatterAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	r := rand.New(rand.NewPCG(7, 8))
	const cols = 96
	d := make([]float32, n*n*cols)
	for i := range d {
		d[i] = float32(r.NormFloat64() * float64(1+i%7))
	}
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		x := tensor.AsType(tensor.FromFloat32(d, n*n, cols), dt) // device k holds rows [k·n, (k+1)·n)
		wide := tensor.AsType(x, tensor.Float32).Float32s()
		sums := make([]float32, n*cols)
		vals := make([]float32, n)
		for i := range sums {
			for k := range vals {
				vals[k] = wide[k*n*cols+i]
			}
			sums[i] = treeSum(vals)
		}
		want := tensor.AsType(tensor.FromFloat32(sums, n, cols), dt).Bits16()
		spec := shard.P("d")
		sync := shard.Map(m, spec, spec, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.PsumScatter(b, shard.Axes{"d"}, 0, true)
		})(x)
		started := shard.Map(m, spec, spec, func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			h := c.PsumScatterStart(b, shard.Axes{"d"}, 0, true)
			w := tensor.AsType(b, tensor.Float32)
			tensor.MatMul(tensor.Transpose(w), w) // computed while the parts travel
			return h.Wait()
		})(x)
		assert.Equal(t, want, shard.Gather(sync).Bits16(), "%v psum_scatter", dt)
		assert.Equal(t, want, shard.Gather(started).Bits16(), "%v started psum_scatter", dt)
	}
}

// TestDPOverlapAcrossProcesses: the DP step of parallel.Trainer whose
// gradients' reductions start during the backward pass (the last
// micro-batch's, with two) trains, across processes, to the parameters of
// the step that reduces them after it, bit for bit, and reports the time
// it waited for collectives.
func TestDPOverlapAcrossProcesses(t *testing.T) {
	m, n := lineMesh()
	ks := tensor.NewKey(4).Split(3)
	model := nn.NewMLP(ks[0], []int{12, 32, 16, 5}, nn.MLPOptions{})
	x := tensor.Normal(ks[1], 4*n, 12)
	y := tensor.AsType(tensor.MulScalar(tensor.Uniform(ks[2], 4*n), 4.99), tensor.Int32)
	for _, micro := range []int{1, 2} {
		testDPOverlap(t, m, n, model, x, y, micro)
	}
}

func testDPOverlap(t *testing.T, m *shard.Mesh, n int, model nn.MLP, x, y *tensor.Tensor, micro int) {
	train := func(after bool) (nn.MLP, []float64, parallel.Stats) {
		tr, err := parallel.New(model, parallel.Config[nn.MLP, dpBatch]{
			Loss: func(mod nn.MLP, bt dpBatch) *tensor.Tensor {
				return tensor.Mean(tensor.SoftmaxCrossEntropy(mod.Forward(bt.X), bt.Y))
			},
			Strategy: parallel.DP, Mesh: m, Optimizer: optim.Adam(optim.Constant(1e-2)), ReduceAfterBackward: after,
			MicroBatches: micro,
		})
		require.NoError(t, err)
		b := dpBatch{shard.Put(x, tr.BatchSharding()), shard.Put(y, tr.BatchSharding())}
		var losses []float64
		for range 3 {
			l, err := tr.Step(b)
			require.NoError(t, err)
			losses = append(losses, l)
		}
		st, err := tr.Stats(b)
		require.NoError(t, err)
		return tr.Params(), losses, st
	}
	want, wantLoss, _ := train(true)
	got, gotLoss, st := train(false)
	assert.Equal(t, wantLoss, gotLoss, "%d micro-batches", micro)
	wl, gl := pytree.Leaves(want), pytree.Leaves(got)
	for i := range wl {
		assert.Equal(t, wl[i].Float32s(), gl[i].Float32s(), "leaf %d, %d micro-batches", i, micro)
	}
	assert.Positive(t, st.StepTime)
	assert.LessOrEqual(t, st.ExposedComm, st.StepTime)
	if n > 1 {
		assert.Positive(t, st.ExposedComm)
	}
}
