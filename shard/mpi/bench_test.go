//go:build mpi

package mpi_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// Under mpirun, benchmarks must run the same number of iterations on every
// process: use -test.benchtime=Nx (bench.sh does).

// BenchmarkAllreduce: a float32 sum over every process, through shard.Map
// (Psum over a mesh of one device per process) and through the binding
// directly, in GB/s of array size over time per call (the figure the C
// reference in testdata/allreduce.c prints).
func BenchmarkAllreduce(b *testing.B) {
	for _, mib := range []int{4, 64} {
		n := mib << 18
		x := tensor.Full(tensor.Float32, 1, len(shard.Devices())*n)
		m := shard.NewMesh([]int{len(shard.Devices())}, []string{"d"})
		xs := shard.Put(x, shard.NewSharding(m, shard.P("d")))
		psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
		b.Run(fmt.Sprintf("gonox/MiB=%d", mib), func(b *testing.B) {
			psum(xs)
			for b.Loop() {
				psum(xs)
			}
			b.ReportMetric(float64(4*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
		send, recv := make([]float32, n), make([]float32, n)
		for i := range send { // touch every page, as the C reference does
			send[i], recv[i] = float32(i%7), 1
		}
		b.Run(fmt.Sprintf("binding/MiB=%d", mib), func(b *testing.B) {
			mpi.Allreduce(mpi.World(), send, recv, mpi.Sum)
			for b.Loop() {
				mpi.Allreduce(mpi.World(), send, recv, mpi.Sum)
			}
			b.ReportMetric(float64(4*n)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
		})
	}
}

type dpBatch struct{ X, Y *tensor.Tensor }

// BenchmarkDPStep: one data-parallel training step (forward, backward,
// gradient all-reduce, Adam) of the MLP 784-1024-1024-10 on a global batch
// of 256, over a mesh of every device of the job (run with one device per
// process and GOMAXPROCS=1 to compare processes with cores).
func BenchmarkDPStep(b *testing.B) {
	key := tensor.NewKey(1)
	ks := key.Split(3)
	model := nn.NewMLP(ks[0], []int{784, 1024, 1024, 10}, nn.MLPOptions{})
	x := tensor.Normal(ks[1], 256, 784)
	y := tensor.AsType(tensor.MulScalar(tensor.Uniform(ks[2], 256), 9.99), tensor.Int32)
	m := shard.NewMesh([]int{len(shard.Devices())}, []string{"dp"})
	bs := shard.NewSharding(m, shard.P("dp"))
	batch := dpBatch{shard.Put(x, bs), shard.Put(y, bs)}
	loss := shard.Map(m, shard.Specs{"M": shard.P(), "B": shard.P("dp")}, shard.P(), func(c *shard.Ctx, in struct {
		M nn.MLP
		B dpBatch
	}) *tensor.Tensor {
		return c.Pmean(tensor.Mean(tensor.SoftmaxCrossEntropy(in.M.Forward(in.B.X), in.B.Y)), "dp")
	})
	vg := autodiff.ValueAndGradWith(func(mod nn.MLP, b dpBatch) *tensor.Tensor {
		return loss(struct {
			M nn.MLP
			B dpBatch
		}{mod, b})
	})
	opt := optim.Adam(optim.Constant(1e-3))
	st := opt.Init(model)
	step := func() {
		_, g := vg(model, batch)
		var u any
		u, st = opt.Update(g, st, model)
		model = optim.Apply(model, u)
	}
	b.Run(fmt.Sprintf("processes=%d", mpi.Size()), func(b *testing.B) {
		step()
		for b.Loop() {
			step()
		}
		b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
	})
}
