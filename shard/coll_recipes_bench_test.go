package shard_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkCollectiveMatMul runs each ring recipe over a mesh of every
// device of the job ("d"), with synchronous shifts (the recipes as they
// were, syncAllGatherMatMulRing and syncMatMulReduceScatterRing) and with
// the overlapped ones, alternately within each iteration so that both see
// the same machine load. It reports the median wall ms and CPU ms of
// each, and "speedup", the synchronous median over the overlapped one.
// x is [batch, 2048] and w [2048, 2048]: the all-gather ring (FSDP) moves
// w's blocks, whose size does not depend on the batch, so a small batch
// leaves little computation to hide the transfers behind; the
// reduce-scatter ring (TP) moves [batch/n, 2048] partial sums. fwd times
// the product, grad the product and its gradients (sum of squares).
//
// Between processes it also reports the overlapped recipe with
// GONOX_ASYNC_PROGRESS=0 (async-noprogress). Under mpirun (build tag
// mpi), run it with -test.benchtime=Nx so that
// every process runs the same iterations, and GONOX_DEVICES=1 for one
// device per process.
func BenchmarkCollectiveMatMul(b *testing.B) {
	const k, mdim = 2048, 2048
	n := len(shard.Devices())
	m := shard.NewMesh([]int{n}, []string{"d"})
	ax := shard.Axes{"d"}
	type recipe struct {
		name        string
		in          shard.Specs
		out         shard.Spec
		sync, async func(c *shard.Ctx, in pair) *tensor.Tensor
	}
	var recipes []recipe
	for _, bidi := range []bool{false, true} {
		suffix := ""
		if bidi {
			suffix = "_bidi"
		}
		recipes = append(recipes,
			recipe{"allgather" + suffix, shard.Specs{"A": shard.P("d", nil), "B": shard.P("d", nil)}, shard.P("d", nil),
				func(c *shard.Ctx, in pair) *tensor.Tensor { return syncAllGatherMatMulRing(c, in.A, in.B, ax, bidi) },
				func(c *shard.Ctx, in pair) *tensor.Tensor { return shard.AllGatherMatMulRing(c, in.A, in.B, ax, bidi) }},
			recipe{"reducescatter" + suffix, shard.Specs{"A": shard.P(nil, "d"), "B": shard.P("d", nil)}, shard.P("d", nil),
				func(c *shard.Ctx, in pair) *tensor.Tensor {
					return syncMatMulReduceScatterRing(c, in.A, in.B, ax, bidi)
				},
				func(c *shard.Ctx, in pair) *tensor.Tensor {
					return shard.MatMulReduceScatterRing(c, in.A, in.B, ax, bidi)
				}})
	}
	for _, rc := range recipes {
		for _, batch := range []int{64, 1024} {
			for _, mode := range []string{"fwd", "grad"} {
				b.Run(fmt.Sprintf("%s/batch=%d/%s", rc.name, batch, mode), func(b *testing.B) {
					key := tensor.NewKey(uint64(batch))
					ks := key.Split(2)
					in := pair{
						shard.Put(tensor.Normal(ks[0], batch, k), shard.NewSharding(m, rc.in["A"])),
						shard.Put(tensor.Normal(ks[1], k, mdim), shard.NewSharding(m, rc.in["B"])),
					}
					step := func(f func(c *shard.Ctx, in pair) *tensor.Tensor) func() {
						mf := shard.Map(m, rc.in, rc.out, f)
						if mode == "fwd" {
							return func() { mf(in) }
						}
						g := autodiff.Grad(func(p pair) *tensor.Tensor { return tensor.Sum(tensor.Square(mf(p))) })
						return func() { g(in) }
					}
					fs, fa := step(rc.sync), step(rc.async)
					// Between processes, also the overlapped recipe whose
					// transfers nobody drives until Wait.
					multi := shard.ProcessCount() > 1
					fa0 := func() {
						defer shard.SetAsyncProgress(0)()
						fa()
					}
					fs()
					fa()
					var ws, wa, w0, cs, ca, c0s []float64
					for b.Loop() {
						t0, c0 := time.Now(), cputime.Used()
						fs()
						t1, c1 := time.Now(), cputime.Used()
						fa()
						t2, c2 := time.Now(), cputime.Used()
						ws = append(ws, t1.Sub(t0).Seconds())
						wa = append(wa, t2.Sub(t1).Seconds())
						cs = append(cs, (c1 - c0).Seconds())
						ca = append(ca, (c2 - c1).Seconds())
						if multi {
							fa0()
							w0 = append(w0, time.Since(t2).Seconds())
							c0s = append(c0s, (cputime.Used() - c2).Seconds())
						}
					}
					med := func(v []float64) float64 { slices.Sort(v); return v[len(v)/2] }
					b.ReportMetric(med(ws)*1e3, "sync-ms")
					b.ReportMetric(med(wa)*1e3, "async-ms")
					b.ReportMetric(med(cs)*1e3, "sync-cpu-ms")
					b.ReportMetric(med(ca)*1e3, "async-cpu-ms")
					b.ReportMetric(med(ws)/med(wa), "speedup")
					if multi {
						b.ReportMetric(med(w0)*1e3, "async-noprogress-ms")
						b.ReportMetric(med(c0s)*1e3, "async-noprogress-cpu-ms")
					}
				})
			}
		}
	}
}
