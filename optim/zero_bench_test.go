package optim_test

import (
	"fmt"
	"testing"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// leavesIn is one device's part of a per-leaf sharded update: its row
// blocks of every parameter and gradient, and the Adam state of those
// blocks (parallel's DP step keeps its state so).
type leavesIn struct {
	P, G []*tensor.Tensor
	S    optim.AdamState
}

// BenchmarkZeROLayout compares the two ways of sharding the Adam update of
// the MLP 784-1024-1024-10 over n devices that parallel's DP step could
// take: "flat/devices=n" lays the gradients and parameters end to end
// (optim.ZeRO.Flatten, two copies of 7.4 MB per step, timed here with the
// update of each device's part of the flat vector), "leaves/devices=n"
// updates each device's row block of every leaf where it lies (a leaf
// whose rows n does not divide is updated whole on every device). Both
// without the collectives around them, which move the same bytes.
func BenchmarkZeROLayout(b *testing.B) {
	params, grads := mlpParamsAndGrads()
	tx := optim.Adam(optim.Constant(1e-3))
	for _, n := range []int{1, 2, 8} {
		mesh := shard.NewMesh([]int{n}, []string{"dp"})
		b.Run(fmt.Sprintf("flat/devices=%d", n), func(b *testing.B) {
			z := optim.NewZeRO(tx, params, n)
			spec := shard.SpecFunc(func(_ pytree.Path, x *tensor.Tensor) shard.Spec {
				if x.Rank() == 0 {
					return shard.P()
				}
				return shard.P("dp")
			})
			update := shard.Map(mesh, spec, spec, func(_ *shard.Ctx, in zeroIn) zeroIn {
				p, s := z.UpdateShard(in.P, in.G, in.S)
				return zeroIn{P: p, G: in.G, S: s.(optim.AdamState)}
			})
			s := shard.FilterShard(z.Init(), mesh, spec).(optim.AdamState)
			cpu0 := cputime.Used()
			for b.Loop() {
				// What the flat layout adds per step: the flat gradient
				// and parameters (the latter the all-gather would give).
				in := zeroIn{P: z.Flatten(params), G: z.Flatten(grads), S: s}
				in = shard.FilterShard(in, mesh, spec)
				s = update(in).S
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/update")
			b.ReportMetric((cputime.Used()-cpu0).Seconds()/float64(b.N)*1e3, "cpu-ms/update")
		})
		b.Run(fmt.Sprintf("leaves/devices=%d", n), func(b *testing.B) {
			// Leaf i of P, G, Mu and Nu is parameter i (the spec is asked
			// with block shapes on the way out, so decide by the path).
			spec := shard.SpecFunc(func(path pytree.Path, x *tensor.Tensor) shard.Spec {
				if x.Rank() == 0 || params[path[len(path)-1].Index].Dim(0)%n != 0 {
					return shard.P()
				}
				return shard.P("dp")
			})
			update := shard.Map(mesh, spec, spec, func(_ *shard.Ctx, in leavesIn) leavesIn {
				p, s := optim.Step(tx, in.P, in.G, in.S)
				return leavesIn{P: p, G: in.G, S: s.(optim.AdamState)}
			})
			in := shard.FilterShard(leavesIn{P: params, G: grads, S: tx.Init(params).(optim.AdamState)}, mesh, spec)
			cpu0 := cputime.Used()
			for b.Loop() {
				in = update(in)
			}
			b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/update")
			b.ReportMetric((cputime.Used()-cpu0).Seconds()/float64(b.N)*1e3, "cpu-ms/update")
		})
	}
}
