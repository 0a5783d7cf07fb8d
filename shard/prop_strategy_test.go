package shard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func mlpLoss(m nn.MLP, xy [2]*tensor.Tensor) *tensor.Tensor {
	return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(xy[0]), xy[1]))
}

var strategyMeshes = [][]int{{1, 8}, {2, 4}, {4, 2}, {8, 1}}

// TestMLPStrategiesByPropagation places an MLP only with FilterShard and
// the strategies' logical-axis rules, batches by the data axes, and
// differentiates the plain loss: loss and every gradient equal one
// device's, every gradient is laid out like its parameter, and nothing
// falls back to gathering (Strict).
func TestMLPStrategiesByPropagation(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 5))
	model := annotateMLP(nn.NewMLP(tensor.NewKey(3), []int{16, 32, 32, 8}, nn.MLPOptions{}))
	x := randT(r, 16, 16)
	labels := make([]int32, 16)
	for i := range labels {
		labels[i] = int32(r.IntN(8))
	}
	y := tensor.FromInt32(labels, 16)
	want, wantG := autodiff.ValueAndGradWith(mlpLoss)(model, [2]*tensor.Tensor{x, y})
	for _, shape := range strategyMeshes {
		m := shard.NewMesh(shape, []string{"dp", "tp"})
		for _, st := range []mlpStrategy{stDP, stFSDP, stTP, stFSDPTP} {
			t.Run(fmt.Sprintf("%v/%dx%d", st, shape[0], shape[1]), func(t *testing.T) {
				placed := shard.FilterShard(model, m, st.rules(m))
				data := st.DataAxes(m)
				xy := [2]*tensor.Tensor{
					shard.Put(x, shard.NewSharding(m, shard.P(data, nil))),
					shard.Put(y, shard.NewSharding(m, shard.P(data))),
				}
				defer shard.Strict(m)()
				var comm shard.Comm
				stop := shard.Record(m, &comm)
				got, gotG := autodiff.ValueAndGradWith(mlpLoss)(placed, xy)
				stop()
				require.InDelta(t, want.Item(), got.Item(), 1e-5*max(1, abs(want.Item())))
				requireGradsLike(t, wantG, gotG, placed, 1e-5, 1e-6)
				want := expectedMLPBytes(st, m, placed, 16)
				dev := m.Devices()[0]
				for _, kind := range []string{"psum", "psum_scatter", "all_gather", "all_to_all"} {
					require.Equal(t, want[kind], comm.Bytes(dev, kind), "%s bytes\n%s", kind, comm.String())
				}
			})
		}
	}
}

// expectedMLPBytes is what the textbook strategies send per device and
// step for the MLP 16-32-32-8 (batch b), from the parameters' sizes:
//
//   - DP over n devices: one all-reduce of every gradient, 2(n-1)/n of
//     its bytes, and of the loss;
//   - FSDP: an all-gather of every sharded leaf in forward and of the
//     sharded weights again in backward where their input needs a
//     cotangent (not the first layer's: its input is the data), a
//     reduce-scatter of their gradients, all-reduces of the replicated
//     leaves' gradients and of the loss;
//   - TP (Megatron): one all-reduce over tp of the activations per pair of
//     layers in forward, and the data-parallel all-reduce over the data
//     axes of every device's gradient block;
//   - FSDP+TP: FSDP over the data axes of each device's tp block of the
//     data-sharded leaves, the TP all-reduce of the activations, and the
//     all-reduce over the data axes of the other leaves' gradient blocks.
func expectedMLPBytes(st mlpStrategy, m *shard.Mesh, placed nn.MLP, b int64) map[string]int64 {
	d := int64(m.AxisSize(st.DataAxes(m)...))
	t := int64(m.Size()) / d
	loss := 2 * (d - 1) * 4 / d
	out := map[string]int64{}
	for i, l := range placed.Layers {
		for _, p := range []*tensor.Tensor{l.W, l.B} {
			s, _ := shard.ShardingOf(p)
			bytes := int64(p.Bytes())
			sharded := len(s.Spec().Axes()) > 0
			switch st {
			case stDP:
				out["psum"] += 2 * (d - 1) * bytes / d
			case stFSDP:
				if !sharded {
					out["psum"] += 2 * (d - 1) * bytes / d
					continue
				}
				out["psum_scatter"] += (d - 1) * bytes / d
				out["all_gather"] += (d - 1) * bytes / d
				if p == l.W && i > 0 {
					out["all_gather"] += (d - 1) * bytes / d
				}
			case stTP:
				blk := bytes / int64(m.AxisSize(s.Spec().Axes()...))
				out["psum"] += 2 * (d - 1) * blk / d
			case stFSDPTP:
				// FSDP over the data axes of each device's tp block
				var tpAxes []string
				data := false
				for _, a := range s.Spec().Axes() {
					if a == "tp" {
						tpAxes = append(tpAxes, a)
					} else {
						data = true
					}
				}
				blk := bytes / int64(m.AxisSize(tpAxes...))
				if !data {
					out["psum"] += 2 * (d - 1) * (bytes / int64(m.AxisSize(s.Spec().Axes()...))) / d
					continue
				}
				out["psum_scatter"] += (d - 1) * blk / d
				out["all_gather"] += (d - 1) * blk / d
				if p == l.W && i > 0 {
					out["all_gather"] += (d - 1) * blk / d
				}
			}
		}
	}
	if st == stTP || st == stFSDPTP {
		act := b / d * int64(placed.Layers[0].W.Dim(1)) * 4
		out["psum"] += 2 * (t - 1) * act / t
	}
	out["psum"] += loss
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

func abs(v float64) float64 {
	if v < 0 {
		return -v
	}
	return v
}
