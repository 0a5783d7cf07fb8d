package nn_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// Every layer given an x whose dtype differs from its parameters' panics
// naming the layer (requireParamDType), not the tensor op that first
// combines the two; the mixes layers take on purpose keep working: a
// half-precision x to float32 projections (MultiHeadAttention, as Linear)
// and a float64 batch to a float32 BatchNorm (its fused sweep converts
// the parameters).
func TestHostileLayerDTypes(t *testing.T) {
	k := tensor.NewKey(1)
	conv := nn.NewConv2d(k, 2, 3, 3, nn.ConvOptions{})
	convT := nn.NewConvTranspose2d(k, 2, 3, 3, nn.ConvTransposeOptions{})
	bn, st := nn.MakeWithState(nn.NewBatchNorm(2, nn.BatchNormOptions{}))
	mha := nn.NewMultiHeadAttention(k, 8, 2, nn.AttentionOptions{})
	emb := nn.NewEmbedding(k, 10, 8, nn.EmbeddingOptions{})
	moe := nn.NewMoE(k, 8, 16, 4, nn.MoEOptions{Activation: nn.Gelu})
	prelu := nn.NewPReLU(0.25, 2)
	type layer struct {
		name, param string
		shape       []int
		fn          func(x *tensor.Tensor)
	}
	layers := []layer{
		{"nn.Conv", "f32[3,2,3,3]", []int{1, 2, 5, 5}, func(x *tensor.Tensor) { conv.Forward(x) }},
		{"nn.ConvTranspose", "f32[2,3,3,3]", []int{1, 2, 5, 5}, func(x *tensor.Tensor) { convT.Forward(x) }},
		{"nn.BatchNorm", "f32[2]", []int{4, 2, 3}, func(x *tensor.Tensor) { bn.Forward(x, st) }},
		{"nn.MultiHeadAttention", "f32[8,8]", []int{4, 8}, func(x *tensor.Tensor) { mha.Forward(x) }},
		{"nn.Embedding.Attend", "f32[10,8]", []int{4, 8}, func(x *tensor.Tensor) { emb.Attend(x) }},
		{"nn.MoE", "f32[8,4]", []int{4, 8}, func(x *tensor.Tensor) { moe.Forward(x) }},
		{"nn.PReLU", "f32[2]", []int{4, 2}, func(x *tensor.Tensor) { prelu.Forward(x) }},
	}
	accepted := map[string]bool{ // layer dtype: mixes taken on purpose
		"nn.MultiHeadAttention bfloat16": true, "nn.MultiHeadAttention float16": true,
		"nn.BatchNorm float64": true,
	}
	shapeOf := func(dt tensor.DType, shape []int) string {
		return fmt.Sprintf("%v", tensor.Zeros(dt, shape...))
	}
	for _, l := range layers {
		for _, dt := range []tensor.DType{tensor.Float64, tensor.BFloat16, tensor.Float16, tensor.Int32} {
			x := tensor.AsType(tensor.Ones(tensor.Float32, l.shape...), dt)
			name := l.name + " " + dt.String()
			if accepted[name] {
				require.NotPanics(t, func() { l.fn(x) }, name)
				continue
			}
			if dt == tensor.Int32 && l.name == "nn.BatchNorm" {
				// BatchNorm's own check: float batches only.
				require.PanicsWithValue(t, "nn.BatchNorm: x i32[4,2,3]: want float [N, 2, ...]", func() { l.fn(x) })
				continue
			}
			if dt == tensor.Int32 && l.name == "nn.MoE" {
				require.PanicsWithValue(t, "nn.MoE: x i32[4,8]: want a float tensor [..., 8]", func() { l.fn(x) })
				continue
			}
			want := fmt.Sprintf("%s: x %s, parameter %s: dtypes differ; convert x with tensor.Convert or the layer with nn.CastTo",
				l.name, shapeOf(dt, l.shape), l.param)
			require.PanicsWithValue(t, want, func() { l.fn(x) }, name)
		}
	}

	// The layers cast to the input's dtype take it (nn.CastTo).
	x := tensor.Ones(tensor.Float64, 4, 2)
	assert.NotPanics(t, func() { nn.CastTo(prelu, tensor.Float64).Forward(x) })
	assert.NotPanics(t, func() { nn.CastTo(emb, tensor.Float64).Attend(tensor.Ones(tensor.Float64, 4, 8)) })
}

// A nil input panics naming the layer, not with a nil dereference inside.
func TestHostileLayerNilInput(t *testing.T) {
	k := tensor.NewKey(1)
	conv := nn.NewConv2d(k, 2, 3, 3, nn.ConvOptions{})
	convT := nn.NewConvTranspose2d(k, 2, 3, 3, nn.ConvTransposeOptions{})
	lin := nn.NewLinear(k, 2, 3, nn.LinearOptions{})
	bn, st := nn.MakeWithState(nn.NewBatchNorm(2, nn.BatchNormOptions{}))
	mha := nn.NewMultiHeadAttention(k, 8, 2, nn.AttentionOptions{})
	emb := nn.NewEmbedding(k, 10, 8, nn.EmbeddingOptions{})
	moe := nn.NewMoE(k, 8, 16, 4, nn.MoEOptions{Activation: nn.Gelu})
	prelu := nn.NewPReLU(0.25, 2)
	ln := nn.NewLayerNorm(8, nn.LayerNormOptions{})
	rms := nn.NewRMSNorm(8, nn.RMSNormOptions{})
	gn := nn.NewGroupNorm(2, 4, nn.GroupNormOptions{})
	x := tensor.Ones(tensor.Float32, 4, 8)
	for _, c := range []struct {
		want string
		fn   func()
	}{
		{"nn.Conv: x is nil", func() { conv.Forward(nil) }},
		{"nn.ConvTranspose: x is nil", func() { convT.Forward(nil) }},
		{"nn.Linear: x is nil", func() { lin.Forward(nil) }},
		{"nn.Linear: x is nil", func() { lin.WithPolicy(nn.MixedBFloat16).Forward(nil) }},
		{"nn.BatchNorm: x is nil", func() { bn.Forward(nil, st) }},
		{"nn.MultiHeadAttention: q is nil", func() { mha.Forward(nil) }},
		{"nn.MultiHeadAttention: k is nil", func() { mha.ForwardQKV(x, nil, x, nil) }},
		{"nn.MultiHeadAttention: v is nil", func() { mha.ForwardQKV(x, x, nil, nil) }},
		{"nn.Embedding.Attend: x is nil", func() { emb.Attend(nil) }},
		{"nn.MoE: x is nil", func() { moe.Forward(nil) }},
		{"nn.PReLU: x is nil", func() { prelu.Forward(nil) }},
		{"nn.LayerNorm: x is nil", func() { ln.Forward(nil) }},
		{"nn.RMSNorm: x is nil", func() { rms.Forward(nil) }},
		{"nn.GroupNorm: x is nil", func() { gn.Forward(nil) }},
	} {
		require.PanicsWithValue(t, c.want, c.fn)
	}
}
