//go:build mpi

package mpi_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// Under mpirun, benchmarks must run the same number of iterations on every
// process: use -test.benchtime=Nx (bench.sh does). Select one size with
// -test.bench 'Allreduce/MiB=4/' so that only its arrays are allocated.

// loopTimes runs f b.N times (after one warm-up call) and reports, beside
// go test's mean, the median and the shortest time of one call, which a
// shared machine disturbs less, each as unit-median and unit-best through
// metric (seconds per call to the reported value).
func loopTimes(b *testing.B, f func(), unit string, metric func(s float64) float64) {
	f()
	ts := make([]float64, 0, b.N)
	for b.Loop() {
		t0 := time.Now()
		f()
		ts = append(ts, time.Since(t0).Seconds())
	}
	slices.Sort(ts)
	mean := b.Elapsed().Seconds() / float64(b.N)
	med := ts[len(ts)/2]
	if len(ts)%2 == 0 {
		med = (ts[len(ts)/2-1] + ts[len(ts)/2]) / 2
	}
	b.ReportMetric(metric(mean), unit)
	b.ReportMetric(metric(med), unit+"-median")
	b.ReportMetric(metric(ts[0]), unit+"-best")
}

// BenchmarkAllreduce: a float32 sum over every process, through shard.Map
// (Psum over a mesh of one device per process; each result is donated,
// tensor.Donate, so the next one reuses its storage), through shard.Map on
// a mesh made with shared memory turned off (mpicoll: MPI_Allreduce from
// the block into the result), and through the binding directly (send and
// receive buffers reused, as the C reference testdata/allreduce.c does),
// in GB/s of array size over time per call: mean, median and shortest
// call (the figures the C reference prints).
func BenchmarkAllreduce(b *testing.B) {
	for _, mib := range []int{4, 64} {
		b.Run(fmt.Sprintf("MiB=%d", mib), func(b *testing.B) {
			n := mib << 18
			x := tensor.Full(tensor.Float32, 1, len(shard.Devices())*n)
			gbs := func(s float64) float64 { return float64(4*n) / s / 1e9 }
			for _, c := range []struct{ name, shm string }{{"gonox", "1"}, {"mpicoll", "0"}} {
				b.Setenv(mpi.SharedMemoryEnv, c.shm) // read when the mesh is made
				m := shard.NewMesh([]int{len(shard.Devices())}, []string{"d"})
				xs := shard.Put(x, shard.NewSharding(m, shard.P("d")))
				psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") })
				b.Run(c.name, func(b *testing.B) {
					// Each result is donated once read, as a training step
					// donates its summed gradients: the next psum writes
					// into its storage, as the C loop reuses its receive
					// buffer.
					loopTimes(b, func() { tensor.Donate(psum(xs)) }, "GB/s", gbs)
				})
			}
			send, recv := make([]float32, n), make([]float32, n)
			for i := range send { // touch every page, as the C reference does
				send[i], recv[i] = float32(i%7), 1
			}
			b.Run("binding", func(b *testing.B) {
				loopTimes(b, func() { mpi.Allreduce(mpi.World(), send, recv, mpi.Sum) }, "GB/s", gbs)
			})
		})
	}
}

type dpBatch struct{ X, Y *tensor.Tensor }

// BenchmarkDPStep: one data-parallel training step of parallel.Trainer
// with strategy DP (forward, backward, gradient reduce-scatter, Adam,
// all-gather) of the MLP 784-1024-1024-10 on a global batch of 256, over
// a mesh of every device of the job (run with one device per process and
// GOMAXPROCS=1 to compare processes with cores). It reports wall time
// (mean, median and shortest step), this process's CPU time per step
// (warm-up included) and the median time the process's first device
// waited for collectives (exposed-ms/step: Trainer.Stats.ExposedComm).
// Over several processes it runs three times: with each gradient's
// reduction started during the backward pass (processes=N, the default),
// with the reductions after it (processes=N-after,
// Config.ReduceAfterBackward), through MPI's collectives instead of
// shared memory (processes=N-mpicoll, a mesh made with GONOX_MPI_SHM=0),
// and with the gradients reduce-scattered in bfloat16 (processes=N-bf16,
// Config.ReduceDType: half the reduce-scatter's bytes, not the float32
// step's numbers).
func BenchmarkDPStep(b *testing.B) {
	key := tensor.NewKey(1)
	ks := key.Split(3)
	model := nn.NewMLP(ks[0], []int{784, 1024, 1024, 10}, nn.MLPOptions{})
	x := tensor.Normal(ks[1], 256, 784)
	y := tensor.AsType(tensor.MulScalar(tensor.Uniform(ks[2], 256), 9.99), tensor.Int32)
	type variant struct {
		suffix, shm string
		after       bool
		reduce      tensor.DType
	}
	variants := []variant{{"", "1", false, 0}}
	if mpi.Size() > 1 {
		variants = append(variants, variant{"-after", "1", true, 0}, variant{"-mpicoll", "0", false, 0}, variant{"-bf16", "1", false, tensor.BFloat16})
	}
	for _, v := range variants {
		b.Setenv(mpi.SharedMemoryEnv, v.shm) // read when the mesh is made
		m := shard.NewMesh([]int{len(shard.Devices())}, []string{"dp"})
		tr, err := parallel.New(model, parallel.Config[nn.MLP, dpBatch]{
			Loss: func(mod nn.MLP, bt dpBatch) *tensor.Tensor {
				return tensor.Mean(tensor.SoftmaxCrossEntropy(mod.Forward(bt.X), bt.Y))
			},
			Strategy: parallel.DP, Mesh: m, Optimizer: optim.Adam(optim.Constant(1e-3)),
			ReduceAfterBackward: v.after, ReduceDType: v.reduce,
		})
		if err != nil {
			b.Fatal(err)
		}
		var dev0 *shard.Device
		for _, d := range m.Devices() {
			if d.IsLocal() {
				dev0 = d
				break
			}
		}
		batch := dpBatch{shard.Put(x, tr.BatchSharding()), shard.Put(y, tr.BatchSharding())}
		var exposed []float64
		step := func() {
			if _, err := tr.Step(batch); err != nil {
				b.Fatal(err)
			}
			exposed = append(exposed, tr.Comm().Waited(dev0).Seconds()*1e3)
		}
		b.Run(fmt.Sprintf("processes=%d%s", mpi.Size(), v.suffix), func(b *testing.B) {
			exposed = exposed[:0]
			c0 := cputime.Used()
			loopTimes(b, step, "ms/step", func(s float64) float64 { return s * 1e3 })
			b.ReportMetric((cputime.Used()-c0).Seconds()/float64(b.N+1)*1e3, "cpu-ms/step")
			slices.Sort(exposed)
			b.ReportMetric(exposed[len(exposed)/2], "exposed-ms/step")
		})
	}
}
