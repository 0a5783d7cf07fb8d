package nn_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestPolicyParseAndString(t *testing.T) {
	for _, c := range []struct {
		name string
		want nn.Policy
		str  string
	}{
		{"f32", nn.Float32Policy, "params=float32,compute=float32,output=float32"},
		{"bf16", nn.MixedBFloat16, "params=float32,compute=bfloat16,output=float32"},
		{"bfloat16", nn.MixedBFloat16, "params=float32,compute=bfloat16,output=float32"},
		{"f16", nn.MixedFloat16, "params=float32,compute=float16,output=float32"},
	} {
		p, err := nn.ParsePolicy(c.name)
		require.NoError(t, err)
		require.Equal(t, c.want, p)
		require.Equal(t, c.str, p.String())
		require.NoError(t, p.Validate())
	}
	_, err := nn.ParsePolicy("f64")
	require.EqualError(t, err, `nn.ParsePolicy: unknown dtype "f64" (want f32, bf16 or f16)`)
	require.EqualError(t, nn.Policy{tensor.Float32, tensor.Int32, tensor.Float32}.Validate(),
		"nn.Policy: Compute dtype int32 is not float32, bfloat16 or float16")
	require.PanicsWithValue(t, "nn.MLP.WithPolicy: nn.Policy: Param dtype DType(0) is not float32, bfloat16 or float16", func() {
		nn.MLP{}.WithPolicy(nn.Policy{Compute: tensor.BFloat16})
	})
}

// TestPolicyCastsAndGradients: the casts convert float leaves only, and
// the gradient of a mixed-precision loss with respect to a float32 model
// is float32 and close to the float32 gradient.
func TestPolicyCastsAndGradients(t *testing.T) {
	type withIDs struct {
		W   *tensor.Tensor
		IDs *tensor.Tensor
	}
	c := nn.CastTo(withIDs{tensor.Ones(tensor.Float32, 2), tensor.Arange(3)}, tensor.BFloat16)
	require.Equal(t, "bf16[2]", c.W.String())
	require.Equal(t, "i32[3]", c.IDs.String())
	require.Panics(t, func() { nn.CastTo(c, tensor.Int32) })

	km, kx := tensor.NewKey(1).Split2()
	m := nn.NewMLP(km, []int{16, 32, 4}, nn.MLPOptions{Activation: nn.Gelu})
	x := tensor.Normal(kx, 8, 16)
	labels := tensor.FromInts([]int{0, 1, 2, 3, 0, 1, 2, 3})
	loss := func(m nn.MLP, x *tensor.Tensor) *tensor.Tensor {
		return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(x), labels))
	}
	vg := autodiff.ValueAndGradWith(loss)
	l32, g32 := vg(m, x)
	mixed := m.WithPolicy(nn.MixedBFloat16)
	require.Equal(t, nn.MixedBFloat16, mixed.Policy())
	out := mixed.Forward(x)
	require.Equal(t, "f32[8,4]", out.String(), "output dtype")
	lbf, gbf := vg(mixed, x)
	require.Equal(t, "f32[]", lbf.String(), "the loss is float32")
	assert.InDelta(t, l32.Item(), lbf.Item(), 0.02*l32.Item())
	assert.NotEqual(t, l32.Item(), lbf.Item(), "the mixed loss is computed in bf16")
	for i, g := range pytree.Leaves(gbf) {
		want := pytree.Leaves(g32)[i]
		require.Equal(t, tensor.Float32, g.DType(), "gradients of float32 parameters are float32")
		// A few bf16 roundings (u = 2^-8) along the chain, relative to the
		// gradient's scale.
		scale := tensor.Max(tensor.Abs(want)).Item()
		w, got := want.Float64s(), g.Float64s()
		for j := range w {
			require.InDelta(t, w[j], got[j], 16*0x1p-8*scale, "leaf %d element %d", i, j)
		}
	}
	// The policy is static: pytree.Map keeps it.
	require.Equal(t, nn.MixedBFloat16, pytree.Map(mixed, func(x *tensor.Tensor) *tensor.Tensor { return x }).Policy())
}

// trainDigits trains the digits MLP with Adam for a few epochs and returns
// its test accuracy.
func trainDigits(t *testing.T, policy nn.Policy, epochs int) float64 {
	t.Helper()
	keys := tensor.NewKey(0).Split(2)
	train, test := data.DigitsSplit(keys[0], 0.2)
	model := nn.NewMLP(keys[1], []int{64, 128, 10}, nn.MLPOptions{Policy: policy})
	opt := optim.Adam(optim.Constant(3e-3))
	state := opt.Init(model)
	vg := autodiff.ValueAndGradWith(func(m nn.MLP, b data.Batch) *tensor.Tensor {
		return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y))
	})
	const batch = 64
	for epoch := range epochs {
		perm := tensor.Permutation(tensor.NewKey(uint64(100+epoch)), train.Len()).Ints()
		for lo := 0; lo+batch <= len(perm); lo += batch {
			b, err := train.Batch(perm[lo : lo+batch])
			require.NoError(t, err)
			_, g := vg(model, b)
			for _, l := range pytree.Leaves(g) {
				require.Equal(t, tensor.Float32, l.DType())
			}
			model, state = optim.Step(opt, model, g, state)
		}
	}
	for _, l := range pytree.Leaves(model) {
		require.Equal(t, tensor.Float32, l.DType(), "master weights stay float32")
	}
	pred := tensor.ArgMax(model.Forward(test.X), -1)
	right := tensor.Sum(tensor.AsType(tensor.Equal(pred, test.Y), tensor.Int32)).Item()
	return right / float64(test.Len())
}

// TestMixedPrecisionDigits trains the digits MLP (as examples/mlp does)
// in float32 and in bf16 mixed precision from the same initialisation and
// batches: the accuracies agree within half a point.
func TestMixedPrecisionDigits(t *testing.T) {
	const epochs = 10
	acc32 := trainDigits(t, nn.Policy{}, epochs)
	accBF := trainDigits(t, nn.MixedBFloat16, epochs)
	t.Logf("test accuracy after %d epochs: float32 %.2f%%, bf16 mixed %.2f%%", epochs, 100*acc32, 100*accBF)
	require.Greater(t, acc32, 0.9)
	assert.InDelta(t, acc32, accBF, 0.005)
}

// TestPolicyWithCheckpoint: rematerialising a bf16 mixed-precision
// forward pass recomputes the same values: the gradients equal those
// without remat, bit for bit, whatever the policy saves.
func TestPolicyWithCheckpoint(t *testing.T) {
	km, kx := tensor.NewKey(2).Split2()
	m := nn.NewMLP(km, []int{16, 32, 4}, nn.MLPOptions{Activation: nn.Gelu, Policy: nn.MixedBFloat16})
	x := tensor.Normal(kx, 8, 16)
	f := func(mm nn.MLP) *tensor.Tensor { return tensor.Mean(tensor.Square(mm.Forward(x))) }
	l0, g0 := autodiff.ValueAndGrad(f)(m)
	for _, pol := range []autodiff.Policy{autodiff.NothingSaveable, autodiff.DotsSaveable, autodiff.EverythingSaveable} {
		l, g := autodiff.ValueAndGrad(autodiff.Checkpoint(f, pol))(m)
		require.Equal(t, l0.Item(), l.Item())
		require.True(t, pytree.Equal(g0, g, 0, 0))
	}
}

// TestLayersInBFloat16 runs every layer of the package on bf16 parameters
// and inputs (CastToCompute) and compares its loss and gradients with
// float32: the loss within a few units of bf16 roundoff, the gradients
// with respect to the float32 parameters float32 and close.
func TestLayersInBFloat16(t *testing.T) {
	keys := tensor.NewKey(7).Split(8)
	x := tensor.Normal(keys[0], 2, 8, 16) // [batch, length, dim]
	ids := tensor.FromInts([]int{1, 5, 2, 7, 0, 3}, 2, 3)
	cases := []struct {
		name  string
		model any
		f     func(m any, x *tensor.Tensor) *tensor.Tensor
	}{
		{"Linear", nn.NewLinear(keys[1], 16, 8, nn.LinearOptions{}), func(m any, x *tensor.Tensor) *tensor.Tensor { return m.(nn.Linear).Forward(x) }},
		{"LayerNorm", nn.NewLayerNorm(16, nn.LayerNormOptions{}), func(m any, x *tensor.Tensor) *tensor.Tensor { return m.(nn.LayerNorm).Forward(x) }},
		{"RMSNorm", nn.NewRMSNorm(16, nn.RMSNormOptions{}), func(m any, x *tensor.Tensor) *tensor.Tensor { return m.(nn.RMSNorm).Forward(x) }},
		{"Dropout", nn.NewDropout(0.25), func(m any, x *tensor.Tensor) *tensor.Tensor { return m.(nn.Dropout).Forward(x, keys[2]) }},
		{"Attention", nn.NewMultiHeadAttention(keys[3], 16, 4, nn.AttentionOptions{Causal: true}), func(m any, x *tensor.Tensor) *tensor.Tensor {
			return m.(nn.MultiHeadAttention).Forward(x)
		}},
		{"Embedding", nn.NewEmbedding(keys[4], 8, 16, nn.EmbeddingOptions{}), func(m any, _ *tensor.Tensor) *tensor.Tensor {
			return m.(nn.Embedding).Forward(ids)
		}},
		{"MoE", nn.NewMoE(keys[5], 16, 32, 4, nn.MoEOptions{}), func(m any, x *tensor.Tensor) *tensor.Tensor {
			o := m.(nn.MoE).Forward(x)
			return tensor.Add(tensor.Mean(tensor.Square(o.Output)), tensor.MulScalar(o.AuxLoss, 0.01))
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			loss := func(m any, compute tensor.DType) *tensor.Tensor {
				y := c.f(nn.CastTo(m, compute), nn.CastTo(x, compute))
				require.Equal(t, compute, y.DType(), "the layer computes in the dtype it is given")
				return tensor.Mean(tensor.Square(tensor.Convert(y, tensor.Float32)))
			}
			vg := func(compute tensor.DType) (float64, []*tensor.Tensor) {
				tr := tensor.NewTrace()
				leaves := pytree.Leaves(c.model)
				traced := make([]*tensor.Tensor, len(leaves))
				for i, l := range leaves {
					traced[i] = tr.Leaf(l)
				}
				_, st := pytree.Flatten(c.model)
				m := pytree.Unflatten[any](st, traced)
				l := loss(m, compute)
				return l.Item(), tensor.Backward(tr, []*tensor.Tensor{l}, []*tensor.Tensor{tensor.OnesLike(l)}, traced, false)
			}
			l32, g32 := vg(tensor.Float32)
			lbf, gbf := vg(tensor.BFloat16)
			require.InEpsilon(t, l32, lbf, 16*0x1p-8, "loss")
			for i := range g32 {
				require.Equal(t, tensor.Float32, gbf[i].DType())
				scale := tensor.Max(tensor.Abs(g32[i])).Item()
				w, got := g32[i].Float64s(), gbf[i].Float64s()
				for j := range w {
					require.InDelta(t, w[j], got[j], 32*0x1p-8*scale+1e-6, "gradient %d[%d]", i, j)
				}
			}
		})
	}
}

// TestMixedPolicyProducts: an MLP under MixedBFloat16 with float32 host
// parameters computes its products in bf16 from the float32 weights and
// activations (tensor.MatMulAs, the accumulator float32) and everything
// else in float32, bit for bit that composition; a Linear given a bf16
// input with float32 parameters computes in bf16 as on converted ones.
func TestMixedPolicyProducts(t *testing.T) {
	km, kx := tensor.NewKey(3).Split2()
	m := nn.NewMLP(km, []int{16, 32, 4}, nn.MLPOptions{Activation: nn.Gelu})
	x := tensor.Normal(kx, 8, 16)
	bf := tensor.BFloat16
	h := tensor.Gelu(tensor.Add(tensor.MatMulAs(x, m.Layers[0].W, false, false, bf, tensor.Float32), m.Layers[0].B))
	want := tensor.Add(tensor.MatMulAs(h, m.Layers[1].W, false, false, bf, tensor.Float32), m.Layers[1].B)
	got := m.WithPolicy(nn.MixedBFloat16).Forward(x)
	require.Equal(t, tensor.Float32, got.DType())
	require.Equal(t, want.Float32s(), got.Float32s())
	assert.NotEqual(t, m.Forward(x).Float32s(), got.Float32s(), "the products are computed in bf16")

	l := m.Layers[0]
	xb := tensor.Convert(x, bf)
	y := l.Forward(xb)
	require.Equal(t, bf, y.DType())
	lb := nn.CastTo(l, bf)
	require.Equal(t, lb.Forward(xb).Bits16(), y.Bits16())
}

// ampModel holds every layer that takes a policy, in the containers
// WithPolicy walks.
type ampModel struct {
	Attn  nn.MultiHeadAttention
	MoE   *nn.MoE
	FFN   nn.MLP
	Head  nn.Linear
	Extra map[string]nn.Linear
	Any   any
	Norm  nn.LayerNorm
}

func newAMPModel(key tensor.Key) ampModel {
	k := key.Split(6)
	moe := nn.NewMoE(k[1], 16, 24, 4, nn.MoEOptions{Activation: nn.Gelu})
	return ampModel{
		Attn:  nn.NewMultiHeadAttention(k[0], 16, 2, nn.AttentionOptions{Causal: true}),
		MoE:   &moe,
		FFN:   nn.NewMLP(k[2], []int{16, 32, 16}, nn.MLPOptions{Activation: nn.Gelu, NoBias: true, NoFinalBias: true}),
		Head:  nn.NewLinear(k[3], 16, 5, nn.LinearOptions{}),
		Extra: map[string]nn.Linear{"a": nn.NewLinear(k[4], 16, 16, nn.LinearOptions{})},
		Any:   nn.NewLinear(k[5], 16, 16, nn.LinearOptions{NoBias: true}),
		Norm:  nn.NewLayerNorm(16, nn.LayerNormOptions{}),
	}
}

// forward is a pre-norm block of the layers on x f32[B,T,16].
func (m ampModel) forward(x *tensor.Tensor) *tensor.Tensor {
	x = tensor.Add(x, m.Attn.Forward(m.Norm.Forward(x)))
	x = tensor.Add(x, m.MoE.Forward(x).Output)
	x = tensor.Add(x, m.FFN.Forward(x))
	x = m.Extra["a"].Forward(m.Any.(nn.Linear).Forward(x))
	return m.Head.Forward(x)
}

// TestWithPolicy: nn.WithPolicy sets a policy on every layer that takes
// one, wherever the tree holds it, without changing the tree; and each
// layer under MixedBFloat16 with float32 host parameters computes its
// products in bf16 from the float32 operands with float32 results (the
// compositions of tensor.MatMulAs, ActMatMulAs, RaggedDotAs and
// ActRaggedDotAs) and the rest in float32: float32 outputs and
// gradients within bf16 rounding of float32's.
func TestWithPolicy(t *testing.T) {
	km, kx := tensor.NewKey(21).Split2()
	m := newAMPModel(km)
	p := nn.MixedBFloat16
	a := nn.WithPolicy(m, p)
	for _, got := range []nn.Policy{a.Attn.Policy(), a.Attn.OutputProj.Policy(), a.MoE.Policy(), a.FFN.Policy(),
		a.Head.Policy(), a.Extra["a"].Policy(), a.Any.(nn.Linear).Policy()} {
		require.Equal(t, p, got)
	}
	require.Equal(t, nn.Policy{}, m.MoE.Policy(), "the tree given is not changed")
	require.Equal(t, nn.Policy{}, m.Extra["a"].Policy(), "the tree given is not changed")
	require.Equal(t, nn.Policy{}, m.Head.Policy(), "the tree given is not changed")
	require.Equal(t, nn.Policy{}, a.FFN.Layers[0].Policy(), "an MLP applies its policy to its layers itself")
	require.Equal(t, nn.Policy{}, nn.WithPolicy(a, nn.Policy{}).MoE.Policy(), "the zero Policy switches it off")
	require.PanicsWithValue(t, "nn.WithPolicy: nn.Policy: Param dtype int32 is not float32, bfloat16 or float16", func() {
		nn.WithPolicy(m, nn.Policy{Param: tensor.Int32, Compute: tensor.BFloat16, Output: tensor.Float32})
	})

	bf, f32 := tensor.BFloat16, tensor.Float32
	x := tensor.Normal(kx, 2, 8, 16)
	x2 := tensor.Reshape(x, 16, 16)
	as := func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.MatMulAs(x, w, false, false, bf, f32) }
	// Linear: the product in bf16, the bias in float32.
	l := m.Extra["a"]
	require.Equal(t, tensor.Add(as(x2, l.W), l.B).Float32s(), a.Extra["a"].Forward(x2).Float32s())
	// MLP without biases: GELU applied by the second product.
	ffn := as(tensor.Gelu(as(x2, m.FFN.Layers[0].W)), m.FFN.Layers[1].W)
	require.InDeltaSlice(t, ffn.Float32s(), a.FFN.Forward(x2).Float32s(), 1e-6)
	// Attention: the projections in bf16, the attention's products too
	// (softmax in float32).
	heads := func(w *tensor.Tensor) *tensor.Tensor { return tensor.Reshape(as(x2, w), 2, 8, 2, 8) }
	o := tensor.DotProductAttentionAs(heads(m.Attn.QueryProj.W), heads(m.Attn.KeyProj.W), heads(m.Attn.ValueProj.W), nil, 0, true, bf)
	attn := as(tensor.Reshape(o, 16, 16), m.Attn.OutputProj.W)
	require.InDeltaSlice(t, attn.Float32s(), tensor.Reshape(a.Attn.Forward(x), 16, 16).Float32s(), 1e-6)
	// MoE: routing in float32 (the same choices), the experts in bf16.
	r32, ra := m.MoE.Forward(x), a.MoE.Forward(x)
	require.Equal(t, r32.ExpertIDs.Ints(), ra.ExpertIDs.Ints())
	require.Equal(t, r32.Gates.Float32s(), ra.Gates.Float32s())
	require.Equal(t, f32, ra.Output.DType())
	gs := tensor.FromInts([]int{5, 0, 7, 4})
	xe := x2
	want := tensor.ActRaggedDotAs(tensor.ActGelu, tensor.RaggedDotAs(xe, m.MoE.Up, gs, bf), m.MoE.Down, gs, bf)
	require.Equal(t, want.Float32s(), a.MoE.Experts(xe, m.MoE.Up, m.MoE.Down, gs).Float32s())

	// The whole block: float32 values and gradients within bf16 rounding
	// of float32's, not equal to them.
	loss := func(m ampModel) *tensor.Tensor { return tensor.Mean(tensor.Square(m.forward(x))) }
	v32, g32 := autodiff.ValueAndGrad(loss)(m)
	vbf, gbf := autodiff.ValueAndGrad(func(m ampModel) *tensor.Tensor { return loss(nn.WithPolicy(m, p)) })(m)
	require.Equal(t, f32, vbf.DType())
	assert.InEpsilon(t, v32.Item(), vbf.Item(), 8*0x1p-8)
	assert.NotEqual(t, v32.Item(), vbf.Item(), "the products are computed in bf16")
	l32, lbf := pytree.Leaves(g32), pytree.Leaves(gbf)
	require.Len(t, lbf, len(l32))
	for i := range l32 {
		require.Equal(t, f32, lbf[i].DType(), "gradient %d", i)
		scale := tensor.Max(tensor.Abs(l32[i])).Item()
		diff := tensor.Max(tensor.Abs(tensor.Sub(l32[i], lbf[i]))).Item()
		assert.LessOrEqual(t, diff, 0.05*scale+1e-6, "gradient %d: %v", i, l32[i])
	}
}

// TestPolicyCastsWithoutHostFloat32: a layer under a policy whose
// parameters are not float32 host tensors casts them and its input to the
// compute dtype and its output to the output dtype.
func TestPolicyCastsWithoutHostFloat32(t *testing.T) {
	km, kx := tensor.NewKey(4).Split2()
	l := nn.CastTo(nn.NewLinear(km, 8, 3, nn.LinearOptions{}), tensor.Float16)
	x := tensor.Normal(kx, 4, 8)
	got := l.WithPolicy(nn.MixedBFloat16).Forward(x)
	require.Equal(t, tensor.Float32, got.DType())
	want := tensor.Convert(nn.CastTo(l, tensor.BFloat16).Forward(tensor.Convert(x, tensor.BFloat16)), tensor.Float32)
	require.Equal(t, want.Float32s(), got.Float32s())
}
