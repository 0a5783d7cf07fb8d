package nn_test

import (
	"fmt"
	"math"
	"sort"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// handMoE has 3 experts over 3 features with an identity router (so a
// token's logits are the token itself), Up[e] = I and Down[e] = (e+1)·I,
// and no activation: expert e multiplies its input by e+1.
func handMoE(k int, cf float64, noDrop bool, g nn.Gating) nn.MoE {
	eye := []float32{1, 0, 0, 0, 1, 0, 0, 0, 1}
	var up, down []float32
	for e := range 3 {
		up = append(up, eye...)
		for _, v := range eye {
			down = append(down, v*float32(e+1))
		}
	}
	return nn.MoE{
		Router: tensor.FromFloat32(eye, 3, 3),
		Up:     tensor.FromFloat32(up, 3, 3, 3),
		Down:   tensor.FromFloat32(down, 3, 3, 3),
		TopK:   k, CapacityFactor: cf, NoDrop: noDrop, Gating: g,
		Activation: nn.Identity,
	}
}

type choice struct {
	expert int
	kept   bool
}

func TestMoEHandWorked(t *testing.T) {
	// Six tokens; with the identity router each row is its own logits.
	x1 := [][]float64{{2, 0, 0}, {1, 0, 0}, {3, 0, 0}, {0, 1, 0}, {0.5, 0, 0}, {0, 0, 1}}
	x2 := [][]float64{{3, 2, 0}, {2, 0, 1}, {0, 3, 1}, {1, 0, 4}, {2.5, 0, 0.5}, {0, 1, 2}}
	cases := []struct {
		name     string
		x        [][]float64
		k        int
		cf       float64
		noDrop   bool
		gating   nn.Gating
		capacity int
		want     [][]choice // per token, best expert first
	}{
		{
			// Expert 0 is chosen by tokens 0, 1, 2 and 4 but holds
			// ceil(6·1/3·1) = 2: it keeps the two most probable, 2 and 0.
			name: "k=1 switch gating, capacity 2", x: x1, k: 1, cf: 1, gating: nn.GateSoftmaxTopK, capacity: 2,
			want: [][]choice{{{0, true}}, {{0, false}}, {{0, true}}, {{1, true}}, {{0, false}}, {{2, true}}},
		},
		{
			// A softmax over one logit is 1 for every token: all priorities
			// tie and expert 0 keeps the first two tokens in order.
			name: "k=1 top-k softmax: ties keep token order", x: x1, k: 1, cf: 1, gating: nn.GateTopKSoftmax, capacity: 2,
			want: [][]choice{{{0, true}}, {{0, true}}, {{0, false}}, {{1, true}}, {{0, false}}, {{2, true}}},
		},
		{
			// Capacity ceil(6·2/3·0.5) = 2 per expert.
			//   expert 0: t4 .881, t0 .731, t1 .731 (tie, after t0), t3 .047 → keeps t4, t0
			//   expert 1: t2 .881, t0 .269, t5 .269 (tie, after t0)         → keeps t2, t0
			//   expert 2: t3 .953, t5 .731, t1 .269, t2 .119, t4 .119       → keeps t3, t5
			name: "k=2 capacity factor 0.5", x: x2, k: 2, cf: 0.5, capacity: 2,
			want: [][]choice{
				{{0, true}, {1, true}}, {{0, false}, {2, false}}, {{1, true}, {2, false}},
				{{2, true}, {0, false}}, {{0, true}, {2, false}}, {{2, true}, {1, false}},
			},
		},
		{
			// Capacity 4: only expert 2 overflows (5 choices); the last of
			// its two .119 choices, t4's, goes.
			name: "k=2 capacity factor 1", x: x2, k: 2, cf: 1, capacity: 4,
			want: [][]choice{
				{{0, true}, {1, true}}, {{0, true}, {2, true}}, {{1, true}, {2, true}},
				{{2, true}, {0, true}}, {{0, true}, {2, false}}, {{2, true}, {1, true}},
			},
		},
		{
			name: "k=2 no dropping", x: x2, k: 2, cf: 0.5, noDrop: true, capacity: 6,
			want: [][]choice{
				{{0, true}, {1, true}}, {{0, true}, {2, true}}, {{1, true}, {2, true}},
				{{2, true}, {0, true}}, {{0, true}, {2, true}}, {{2, true}, {1, true}},
			},
		},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			const N, E = 6, 3
			m := handMoE(c.k, c.cf, c.noDrop, c.gating)
			x := tensor.FromFloat64(flat(c.x), 2, 3, 3) // leading dims are tokens
			out := m.Forward(x)

			// Expected values, computed from the hand routing above.
			wantOut := make([]float64, N*3)
			var wantIDs []int
			var wantDropped []bool
			load, processed := make([]int, E), make([]int, E)
			for i, row := range c.x {
				probs := softmax64(row)
				var sel []float64
				for _, ch := range c.want[i] {
					sel = append(sel, row[ch.expert])
				}
				top := softmax64(sel)
				for j, ch := range c.want[i] {
					gate := top[j]
					if c.gating == nn.GateSoftmaxTopK {
						gate = probs[ch.expert]
					}
					wantIDs = append(wantIDs, ch.expert)
					wantDropped = append(wantDropped, !ch.kept)
					load[ch.expert]++
					if ch.kept {
						processed[ch.expert]++
						for d := range 3 {
							wantOut[i*3+d] += gate * float64(ch.expert+1) * row[d]
						}
					}
				}
			}
			// Switch loss: E · Σ_e f_e P_e, f over all N·k choices.
			aux, z := 0.0, 0.0
			for e := range E {
				p := 0.0
				for _, row := range c.x {
					p += softmax64(row)[e] / N
				}
				aux += float64(load[e]) / float64(N*c.k) * p
			}
			aux *= E
			for _, row := range c.x {
				lse := 0.0
				for _, v := range row {
					lse += math.Exp(v)
				}
				z += math.Log(lse) * math.Log(lse) / N
			}

			assert.Equal(t, c.capacity, out.Capacity)
			assert.Equal(t, []int{2, 3, 3}, out.Output.Shape())
			assert.InDeltaSlice(t, wantOut, out.Output.Float64s(), 1e-5)
			assert.Equal(t, wantIDs, out.ExpertIDs.Ints())
			assert.Equal(t, []int{N, c.k}, out.ExpertIDs.Shape())
			assert.Equal(t, wantDropped, out.Dropped.Bools())
			assert.Equal(t, []int{N, c.k}, out.Dropped.Shape())
			assert.Equal(t, load, out.Load.Ints())
			assert.Equal(t, processed, out.Processed.Ints())
			assert.InDelta(t, aux, out.AuxLoss.Item(), 1e-6)
			assert.InDelta(t, z, out.RouterZLoss.Item(), 1e-5)
			assert.Equal(t, []int{N, c.k}, out.Gates.Shape())
		})
	}
}

func TestMoEAuxLossExtremes(t *testing.T) {
	// All tokens sure of expert 0: f = (1, 0, 0), P ≈ (1, 0, 0), loss ≈ E.
	m := handMoE(1, 1, true, nn.GateSoftmaxTopK)
	x := tensor.FromFloat32([]float32{30, 0, 0, 30, 0, 0, 30, 0, 0}, 3, 3)
	assert.InDelta(t, 3, m.Forward(x).AuxLoss.Item(), 1e-6)
	// Uniform router: P = 1/E whatever the routing, so the loss is 1.
	m.Router = tensor.Zeros(tensor.Float32, 3, 3)
	assert.InDelta(t, 1, m.Forward(randn(1, 6, 3)).AuxLoss.Item(), 1e-6)
}

func TestDropTokenMask(t *testing.T) {
	ids := tensor.FromInt32([]int32{2, 0, 1, 0, 2, 1, 0, 0})
	probs := tensor.FromFloat32([]float32{0.5, 0.2, 0.1, 0.9, 0.3, 0.1, 0.2, 0.4})
	// Expert 0: idx 3 (.9), 7 (.4), 1 (.2), 6 (.2, after 1) → ranks 2, 0, 3, 1
	// Expert 1: idx 2 (.1), 5 (.1)                           → ranks 0, 1
	// Expert 2: idx 0 (.5), 4 (.3)                           → ranks 0, 1
	wantRank := []int{0, 2, 0, 0, 1, 1, 3, 1}
	for _, c := range []int{0, 1, 2, 3, 4} {
		dropped, rank := nn.DropTokenMask(ids, probs, 3, c)
		assert.Equal(t, wantRank, rank.Ints())
		for i, d := range dropped.Bools() {
			assert.Equal(t, wantRank[i] >= c, d, "capacity %d, index %d", c, i)
		}
	}
	// An expert nobody chose is fine; so is an empty batch.
	d, r := nn.DropTokenMask(tensor.FromInt32([]int32{3, 3}), tensor.FromFloat32([]float32{1, 2}), 5, 1)
	assert.Equal(t, []bool{true, false}, d.Bools())
	assert.Equal(t, []int{1, 0}, r.Ints())
	d, _ = nn.DropTokenMask(tensor.FromInt32(nil), tensor.FromFloat32(nil), 2, 1)
	assert.Equal(t, 0, d.Size())
}

func TestExpertCapacity(t *testing.T) {
	cases := []struct {
		tokens, k, experts int
		factor             float64
		want               int
	}{
		{6, 1, 3, 1, 2},
		{6, 2, 3, 0.5, 2},
		{10, 2, 4, 1.25, 7}, // 6.25 rounds up
		{8, 2, 8, 1, 2},
		{7, 1, 2, 1, 4}, // 3.5
		{0, 2, 4, 1.25, 0},
		{1024, 2, 8, 1.2, 308}, // 307.2: the guide's capacity factor
		{10, 2, 4, 1.2, 6},     // 5·1.2 is 6.000000000000001 in float64; 6 in float32, as jnp.ceil sees it
		{3, 1, 1, 0.1, 1},      // 0.30000000000000004
	}
	for _, c := range cases {
		assert.Equal(t, c.want, nn.ExpertCapacity(c.tokens, c.k, c.experts, c.factor), "%+v", c)
	}
}

// moeRef is an independent single-token-at-a-time MoE: route, rank each
// expert's choices with a stable sort by descending priority, keep the
// first capacity, run the kept choices through their expert's MLP.
func moeRef(m nn.MoE, x *tensor.Tensor) (out []float64, dropped []bool, load []int) {
	D, E, H := m.Router.Dim(0), m.Router.Dim(1), m.Up.Dim(2)
	k := m.TopK
	tok := toMat(tensor.Reshape(x, -1, D))
	N := len(tok)
	logits := matmul(tok, toMat(m.Router))
	type assign struct {
		token, expert, slot int
		gate                float64
	}
	var as []assign
	for i := range N {
		p := softmax64(logits[i])
		idx := make([]int, E)
		for e := range idx {
			idx[e] = e
		}
		sort.SliceStable(idx, func(a, b int) bool { return logits[i][idx[a]] > logits[i][idx[b]] })
		sel := make([]float64, k)
		for j := range k {
			sel[j] = logits[i][idx[j]]
		}
		sm := softmax64(sel)
		for j := range k {
			g := sm[j]
			if m.Gating == nn.GateSoftmaxTopK {
				g = p[idx[j]]
			}
			as = append(as, assign{i, idx[j], j, g})
		}
	}
	capacity := m.Capacity(N)
	dropped = make([]bool, len(as))
	load = make([]int, E)
	for e := range E {
		var mine []int
		for a := range as {
			if as[a].expert == e {
				mine = append(mine, a)
			}
		}
		load[e] = len(mine)
		sort.SliceStable(mine, func(a, b int) bool { return as[mine[a]].gate > as[mine[b]].gate })
		for r, a := range mine {
			dropped[a] = r >= capacity
		}
	}
	up, down := m.Up.Float64s(), m.Down.Float64s()
	out = make([]float64, N*D)
	for a, s := range as {
		if dropped[a] {
			continue
		}
		h := make([]float64, H)
		for j := range H {
			for d := range D {
				h[j] += tok[s.token][d] * up[(s.expert*D+d)*H+j]
			}
			h[j] = math.Max(h[j], 0) // relu
		}
		for d := range D {
			y := 0.0
			for j := range H {
				y += h[j] * down[(s.expert*H+j)*D+d]
			}
			out[s.token*D+d] += s.gate * y
		}
	}
	return out, dropped, load
}

func TestMoEMatchesReference(t *testing.T) {
	const D, H, E = 4, 6, 4
	x := randn(1, 2, 10, D) // 20 tokens
	for _, g := range []nn.Gating{nn.GateTopKSoftmax, nn.GateSoftmaxTopK} {
		for _, k := range []int{1, 2, 3} {
			for _, cf := range []float64{0.5, 1, 0} { // 0: NoDrop
				m := nn.NewMoE(tensor.NewKey(uint64(k)), D, H, E, nn.MoEOptions{TopK: k, CapacityFactor: cf, NoDrop: cf == 0, Gating: g})
				// A sharper router so routing is far from ties.
				m.Router = tensor.MulScalar(m.Router, 4)
				t.Run(fmt.Sprintf("%v/k=%d/cf=%g", g, k, cf), func(t *testing.T) {
					out := m.Forward(x)
					want, dropped, load := moeRef(m, x)
					assert.InDeltaSlice(t, want, out.Output.Float64s(), 1e-5, "k=%d cf=%g", k, cf)
					assert.Equal(t, dropped, out.Dropped.Bools(), "k=%d cf=%g", k, cf)
					assert.Equal(t, load, out.Load.Ints())
					nDropped := 0
					for _, d := range dropped {
						if d {
							nDropped++
						}
					}
					if cf == 0.5 {
						assert.Positive(t, nDropped, "capacity factor 0.5 must drop something")
					}
					if cf == 0 {
						assert.Zero(t, nDropped)
					}
					total := 0
					for _, p := range out.Processed.Ints() {
						assert.LessOrEqual(t, p, out.Capacity)
						total += p
					}
					assert.Equal(t, len(dropped)-nDropped, total)
				})
			}
		}
	}
}

func TestMoEGrad(t *testing.T) {
	const D, H, E = 3, 5, 4
	x := randn(2, 8, D)
	cases := []struct {
		name string
		opts nn.MoEOptions
	}{
		{"no drops, k=2", nn.MoEOptions{TopK: 2, NoDrop: true}},
		{"drops, k=2", nn.MoEOptions{TopK: 2, CapacityFactor: 0.5}},
		{"drops, k=1 switch", nn.MoEOptions{TopK: 1, CapacityFactor: 0.75, Gating: nn.GateSoftmaxTopK, Activation: nn.Tanh}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := nn.NewMoE(tensor.NewKey(3), D, H, E, c.opts)
			m.Router = tensor.MulScalar(m.Router, 4)
			out := m.Forward(x)
			if c.opts.NoDrop {
				assert.False(t, anyTrue(out.Dropped.Bools()))
			} else {
				assert.True(t, anyTrue(out.Dropped.Bools()), "the case must drop tokens")
			}
			build := func(xs []*tensor.Tensor) nn.MoE {
				mm := m
				mm.Router, mm.Up, mm.Down = xs[0], xs[1], xs[2]
				return mm
			}
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return build(xs).Forward(xs[3]).Output },
				m.Router, m.Up, m.Down, x)
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return build(xs).Forward(xs[3]).AuxLoss },
				m.Router, m.Up, m.Down, x)
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return build(xs).Forward(xs[3]).RouterZLoss },
				m.Router, m.Up, m.Down, x)
		})
	}
}

func TestMoEDroppedTokensGetNoGradient(t *testing.T) {
	// With capacity factor 0.5 and k=1 (top-k softmax gates, all 1), token
	// order decides: the later tokens of a crowded expert are dropped, and
	// their outputs, and gradients through the experts, are zero.
	m := handMoE(1, 1, false, nn.GateTopKSoftmax)
	x := tensor.FromFloat32([]float32{2, 0, 0, 1, 0, 0, 3, 0, 0, 0, 1, 0, 0.5, 0, 0, 0, 0, 1}, 6, 3)
	_, g := autodiff.ValueAndGradWith(func(m nn.MoE, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(m.Forward(x).Output)
	})(m, x)
	// Token rows 2 and 4 are dropped; Up[0] sees only tokens 0 and 1:
	// d/dUp[0][i][j] = Σ_t x_t[i] · (Down[0] row j summed) = (x0+x1)[i] · 1.
	up0 := g.Up.Float64s()[:9]
	assert.InDeltaSlice(t, []float64{3, 3, 3, 0, 0, 0, 0, 0, 0}, up0, 1e-6)
}

func anyTrue(b []bool) bool {
	for _, v := range b {
		if v {
			return true
		}
	}
	return false
}

func TestMoEDefaults(t *testing.T) {
	const D, H, E = 16, 64, 4
	m := nn.NewMoE(tensor.NewKey(0), D, H, E, nn.MoEOptions{})
	assert.Equal(t, 2, m.TopK)
	assert.Equal(t, nn.DefaultCapacityFactor, m.CapacityFactor)
	assert.Equal(t, nn.GateTopKSoftmax, m.Gating)
	assert.Equal(t, "Relu", m.Activation.String())
	assert.False(t, m.NoDrop)
	assert.Equal(t, E, m.NumExperts())
	require.Equal(t, []int{D, E}, m.Router.Shape())
	require.Equal(t, []int{E, D, H}, m.Up.Shape())
	require.Equal(t, []int{E, H, D}, m.Down.Shape())
	// Each expert is initialized like a Linear layer: uniform in ±1/√fan_in.
	for name, c := range map[string]struct {
		p   *tensor.Tensor
		lim float64
	}{"router": {m.Router, 1 / math.Sqrt(D)}, "up": {m.Up, 1 / math.Sqrt(D)}, "down": {m.Down, 1 / math.Sqrt(H)}} {
		lo, hi := minMax(c.p.Float64s())
		assert.GreaterOrEqual(t, lo, -c.lim, name)
		assert.LessOrEqual(t, hi, c.lim, name)
		assert.Less(t, lo, -0.8*c.lim, name)
		assert.Greater(t, hi, 0.8*c.lim, name)
	}
	assert.Equal(t, nn.ExpertCapacity(100, 2, E, 1.25), m.Capacity(100))
	assert.Equal(t, "GateSoftmaxTopK", nn.GateSoftmaxTopK.String())
	assert.Equal(t, "Gating(5)", nn.Gating(5).String())
}

func TestMoEPanics(t *testing.T) {
	k := tensor.NewKey(0)
	requirePanicContains(t, func() { nn.NewMoE(k, 4, 8, 3, nn.MoEOptions{TopK: 4}) }, "nn.NewMoE: TopK 4 must be in [1, 3 experts]")
	requirePanicContains(t, func() { nn.NewMoE(k, 4, 8, 3, nn.MoEOptions{CapacityFactor: -1}) }, "nn.NewMoE: CapacityFactor -1 must be positive and finite")
	requirePanicContains(t, func() { nn.NewMoE(k, 4, 0, 3, nn.MoEOptions{}) }, "nn.NewMoE: dim 4, hidden 0, experts 3: sizes must be positive")
	requirePanicContains(t, func() { nn.NewMoE(k, 4, 8, 3, nn.MoEOptions{Gating: 3}) }, "nn.NewMoE: invalid Gating(3)")
	m := nn.NewMoE(k, 4, 8, 3, nn.MoEOptions{})
	requirePanicContains(t, func() { m.Forward(randn(0, 2, 5)) }, "nn.MoE: x f32[2,5]: want a float tensor [..., 4]")
	m.TopK = 0
	requirePanicContains(t, func() { m.Forward(randn(0, 2, 4)) }, "nn.MoE: TopK 0 must be in [1, 3 experts]")
	requirePanicContains(t, func() { nn.DropTokenMask(tensor.FromInt32([]int32{0, 3}), tensor.FromFloat32([]float32{1, 1}), 3, 1) },
		"nn.DropTokenMask: expert id 3 at index 1 is outside [0, 3)")
	requirePanicContains(t, func() { nn.DropTokenMask(tensor.FromInt32([]int32{0}), tensor.FromFloat32([]float32{1, 1}), 3, 1) },
		"nn.DropTokenMask: expertIDs i32[1], probs f32[2]: want i32[n] and f32[n]")
	requirePanicContains(t, func() { nn.DropTokenMask(tensor.FromInt32([]int32{0}), tensor.FromFloat32([]float32{1}), 3, -1) },
		"nn.DropTokenMask: negative capacity -1")
	requirePanicContains(t, func() { nn.ExpertCapacity(4, 1, 0, 1) }, "nn.ExpertCapacity: tokens 4, k 1, experts 0, factor 1: invalid")
}

func TestMoEUnderCheckpoint(t *testing.T) {
	m := nn.NewMoE(tensor.NewKey(0), 4, 8, 4, nn.MoEOptions{CapacityFactor: 0.75})
	x := randn(1, 12, 4)
	loss := func(m nn.MoE) *tensor.Tensor {
		o := m.Forward(x)
		return tensor.Add(tensor.Mean(tensor.Square(o.Output)), tensor.MulScalar(o.AuxLoss, 0.1))
	}
	l1, g1 := autodiff.ValueAndGrad(loss)(m)
	for _, policy := range []autodiff.Policy{autodiff.NothingSaveable, autodiff.DotsSaveable} {
		l2, g2 := autodiff.ValueAndGrad(autodiff.Checkpoint(loss, policy))(m)
		assert.Equal(t, l1.Item(), l2.Item())
		assert.NoError(t, pytree.Diff(g1, g2, 1e-5, 1e-6))
	}
}
