package expert_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func toF64(v []float32) []float64 {
	out := make([]float64, len(v))
	for i, e := range v {
		out[i] = float64(e)
	}
	return out
}

// params is what the tests differentiate: the layer and its input.
type params struct {
	M nn.MoE
	X *tensor.Tensor
}

// objective is a scalar that depends on everything the layer returns
// differentiably: a fixed projection of the output plus the auxiliary
// losses.
func objective(out nn.MoEOutput, cot *tensor.Tensor) *tensor.Tensor {
	l := tensor.Sum(tensor.Mul(shard.Gather(out.Output), cot))
	l = tensor.Add(l, tensor.MulScalar(shard.Gather(out.AuxLoss), 0.5))
	return tensor.Add(l, tensor.MulScalar(shard.Gather(out.RouterZLoss), 0.25))
}

var meshes = []struct{ dp, ep int }{{1, 8}, {2, 4}, {4, 2}, {8, 1}, {1, 2}}

// On every dp×ep mesh the expert-parallel layer equals the single-device
// layer with the per-sender capacity rule (one sender per device): output,
// auxiliary losses, dropped choices, statistics and every gradient.
func TestForwardEqualsSingleDevicePerSender(t *testing.T) {
	for _, c := range []struct {
		name   string
		k      int
		cf     float64
		gating nn.Gating
	}{
		{"top2 cf1", 2, 1.0, nn.GateTopKSoftmax},
		{"top1 softmax cf1.25", 1, 1.25, nn.GateSoftmaxTopK},
		{"top3 cf0.5", 3, 0.5, nn.GateTopKSoftmax},
	} {
		for _, ms := range meshes {
			t.Run(fmt.Sprintf("%s/%dx%d", c.name, ms.dp, ms.ep), func(t *testing.T) {
				const B, T, D, H, E = 16, 6, 8, 12, 8
				devs := ms.dp * ms.ep
				mesh := shard.NewMeshOn(shard.Devices()[:devs], []int{ms.dp, ms.ep}, []string{"dp", "ep"})
				cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
				m := nn.NewMoE(tensor.NewKey(1), D, H, E, nn.MoEOptions{TopK: c.k, CapacityFactor: c.cf, Gating: c.gating, Activation: nn.Gelu})
				x := tensor.Normal(tensor.NewKey(2), B, T, D)
				cot := tensor.Normal(tensor.NewKey(3), B, T, D)
				single := m
				single.Senders = devs

				want := single.Forward(x)
				got := expert.Apply(mesh, m, x, cfg)
				assert.InDeltaSlice(t, toF64(want.Output.Float32s()), toF64(shard.Gather(got.Output).Float32s()), 1e-5)
				assert.InDelta(t, want.AuxLoss.Item(), shard.Gather(got.AuxLoss).Item(), 1e-5)
				assert.InDelta(t, want.RouterZLoss.Item(), shard.Gather(got.RouterZLoss).Item(), 1e-5)
				assert.Equal(t, want.Dropped.Bools(), shard.Gather(got.Dropped).Bools())
				assert.Equal(t, want.ExpertIDs.Ints(), shard.Gather(got.ExpertIDs).Ints())
				assert.InDeltaSlice(t, toF64(want.Gates.Float32s()), toF64(shard.Gather(got.Gates).Float32s()), 1e-6)
				assert.Equal(t, want.Load.Ints(), shard.Gather(got.Load).Ints())
				assert.Equal(t, want.Processed.Ints(), shard.Gather(got.Processed).Ints())
				assert.Equal(t, want.Capacity, got.Capacity)

				nd := 0
				for _, d := range want.Dropped.Bools() {
					if d {
						nd++
					}
				}
				if c.cf < 1.25 {
					assert.Positive(t, nd, "the case should drop choices")
				}

				_, g1 := autodiff.ValueAndGrad(func(p params) *tensor.Tensor {
					return objective(p.M.Forward(p.X), cot)
				})(params{M: single, X: x})
				_, g2 := autodiff.ValueAndGrad(func(p params) *tensor.Tensor {
					return objective(expert.Apply(mesh, p.M, p.X, cfg), cot)
				})(params{M: m, X: x})
				for _, pair := range []struct {
					name string
					a, b *tensor.Tensor
				}{{"Router", g1.M.Router, g2.M.Router}, {"Up", g1.M.Up, g2.M.Up}, {"Down", g1.M.Down, g2.M.Down}, {"X", g1.X, g2.X}} {
					require.NotNil(t, pair.b, pair.name)
					assert.InDeltaSlice(t, toF64(pair.a.Float32s()), toF64(shard.Gather(pair.b).Float32s()), 1e-5, pair.name)
				}
			})
		}
	}
}

// The expert axes may be any of the token axes, major or minor, and more
// than one: the layer still equals the single-device one with a sender per
// device (in the order of the token axes).
func TestForwardExpertAxesAnywhere(t *testing.T) {
	const B, T, D, H, E = 16, 4, 8, 12, 8
	for _, c := range []struct {
		sizes          []int
		names, experts []string
	}{
		{[]int{2, 4}, []string{"ep", "dp"}, []string{"ep"}},
		{[]int{2, 2, 2}, []string{"a", "b", "c"}, []string{"a", "c"}},
		{[]int{2, 2, 2}, []string{"a", "b", "c"}, []string{"c", "a"}},
	} {
		t.Run(fmt.Sprint(c.names, c.experts), func(t *testing.T) {
			mesh := shard.NewMesh(c.sizes, c.names)
			cfg := expert.Config{Experts: c.experts, Tokens: c.names}
			m := nn.NewMoE(tensor.NewKey(11), D, H, E, nn.MoEOptions{CapacityFactor: 1})
			x := tensor.Normal(tensor.NewKey(12), B, T, D)
			single := m
			single.Senders = mesh.Size()
			want := single.Forward(x)
			got := expert.Apply(mesh, m, x, cfg)
			assert.InDeltaSlice(t, toF64(want.Output.Float32s()), toF64(shard.Gather(got.Output).Float32s()), 1e-5)
			assert.Equal(t, want.Dropped.Bools(), shard.Gather(got.Dropped).Bools())
			assert.Equal(t, want.Processed.Ints(), shard.Gather(got.Processed).Ints())
			assert.InDelta(t, want.AuxLoss.Item(), shard.Gather(got.AuxLoss).Item(), 1e-5)
		})
	}
}

// With room for every choice nothing drops, and the expert-parallel layer
// equals the global-capacity layer too.
func TestForwardNoDropEqualsGlobal(t *testing.T) {
	const N, D, H, E = 64, 8, 8, 8
	mesh := shard.NewMesh([]int{2, 4}, []string{"dp", "ep"})
	cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
	x := tensor.Normal(tensor.NewKey(4), N, D)
	for _, opts := range []nn.MoEOptions{{NoDrop: true}, {CapacityFactor: float64(E)}} {
		m := nn.NewMoE(tensor.NewKey(5), D, H, E, opts)
		want := m.Forward(x)
		got := expert.Apply(mesh, m, x, cfg)
		for _, d := range shard.Gather(got.Dropped).Bools() {
			require.False(t, d)
		}
		assert.InDeltaSlice(t, toF64(want.Output.Float32s()), toF64(shard.Gather(got.Output).Float32s()), 1e-5)
		assert.InDelta(t, want.AuxLoss.Item(), shard.Gather(got.AuxLoss).Item(), 1e-5)
	}
}

// A hand-worked case with drops on 2 devices, one expert each: expert e
// multiplies its input by e+1, the router is the identity on 2 features
// (a token's logits are the token), k = 1 with probability gates, capacity
// ceil(4·1/2·1) = 2 per sender. Device 0 holds tokens 0-3, three of which
// pick expert 0 (it keeps the two most probable, 2 then 0); device 1
// holds tokens 4-7, all for expert 1 (keeps 7 and 5). Kept tokens come
// back scaled by gate·(e+1); dropped ones are 0.
func TestForwardHandWorked(t *testing.T) {
	mesh := shard.NewMeshOn(shard.Devices()[:2], []int{2}, []string{"ep"})
	cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"ep"}}
	m := nn.MoE{
		Router: tensor.FromFloat32([]float32{1, 0, 0, 1}, 2, 2),
		Up:     tensor.FromFloat32([]float32{1, 0, 0, 1, 1, 0, 0, 1}, 2, 2, 2),
		Down:   tensor.FromFloat32([]float32{1, 0, 0, 1, 2, 0, 0, 2}, 2, 2, 2),
		TopK:   1, CapacityFactor: 1, Gating: nn.GateSoftmaxTopK, Activation: nn.Identity,
	}
	x := tensor.FromFloat64([]float64{
		2, 0, // 0 → e0, p = σ(2)
		1, 0, // 1 → e0, σ(1): dropped (third)
		3, 0, // 2 → e0, σ(3)
		0, 1, // 3 → e1, σ(1)
		0, 2, // 4 → e1, σ(2): dropped (third on device 1)
		0, 3, // 5 → e1, σ(3)
		0, 1, // 6 → e1, σ(1): dropped
		0, 4, // 7 → e1, σ(4)
	}, 8, 2)
	sig := func(v float64) float64 { return 1 / (1 + mathExp(-v)) }
	want := []float64{
		2 * sig(2), 0,
		0, 0,
		3 * sig(3), 0,
		0, 2 * sig(1),
		0, 0,
		0, 2 * 3 * sig(3),
		0, 0,
		0, 2 * 4 * sig(4),
	}
	out := expert.Apply(mesh, m, x, cfg)
	assert.Equal(t, []bool{false, true, false, false, true, false, true, false}, shard.Gather(out.Dropped).Bools())
	assert.InDeltaSlice(t, want, toF64(shard.Gather(out.Output).Float32s()), 1e-6)
	assert.Equal(t, []int{3, 5}, shard.Gather(out.Load).Ints())
	assert.Equal(t, []int{2, 3}, shard.Gather(out.Processed).Ints())
	assert.Equal(t, 2, out.Capacity)
}

func TestForwardPanics(t *testing.T) {
	mesh := shard.NewMesh([]int{2, 4}, []string{"dp", "ep"})
	m := nn.NewMoE(tensor.NewKey(1), 4, 4, 6, nn.MoEOptions{})
	x := tensor.Zeros(tensor.Float32, 16, 4)
	require.PanicsWithValue(t, `expert.Apply: expert axis "ep" is not among the token axes [dp]`, func() {
		expert.Apply(mesh, m, x, expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp"}})
	})
	require.PanicsWithValue(t, "expert.Apply: Config.Experts names no mesh axis", func() {
		expert.Apply(mesh, m, x, expert.Config{Tokens: shard.Axes{"dp"}})
	})
	// 6 experts do not split over ep=4: the placement itself refuses.
	assert.Panics(t, func() {
		expert.Apply(mesh, m, x, expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}})
	})
}

// Gradients taken inside a hand-written shard.Map, as a training step does:
// the replicated router's gradient comes out summed over the devices, the
// experts' gradients stay on the devices holding them (summed over dp).
// The layer meets the devices in one all-gather (the counts) and two
// ragged all-to-alls forward, and backward in the transposed return
// exchange (x is not differentiated here, so the dispatch's transpose is
// not needed): no all-to-all of offsets.
func TestGradientsInsideMap(t *testing.T) {
	const N, D, H, E = 64, 8, 8, 8
	mesh := shard.NewMesh([]int{2, 4}, []string{"dp", "ep"})
	cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
	m := nn.NewMoE(tensor.NewKey(7), D, H, E, nn.MoEOptions{CapacityFactor: 1})
	x := tensor.Normal(tensor.NewKey(8), N, D)
	cot := tensor.Normal(tensor.NewKey(9), N, D)
	type in struct {
		M      nn.MoE
		X, Cot *tensor.Tensor
	}
	tok := shard.P([]string{"dp", "ep"})
	inSpecs := shard.Specs{"M.Up": shard.P("ep"), "M.Down": shard.P("ep"), "X": tok, "Cot": tok, "": shard.P()}
	outSpecs := shard.Specs{"Up": shard.P("ep"), "Down": shard.P("ep"), "": shard.P()}
	var comm shard.Comm
	grads := shard.Map(mesh, inSpecs, outSpecs, func(c *shard.Ctx, in in) nn.MoE {
		_, g := autodiff.ValueAndGrad(func(m nn.MoE) *tensor.Tensor {
			o := expert.Forward(c, m, in.X, cfg)
			l := c.Psum(tensor.Sum(tensor.Mul(o.Output, in.Cot)), "dp", "ep")
			return tensor.Add(l, o.AuxLoss)
		})(in.M)
		return g
	}, shard.WithComm(&comm))(in{M: m, X: x, Cot: cot})
	assert.Equal(t, 1, comm.Calls("all_gather"))
	assert.Equal(t, 3, comm.Calls("ragged_all_to_all"))
	assert.Equal(t, 0, comm.Calls("all_to_all"))

	single := m
	single.Senders = mesh.Size()
	_, want := autodiff.ValueAndGrad(func(m nn.MoE) *tensor.Tensor {
		o := m.Forward(x)
		return tensor.Add(tensor.Sum(tensor.Mul(o.Output, cot)), o.AuxLoss)
	})(single)
	assert.Equal(t, "float32[8@ep,8,8]", grads.Up.Type())
	for _, pair := range [][2]*tensor.Tensor{{want.Router, grads.Router}, {want.Up, grads.Up}, {want.Down, grads.Down}} {
		assert.InDeltaSlice(t, toF64(pair[0].Float32s()), toF64(shard.Gather(pair[1]).Float32s()), 1e-5)
	}
}

// A device whose experts nobody chose receives no rows, computes nothing
// and returns nothing; gradients still flow.
func TestForwardIdleExpertDevice(t *testing.T) {
	mesh := shard.NewMeshOn(shard.Devices()[:2], []int{2}, []string{"ep"})
	cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"ep"}}
	m := nn.MoE{
		Router: tensor.FromFloat32([]float32{1, 0, 0, 1}, 2, 2),
		Up:     tensor.FromFloat32([]float32{1, 0, 0, 1, 1, 0, 0, 1}, 2, 2, 2),
		Down:   tensor.FromFloat32([]float32{1, 0, 0, 1, 2, 0, 0, 2}, 2, 2, 2),
		TopK:   1, CapacityFactor: 2, Gating: nn.GateSoftmaxTopK, Activation: nn.Identity,
	}
	x := tensor.FromFloat64([]float64{1, 0, 2, 0, 3, 0, 4, 0}, 4, 2) // all pick expert 0
	single := m
	single.Senders = 2
	want := single.Forward(x)
	got := expert.Apply(mesh, m, x, cfg)
	assert.Equal(t, []int{4, 0}, shard.Gather(got.Load).Ints())
	assert.InDeltaSlice(t, toF64(want.Output.Float32s()), toF64(shard.Gather(got.Output).Float32s()), 1e-6)
	_, g := autodiff.ValueAndGrad(func(p params) *tensor.Tensor {
		return objective(expert.Apply(mesh, p.M, p.X, cfg), tensor.OnesLike(x))
	})(params{M: m, X: x})
	assert.Equal(t, []float32{0, 0, 0, 0}, shard.Gather(g.M.Up).Float32s()[4:]) // expert 1 unused
}
