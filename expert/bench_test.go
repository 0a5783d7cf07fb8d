package expert_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkMoEStep measures a MoE layer's forward and backward pass
// (gradients for the router, the experts and the input) on 4096 tokens of
// width 128, 8 experts of 256, top-2, capacity factor 1.25: on one device
// (nn.MoE, the anchor) and expert parallel over ep = 2, 4, 8 simulated
// devices (expert.Forward inside shard.Map, tokens and experts split over
// ep). Metrics: tokens/s, and the bytes the ragged all-to-alls move per
// token (forward dispatch and return plus their transposes in backward,
// summed over devices), and the process's CPU time a step (cpu-ms/op:
// with 8 devices on fewer cores, the figure that load does not stretch).
// Run with
//
//	go test ./expert -run '^$' -bench MoEStep -benchtime 20x
func BenchmarkMoEStep(b *testing.B) {
	const N, D, H, E = 4096, 128, 256, 8
	m := nn.NewMoE(tensor.NewKey(1), D, H, E, nn.MoEOptions{TopK: 2, CapacityFactor: 1.25, Activation: nn.Gelu})
	x := tensor.Normal(tensor.NewKey(2), N, D)
	cot := tensor.Normal(tensor.NewKey(3), N, D)
	b.Run("single", func(b *testing.B) {
		cpu0 := cputime.Used()
		for b.Loop() {
			autodiff.ValueAndGrad(func(p params) *tensor.Tensor {
				o := p.M.Forward(p.X)
				return tensor.Add(tensor.Sum(tensor.Mul(o.Output, cot)), o.AuxLoss)
			})(params{M: m, X: x})
		}
		reportCPU(b, cpu0)
		b.ReportMetric(float64(N)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	})
	for _, ep := range []int{2, 4, 8} {
		b.Run(fmt.Sprintf("ep=%d", ep), func(b *testing.B) {
			mesh := shard.NewMeshOn(shard.Devices()[:ep], []int{ep}, []string{"ep"})
			cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"ep"}}
			var comm shard.Comm
			type in struct {
				M      nn.MoE
				X, Cot *tensor.Tensor
			}
			tok := shard.P("ep")
			specs := shard.Specs{"M.Up": tok, "M.Down": tok, "X": tok, "Cot": tok, "": shard.P()}
			step := shard.Map(mesh, specs, specs, func(c *shard.Ctx, in in) params {
				_, g := autodiff.ValueAndGrad(func(p params) *tensor.Tensor {
					o := expert.Forward(c, p.M, p.X, cfg)
					return tensor.Add(c.Psum(tensor.Sum(tensor.Mul(o.Output, in.Cot)), "ep"), o.AuxLoss)
				})(params{M: in.M, X: in.X})
				return g
			}, shard.WithComm(&comm))
			placed := shard.FilterShard(in{M: m, X: x, Cot: cot}, mesh, specs)
			cpu0 := cputime.Used()
			for b.Loop() {
				comm.Reset()
				step(placed)
			}
			reportCPU(b, cpu0)
			b.ReportMetric(float64(N)*float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
			var ragged int64
			for _, d := range mesh.Devices() {
				ragged += comm.Bytes(d, "ragged_all_to_all")
			}
			b.ReportMetric(float64(ragged)/N, "dispatch-B/token")
		})
	}
}

// reportCPU reports the process's CPU time since cpu0 per iteration.
func reportCPU(b *testing.B, cpu0 time.Duration) {
	b.ReportMetric(float64(cputime.Used()-cpu0)/float64(time.Millisecond)/float64(b.N), "cpu-ms/op")
}
