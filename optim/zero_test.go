package optim_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// zeroModel has float leaves whose sizes (15 + 5 + 7 = 27) split unevenly
// over 2, 4 and 5 devices, and an integer leaf that is not updated.
type zeroModel struct {
	W   *tensor.Tensor
	Ids *tensor.Tensor
	B   *tensor.Tensor
	C   *tensor.Tensor
}

func newZeroModel(seed float64) zeroModel {
	return zeroModel{
		W:   tensor.WithLogicalAxes(f32(wave(15, seed), 3, 5), "in", "out"),
		Ids: tensor.FromInts([]int{1, 2}, 2),
		B:   tensor.WithLogicalAxes(f32(wave(5, seed+1), 5), "out"),
		C:   f32(wave(7, seed+2), 7),
	}
}

// zeroStep runs one ZeRO step on the host: every device updates its block
// of the flat vector, and the blocks are concatenated (the all-gather).
func zeroStep(z *optim.ZeRO, params, grads zeroModel, states []optim.State) (zeroModel, []optim.State) {
	fp, fg := z.Flatten(params), z.Flatten(grads)
	s := z.ShardLen()
	blocks := make([]*tensor.Tensor, z.Devices())
	for i := range blocks {
		p := tensor.SliceAxis(fp, 0, i*s, (i+1)*s)
		g := tensor.SliceAxis(fg, 0, i*s, (i+1)*s)
		blocks[i], states[i] = z.UpdateShard(p, g, states[i])
	}
	return z.Unflatten(tensor.Concat(0, blocks...), params).(zeroModel), states
}

// TestZeROMatchesStep: over any number of devices, ZeRO's sharded update
// gives the parameters optim.Step gives on the whole tree, bit for bit.
func TestZeROMatchesStep(t *testing.T) {
	lr := optim.Constant(0.01)
	for _, tc := range []struct {
		name string
		tx   optim.Transform
	}{
		{"SGD", optim.SGD(lr)},
		{"SGDMomentum", optim.SGD(lr, optim.SGDOptions{Momentum: 0.9, Nesterov: true})},
		{"Adam", optim.Adam(lr)},
		{"AdamNesterov", optim.Adam(lr, optim.AdamOptions{Nesterov: true, EpsRoot: 1e-9})},
		{"AdamW", optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1})},
		{"Lion", optim.Lion(lr)},
	} {
		for _, n := range []int{1, 2, 4, 5} {
			t.Run(fmt.Sprintf("%s/devices=%d", tc.name, n), func(t *testing.T) {
				params := newZeroModel(0.5)
				z := optim.NewZeRO(tc.tx, params, n)
				require.Equal(t, (27+n-1)/n, z.ShardLen())
				require.Equal(t, n*z.ShardLen(), z.Len())
				states := make([]optim.State, n)
				for i := range states {
					states[i] = z.InitShard()
				}
				want, wantState := params, tc.tx.Init(params)
				got := params
				for step := range 4 {
					grads := newZeroModel(3 + float64(step))
					grads.Ids = nil
					want, wantState = optim.Step(tc.tx, want, grads, wantState)
					got, states = zeroStep(z, got, grads, states)
				}
				assert.Equal(t, want.W.Float32s(), got.W.Float32s(), "W")
				assert.Equal(t, want.B.Float32s(), got.B.Float32s(), "B")
				assert.Equal(t, want.C.Float32s(), got.C.Float32s(), "C")
				assert.Equal(t, []string{"in", "out"}, got.W.LogicalAxes(), "logical axes kept")
				assert.Same(t, params.Ids, got.Ids, "non-float leaves untouched")
				assert.NotEqual(t, params.W.Float32s(), got.W.Float32s(), "the parameters moved")
			})
		}
	}
}

// The flat layout: leaves end to end in pytree order, padded with zeros,
// nil gradients as zeros; Unflatten inverts it.
func TestZeROFlatten(t *testing.T) {
	m := newZeroModel(0.1)
	z := optim.NewZeRO(optim.SGD(optim.Constant(1)), m, 4) // 27 → 28
	flat := z.Flatten(m).Float32s()
	require.Len(t, flat, 28)
	var want []float32
	want = append(want, m.W.Float32s()...)
	want = append(want, m.B.Float32s()...)
	want = append(want, m.C.Float32s()...)
	want = append(want, 0)
	assert.Equal(t, want, flat)

	back := z.Unflatten(tensor.FromFloat32(flat), m).(zeroModel)
	assert.True(t, pytree.Equal(m, back, 0, 0), "Unflatten(Flatten(m)) == m")

	g := zeroModel{B: m.B} // W and C not computed
	fg := z.Flatten(g).Float32s()
	assert.Equal(t, make([]float32, 15), fg[:15])
	assert.Equal(t, m.B.Float32s(), fg[15:20])
	assert.Equal(t, make([]float32, 8), fg[20:])
}

// ZeRO's Init is the state of the whole flat vector: its moments split
// into blocks are the shards' states.
func TestZeROInit(t *testing.T) {
	z := optim.NewZeRO(optim.Adam(optim.Constant(1)), newZeroModel(0), 3)
	st := z.Init().(optim.AdamState)
	assert.Equal(t, []int{27}, st.Mu.(*tensor.Tensor).Shape())
	sh := z.InitShard().(optim.AdamState)
	assert.Equal(t, []int{9}, sh.Nu.(*tensor.Tensor).Shape())
}

func TestZeROPanics(t *testing.T) {
	m := newZeroModel(0)
	assert.PanicsWithValue(t, "optim.NewZeRO: 0 devices", func() { optim.NewZeRO(optim.Adam(optim.Constant(1)), m, 0) })
	masked := optim.AdamW(optim.Constant(1), optim.AdamWOptions{Mask: pytree.PathGlob("W")})
	assert.Panics(t, func() { optim.NewZeRO(masked, m, 2) }, "a Mask is per leaf, not elementwise")
	assert.Panics(t, func() { optim.NewZeRO(optim.Chain(optim.ClipByGlobalNorm(1), optim.Adam(optim.Constant(1))), m, 2) })
	z := optim.NewZeRO(optim.Adam(optim.Constant(1)), m, 2)
	assert.PanicsWithValue(t, "optim.ZeRO.UpdateShard: f32[3], f32[14]: want two f32[14] blocks", func() {
		z.UpdateShard(tensor.Zeros(tensor.Float32, 3), tensor.Zeros(tensor.Float32, 14), z.InitShard())
	})
	assert.PanicsWithValue(t, "optim.ZeRO.Unflatten: flat vector f32[3], want f32[28]", func() { z.Unflatten(tensor.Zeros(tensor.Float32, 3), m) })
}

// Step's fused pass for Adam, AdamW and SGD gives the bits of Update then
// Apply; StepWith reports each parameter's old leaves and gradient, which
// may be donated at once.
func TestFusedStepMatchesUpdateApply(t *testing.T) {
	lr := optim.Constant(0.01)
	for name, tx := range map[string]optim.Transform{
		"Adam":        optim.Adam(lr),
		"Nesterov":    optim.Adam(lr, optim.AdamOptions{Nesterov: true}),
		"ScaleByAdam": optim.ScaleByAdam(),
		"AdamW":       optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1}),
		"AdamWMask":   optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1, Mask: pytree.PathGlob("W")}),
		"SGD":         optim.SGD(lr),
		"Momentum":    optim.SGD(lr, optim.SGDOptions{Momentum: 0.9}),
		"SGDNesterov": optim.SGD(lr, optim.SGDOptions{Momentum: 0.8, Nesterov: true}),
	} {
		t.Run(name, func(t *testing.T) {
			start := newZeroModel(0.5)
			fused, plain := start, start
			fs, ps := tx.Init(fused), tx.Init(plain)
			// StepWith, donating what it reports dead at once: the same
			// bits, so nothing reads a reported tensor again.
			donated := newZeroModel(0.5)
			ds := tx.Init(donated)
			for step := range 3 {
				grads := newZeroModel(3 + float64(step))
				grads.Ids, grads.C = nil, nil // C gets no gradient: unchanged
				fused, fs = optim.Step(tx, fused, grads, fs)
				var u any
				u, ps = tx.Update(grads, ps, plain)
				plain = optim.Apply(plain, u)
				dgrads := newZeroModel(3 + float64(step))
				dgrads.Ids, dgrads.C = nil, nil
				old := donated
				var dead []*tensor.Tensor
				donated, ds = optim.StepWith(tx, donated, dgrads, ds, func(d []*tensor.Tensor) {
					dead = append(dead, d...)
					tensor.Donate(d...)
				})
				for _, x := range []*tensor.Tensor{old.W, old.B, dgrads.W, dgrads.B} {
					assert.Contains(t, dead, x, "step %d: the old parameters and their gradients are reported", step)
				}
				assert.NotContains(t, dead, old.C, "a parameter without a gradient is not")
			}
			assert.Equal(t, plain.W.Float32s(), fused.W.Float32s(), "W")
			assert.Equal(t, plain.B.Float32s(), fused.B.Float32s(), "B")
			assert.Equal(t, plain.W.Float32s(), donated.W.Float32s(), "W, donating")
			assert.Equal(t, plain.B.Float32s(), donated.B.Float32s(), "B, donating")
			assert.Same(t, start.C, fused.C, "a parameter without a gradient is kept")
			assert.NotEqual(t, start.W.Float32s(), fused.W.Float32s())
		})
	}
}
