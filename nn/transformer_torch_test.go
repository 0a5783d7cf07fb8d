package nn_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// visitTorch calls f for every parameter of a Transformer module m (a
// pointer) under its PyTorch state_dict name: the gonox tensors that make
// it, stacked along PyTorch's first axis (in_proj_weight is the query, key
// and value weights), each transposed if transpose (a Linear's [in, out]
// against PyTorch's [out, in]).
func visitTorch(prefix string, m any, f func(name string, parts []**tensor.Tensor, transpose bool)) {
	linear := func(p string, l *nn.Linear) {
		f(p+"weight", []**tensor.Tensor{&l.W}, true)
		f(p+"bias", []**tensor.Tensor{&l.B}, false)
	}
	norm := func(p string, l *nn.LayerNorm) {
		f(p+"weight", []**tensor.Tensor{&l.Weight}, false)
		f(p+"bias", []**tensor.Tensor{&l.Bias}, false)
	}
	mha := func(p string, a *nn.MultiHeadAttention) {
		f(p+"in_proj_weight", []**tensor.Tensor{&a.QueryProj.W, &a.KeyProj.W, &a.ValueProj.W}, true)
		f(p+"in_proj_bias", []**tensor.Tensor{&a.QueryProj.B, &a.KeyProj.B, &a.ValueProj.B}, false)
		linear(p+"out_proj.", &a.OutputProj)
	}
	switch m := m.(type) {
	case *nn.TransformerEncoderLayer:
		mha(prefix+"self_attn.", &m.SelfAttn)
		linear(prefix+"linear1.", &m.Linear1)
		linear(prefix+"linear2.", &m.Linear2)
		norm(prefix+"norm1.", &m.Norm1)
		norm(prefix+"norm2.", &m.Norm2)
	case *nn.TransformerDecoderLayer:
		mha(prefix+"self_attn.", &m.SelfAttn)
		mha(prefix+"multihead_attn.", &m.MultiheadAttn)
		linear(prefix+"linear1.", &m.Linear1)
		linear(prefix+"linear2.", &m.Linear2)
		norm(prefix+"norm1.", &m.Norm1)
		norm(prefix+"norm2.", &m.Norm2)
		norm(prefix+"norm3.", &m.Norm3)
	case *nn.TransformerEncoder:
		for i := range m.Layers {
			visitTorch(prefix+"layers."+strconv.Itoa(i)+".", &m.Layers[i], f)
		}
		if m.Norm != nil {
			norm(prefix+"norm.", m.Norm)
		}
	case *nn.TransformerDecoder:
		for i := range m.Layers {
			visitTorch(prefix+"layers."+strconv.Itoa(i)+".", &m.Layers[i], f)
		}
		if m.Norm != nil {
			norm(prefix+"norm.", m.Norm)
		}
	case *nn.Transformer:
		visitTorch(prefix+"encoder.", &m.Encoder, f)
		visitTorch(prefix+"decoder.", &m.Decoder, f)
	default:
		panic("visitTorch: " + prefix)
	}
}

// loadTorchParams sets m's parameters from the case's "p." tensors, in dtype.
func loadTorchParams(t *testing.T, c torchCase, m any, dt tensor.DType) {
	visitTorch("", m, func(name string, parts []**tensor.Tensor, transpose bool) {
		w := tensor.Convert(c.f64(t, "p."+name), dt)
		for i, p := range tensor.Split(w, 0, len(parts)) {
			if transpose {
				p = tensor.Transpose(p)
			}
			require.Equal(t, (*parts[i]).Shape(), p.Shape(), "%s: %s", c.Name, name)
			*parts[i] = p
		}
	})
}

// torchGrads compares the gradients in grad (a pointer to a module of m's
// type) with the case's "d." tensors.
func torchGrads(t *testing.T, c torchCase, grad any, req func(*testing.T, torchCase, string, *tensor.Tensor)) int {
	n := 0
	visitTorch("", grad, func(name string, parts []**tensor.Tensor, transpose bool) {
		var ts []*tensor.Tensor
		for _, p := range parts {
			g := *p
			if transpose {
				g = tensor.Transpose(g)
			}
			ts = append(ts, g)
		}
		req(t, c, "d."+name, tensor.Concat(0, ts...))
		n++
	})
	return n
}

// torchMask returns the case's mask for PyTorch's keyword kw (nil if the
// case has none), in dtype dt when it is a float mask.
func torchMask(t *testing.T, c torchCase, kw string, dt tensor.DType) *tensor.Tensor {
	spec, _ := c.Config[kw].(string)
	switch spec {
	case "":
		return nil
	case "causal_float":
		return tensor.Convert(nn.SquareSubsequentMask(int(c.Tensors["y"].Shape[len(c.Tensors["y"].Shape)-2])), dt)
	case "causal_bool":
		return nil // set by the caller, who knows the length
	case "bool":
		return tensor.NotEqual(c.f64(t, kw), tensor.ZerosLike(c.f64(t, kw)))
	case "float":
		return tensor.Convert(c.f64(t, kw), dt)
	}
	t.Fatalf("%s: mask %s: unknown spec %q", c.Name, kw, spec)
	return nil
}

// causal returns the case's causal mask for kw over n positions, float or
// bool as the case says.
func causalMask(t *testing.T, c torchCase, kw string, n int, dt tensor.DType) *tensor.Tensor {
	switch c.Config[kw] {
	case "causal_float":
		return tensor.Convert(nn.SquareSubsequentMask(n), dt)
	case "causal_bool":
		return nn.TorchCausalMask(n)
	}
	return torchMask(t, c, kw, dt)
}

// runTorchTransformer builds the case's module in dtype dt, loads
// PyTorch's parameters, and returns the output, the input gradients
// (by input name) and the number of parameter gradients compared by req.
func runTorchTransformer(t *testing.T, c torchCase, dt tensor.DType, req func(*testing.T, torchCase, string, *tensor.Tensor)) {
	key := tensor.NewKey(0)
	dModel, heads := int(c.num("d_model")), int(c.num("nhead"))
	opts := nn.TransformerOptions{DimFeedforward: int(c.num("dim_feedforward")), BatchFirst: c.flag("batch_first"), NormFirst: c.flag("norm_first")}
	if c.Config["activation"] == "gelu" {
		opts.Activation = nn.GeluExact
	}
	in := func(name string) *tensor.Tensor { return tensor.Convert(c.f64(t, name), dt) }
	g := in("g")
	length := func(x *tensor.Tensor) int {
		if x.Rank() == 2 || opts.BatchFirst {
			return x.Dim(x.Rank() - 2)
		}
		return x.Dim(0)
	}
	var nParams int
	switch c.Kind {
	case "encoder_layer", "encoder":
		src := in("src")
		T := length(src)
		call := nn.TransformerEncoderCall{KeyPaddingMask: torchMask(t, c, "src_key_padding_mask", dt)}
		maskKW := "src_mask"
		if c.Kind == "encoder" {
			maskKW = "mask"
		}
		call.Mask = causalMask(t, c, maskKW, T, dt)
		var y, dsrc *tensor.Tensor
		if c.Kind == "encoder_layer" {
			l := nn.NewTransformerEncoderLayer(key, dModel, heads, opts)
			loadTorchParams(t, c, &l, dt)
			var dl nn.TransformerEncoderLayer
			y, dsrc, dl = layerGrads(l, src, g, func(l nn.TransformerEncoderLayer, x *tensor.Tensor) *tensor.Tensor {
				return l.ForwardWith(x, call)
			})
			nParams = torchGrads(t, c, &dl, req)
		} else {
			e := nn.NewTransformerEncoder(key, dModel, heads, int(c.num("layers")), c.flag("norm"), opts)
			loadTorchParams(t, c, &e, dt)
			var de nn.TransformerEncoder
			y, dsrc, de = layerGrads(e, src, g, func(e nn.TransformerEncoder, x *tensor.Tensor) *tensor.Tensor {
				return e.ForwardWith(x, call)
			})
			nParams = torchGrads(t, c, &de, req)
		}
		req(t, c, "y", y)
		req(t, c, "dsrc", dsrc)
	case "decoder_layer", "decoder":
		tgt, mem := in("tgt"), in("memory")
		call := nn.TransformerDecoderCall{
			TgtMask:              causalMask(t, c, "tgt_mask", length(tgt), dt),
			MemoryMask:           torchMask(t, c, "memory_mask", dt),
			TgtKeyPaddingMask:    torchMask(t, c, "tgt_key_padding_mask", dt),
			MemoryKeyPaddingMask: torchMask(t, c, "memory_key_padding_mask", dt),
		}
		var y, dtgt, dmem *tensor.Tensor
		if c.Kind == "decoder_layer" {
			l := nn.NewTransformerDecoderLayer(key, dModel, heads, opts)
			loadTorchParams(t, c, &l, dt)
			var dl nn.TransformerDecoderLayer
			y, dtgt, dmem, dl = layerGrads2(l, tgt, mem, g, func(l nn.TransformerDecoderLayer, tgt, mem *tensor.Tensor) *tensor.Tensor {
				return l.ForwardWith(tgt, mem, call)
			})
			nParams = torchGrads(t, c, &dl, req)
		} else {
			dec := nn.NewTransformerDecoder(key, dModel, heads, int(c.num("layers")), c.flag("norm"), opts)
			loadTorchParams(t, c, &dec, dt)
			var dd nn.TransformerDecoder
			y, dtgt, dmem, dd = layerGrads2(dec, tgt, mem, g, func(d nn.TransformerDecoder, tgt, mem *tensor.Tensor) *tensor.Tensor {
				return d.ForwardWith(tgt, mem, call)
			})
			nParams = torchGrads(t, c, &dd, req)
		}
		req(t, c, "y", y)
		req(t, c, "dtgt", dtgt)
		req(t, c, "dmemory", dmem)
	case "transformer":
		src, tgt := in("src"), in("tgt")
		call := nn.TransformerCall{
			SrcMask:              causalMask(t, c, "src_mask", length(src), dt),
			TgtMask:              causalMask(t, c, "tgt_mask", length(tgt), dt),
			SrcKeyPaddingMask:    torchMask(t, c, "src_key_padding_mask", dt),
			TgtKeyPaddingMask:    torchMask(t, c, "tgt_key_padding_mask", dt),
			MemoryKeyPaddingMask: torchMask(t, c, "memory_key_padding_mask", dt),
		}
		m := nn.NewTransformer(key, dModel, heads, int(c.num("encoder_layers")), int(c.num("decoder_layers")), opts)
		loadTorchParams(t, c, &m, dt)
		y, dsrc, dtgt, dm := layerGrads2(m, src, tgt, g, func(m nn.Transformer, src, tgt *tensor.Tensor) *tensor.Tensor {
			return m.ForwardWith(src, tgt, call)
		})
		nParams = torchGrads(t, c, &dm, req)
		req(t, c, "y", y)
		req(t, c, "dsrc", dsrc)
		req(t, c, "dtgt", dtgt)
	default:
		t.Fatalf("unknown kind %q", c.Kind)
	}
	want := 0
	for name := range c.Tensors {
		if len(name) > 2 && name[:2] == "d." {
			want++
		}
	}
	require.Equal(t, want, nParams, "%s: every PyTorch parameter compared", c.Name)
}

// The Transformer layers against PyTorch 1.13 on identical weights:
// outputs and the gradients of every input and parameter, in float64 to
// 1e-9 relative and in float32 to float32 rounding.
func TestTorchTransformer(t *testing.T) {
	cases := loadTorchFile(t, "torch_transformer.json")
	require.Len(t, cases, 16)
	for _, c := range cases {
		t.Run(c.Name+"/f64", func(t *testing.T) { runTorchTransformer(t, c, tensor.Float64, requireTorch64) })
		t.Run(c.Name+"/f32", func(t *testing.T) { runTorchTransformer(t, c, tensor.Float32, requireTorch) })
	}
}
