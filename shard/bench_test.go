package shard_test

import (
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkPsum64MiB all-reduces a 64 MiB float32 block on each of 8
// devices and reports NCCL's bus bandwidth: bytes·2(n-1)/n per second.
// Each iteration donates its result, as a training step donates the
// summed gradients once used (tensor.Donate), so that the next result can
// reuse its storage.
func BenchmarkPsum64MiB(b *testing.B) {
	const n = 8
	const elems = 64 << 20 / 4
	m := shard.NewMesh([]int{n}, []string{"d"})
	x := shard.Put(tensor.Ones(tensor.Float32, n*elems), shard.NewSharding(m, shard.P("d")))
	f := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Psum(x, "d")
	})
	tensor.Donate(f(x))
	b.SetBytes(elems * 4)
	b.ResetTimer()
	for b.Loop() {
		tensor.Donate(f(x))
	}
	sec := b.Elapsed().Seconds() / float64(b.N)
	b.ReportMetric(float64(elems*4)*2*(n-1)/n/sec/1e9, "busGB/s")
	b.ReportMetric(sec*1e3, "ms/op")
}

// BenchmarkMapEmpty measures the overhead of a Map over 8 devices whose fn
// returns its block.
func BenchmarkMapEmpty(b *testing.B) {
	m := shard.NewMesh([]int{8}, []string{"d"})
	x := tensor.Ones(tensor.Float32, 8)
	f := shard.Map(m, shard.P("d"), shard.P("d"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return x })
	for b.Loop() {
		f(x)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e6, "µs/map")
}

// BenchmarkPsumSmall measures the latency of one small all-reduce among 8
// devices (100 psums of f32[16] per Map call).
func BenchmarkPsumSmall(b *testing.B) {
	const per = 100
	m := shard.NewMesh([]int{8}, []string{"d"})
	x := tensor.Ones(tensor.Float32, 8*16)
	f := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		for range per {
			x = c.Psum(x, "d")
			x = c.Vary(x, "d")
		}
		return c.Psum(x, "d")
	})
	for b.Loop() {
		f(x)
	}
	b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)/(per+1)*1e6, "µs/psum")
}

// BenchmarkCopy64MiB copies 64 MiB on every core at once (each core its
// own part) and reports the bytes read and written per second: the memory
// bandwidth that bounds BenchmarkPsum64MiB. bench/compare.sh derives the
// psum bound from it: an 8-way all-reduce in shared memory reads 8 blocks
// and writes one, 9 blocks of traffic.
func BenchmarkCopy64MiB(b *testing.B) {
	const elems = 64 << 20 / 4
	src := make([]float32, elems)
	dst := make([]float32, elems)
	for i := range src {
		src[i] = 1
	}
	workers := runtime.GOMAXPROCS(0)
	run := func() {
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := elems*w/workers, elems*(w+1)/workers
			wg.Go(func() { copy(dst[lo:hi], src[lo:hi]) })
		}
		wg.Wait()
	}
	run()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(2*elems*4)/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GB/s")
}

// BenchmarkHalfCollectives runs psum and all_gather over 8 devices on
// 4M-element blocks in float32 and in bfloat16, alternately within each
// iteration so that both see the same machine load, and reports the
// median ms of each and "speedup", the float32 median over the bf16 one.
// The bf16 all_gather copies half the bytes; the bf16 psum widens each
// chunk to float32, sums it with the float32 kernel and rounds once.
func BenchmarkHalfCollectives(b *testing.B) {
	const n = 8
	const elems = 4 << 20
	m := shard.NewMesh([]int{n}, []string{"d"})
	x32 := shard.Put(tensor.Normal(tensor.NewKey(1), n*elems), shard.NewSharding(m, shard.P("d")))
	x16 := shard.Put(tensor.Convert(shard.Gather(x32), tensor.BFloat16), shard.NewSharding(m, shard.P("d")))
	for _, c := range []struct {
		name string
		f    func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
	}{
		{"psum", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor { return c.Psum(x, "d") }},
		{"all_gather", func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return c.AllGatherInvariant(tensor.SliceAxis(x, 0, 0, elems/n), shard.Axes{"d"}, 0, true)
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			f := shard.Map(m, shard.P("d"), shard.P(), c.f)
			f(x32)
			f(x16)
			var t32, t16 []float64
			for b.Loop() {
				t0 := time.Now()
				f(x32)
				t1 := time.Now()
				f(x16)
				t32 = append(t32, t1.Sub(t0).Seconds())
				t16 = append(t16, time.Since(t1).Seconds())
			}
			med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
			m32, m16 := med(t32), med(t16)
			b.ReportMetric(m32*1e3, "f32-ms")
			b.ReportMetric(m16*1e3, "bf16-ms")
			b.ReportMetric(m32/m16, "speedup")
		})
	}
}
