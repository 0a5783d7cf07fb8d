package nn

import (
	"fmt"
	"reflect"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Policy is a mixed-precision policy, as in DeepMind's jmp and Flax's
// dtype/param_dtype: the dtype parameters are stored in (Param), the dtype
// layers compute in (Compute) and the dtype a model's outputs are returned
// in (Output). It is applied in one of two ways:
//
//   - Set on the layers (WithPolicy on a whole model, or the layers'
//     WithPolicy methods): with float32 host parameters and a half compute
//     dtype, Linear, MLP, MultiHeadAttention and MoE run as automatic
//     mixed precision, their matrix products in the compute dtype from the
//     float32 weights and activations (rounded as the gemm reads them,
//     float32 results; with bfloat16, MultiHeadAttention's q·kᵀ and
//     weighted sum too, see MultiHeadAttention.WithPolicy) and everything
//     else in float32. This is the fast
//     way on a CPU: no op widens or rounds outside the products.
//   - Cast through pytree (CastToCompute, CastToOutput), so that no layer
//     changes: every layer computes in the dtype of the parameters and
//     inputs it is given, every op in the half dtype.
//
// The recommended policy for training is MixedBFloat16: float32
// parameters (the master copy, which the optimizer updates and whose
// state is float32 too), bfloat16 compute, float32 outputs so that the
// loss is float32. Set on the layers:
//
//	model = nn.WithPolicy(model, nn.MixedBFloat16)
//	loss := func(m Model, b Batch) *tensor.Tensor {
//		return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y)) // float32 logits
//	}
//
// or cast:
//
//	policy := nn.MixedBFloat16
//	loss := func(m Model, b Batch) *tensor.Tensor {
//		mc := nn.CastToCompute(policy, m)              // bf16 copy of the float32 parameters
//		logits := mc.Forward(nn.CastToCompute(policy, b.X))
//		logits = nn.CastToOutput(policy, logits)        // float32
//		return tensor.Mean(tensor.SoftmaxCrossEntropy(logits, b.Y))
//	}
//
// The casts are tensor.Convert, which is differentiable: the gradient with
// respect to the float32 model is float32 (each bf16 cotangent is widened
// exactly), so optimizers see float32. On a mesh the cast of a sharded
// parameter runs shard by shard, so all-gathers move bf16, and the
// cross-device sums of gradients sum the bf16 cotangents in float32 and
// round once, before the widening (package parallel lists every
// collective). Inside
// the bf16 computation every op accumulates in float32 and rounds once
// (see package tensor), and the cotangent of each parameter is summed over
// the batch in float32 by the matmul (or reduction) that produces it, then
// rounded once to bf16 and widened exactly.
//
// With Float16 compute, gradients can underflow: scale the loss (see
// optim.DynamicLossScale).
type Policy struct {
	Param, Compute, Output tensor.DType
}

// The usual policies.
var (
	// Float32Policy computes everything in float32.
	Float32Policy = Policy{tensor.Float32, tensor.Float32, tensor.Float32}
	// MixedBFloat16 keeps float32 parameters and outputs and computes in
	// bfloat16 (jmp's "params=float32,compute=bfloat16,output=float32").
	MixedBFloat16 = Policy{tensor.Float32, tensor.BFloat16, tensor.Float32}
	// MixedFloat16 is MixedBFloat16 with float16 compute; use it with loss
	// scaling.
	MixedFloat16 = Policy{tensor.Float32, tensor.Float16, tensor.Float32}
)

// String returns the policy in jmp's notation,
// "params=float32,compute=bfloat16,output=float32".
func (p Policy) String() string {
	return fmt.Sprintf("params=%v,compute=%v,output=%v", p.Param, p.Compute, p.Output)
}

// Validate reports an error if a dtype of the policy is not a float dtype.
func (p Policy) Validate() error {
	for _, d := range []struct {
		name string
		dt   tensor.DType
	}{{"Param", p.Param}, {"Compute", p.Compute}, {"Output", p.Output}} {
		if !d.dt.IsFloat() {
			return fmt.Errorf("nn.Policy: %s dtype %v is not float32, bfloat16 or float16", d.name, d.dt)
		}
	}
	return nil
}

// ParsePolicy returns the policy for a short name: "f32" (or "float32"),
// "bf16" (or "bfloat16": MixedBFloat16) or "f16" (or "float16":
// MixedFloat16), as a -dtype flag would give it.
func ParsePolicy(name string) (Policy, error) {
	switch name {
	case "f32", "float32":
		return Float32Policy, nil
	case "bf16", "bfloat16":
		return MixedBFloat16, nil
	case "f16", "float16":
		return MixedFloat16, nil
	}
	return Policy{}, fmt.Errorf("nn.ParsePolicy: unknown dtype %q (want f32, bf16 or f16)", name)
}

// CastTo returns tree with every float tensor leaf converted to dt (with
// tensor.Convert, so gradients flow back in each leaf's own dtype). Integer
// and bool leaves, and leaves already of dtype dt, are kept as they are.
func CastTo[T any](tree T, dt tensor.DType) T {
	if !dt.IsFloat() {
		panic(fmt.Sprintf("nn.CastTo: dtype %v is not a float dtype", dt))
	}
	return pytree.Map(tree, func(x *tensor.Tensor) *tensor.Tensor {
		if x == nil || !x.DType().IsFloat() {
			return x
		}
		return tensor.Convert(x, dt)
	})
}

// CastToCompute returns tree (a model, a batch, any pytree) with its float
// leaves in the policy's compute dtype.
func CastToCompute[T any](p Policy, tree T) T { return CastTo(tree, p.Compute) }

// CastToParam returns tree with its float leaves in the policy's param
// dtype.
func CastToParam[T any](p Policy, tree T) T { return CastTo(tree, p.Param) }

// CastToOutput returns tree with its float leaves in the policy's output
// dtype.
func CastToOutput[T any](p Policy, tree T) T { return CastTo(tree, p.Output) }

// WithPolicy returns tree (a model, any pytree) with mixed-precision policy
// p set on every layer of this package that takes one: Linear, MLP,
// MultiHeadAttention (its projections) and MoE (its experts), wherever
// the tree holds them through exported fields, pointers, slices, arrays,
// maps with string keys and interfaces. The tree is not changed. Other
// layers (LayerNorm, Embedding) and the computation between layers run
// in the parameters' dtype.
//
// With float32 host parameters and MixedBFloat16 this is automatic mixed
// precision as PyTorch's autocast and JAX's dot algorithms run it: every
// matrix product of those layers in bfloat16, each float32 operand
// rounded as the product reads it (no bfloat16 copy of a weight or an
// activation is kept), accumulated in float32 and returned in float32;
// everything else (biases, activations, normalizations, softmax, the
// loss, the residual stream) in float32, and every gradient float32. The
// optimizer sees float32 master weights. MoE routes in float32 (the
// router's product decides discretely, as the Switch Transformer's
// selective precision advises). Sharded parameters, or blocks inside
// shard.Map, are cast to p.Compute instead, layer by layer.
//
//	model = nn.WithPolicy(model, nn.MixedBFloat16)
//	logits := model.Forward(x) // float32
//
// The zero Policy switches every policy off.
func WithPolicy[T any](tree T, p Policy) T {
	checkPolicy("nn.WithPolicy", p)
	out := pytree.Map(tree, func(x *tensor.Tensor) *tensor.Tensor { return x }) // fresh containers
	setPolicy(reflect.ValueOf(&out).Elem(), p)
	return out
}

// policyLayer is a layer that takes a Policy: withPolicy returns a copy
// of it with the policy set.
type policyLayer interface {
	withPolicy(p Policy) any
}

var tensorType = reflect.TypeFor[tensor.Tensor]()

// setPolicy sets p on the layers inside v (settable), the tree's
// containers as pytree walks them.
func setPolicy(v reflect.Value, p Policy) {
	if v.Kind() != reflect.Pointer && v.Kind() != reflect.Interface && v.CanInterface() {
		if l, ok := v.Interface().(policyLayer); ok {
			v.Set(reflect.ValueOf(l.withPolicy(p)))
			return
		}
	}
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() && v.Type().Elem() != tensorType {
			setPolicy(v.Elem(), p)
		}
	case reflect.Struct:
		t := v.Type()
		for i := range t.NumField() {
			if f := t.Field(i); f.IsExported() && f.Tag.Get("pytree") != "static" {
				setPolicy(v.Field(i), p)
			}
		}
	case reflect.Slice, reflect.Array:
		for i := range v.Len() {
			setPolicy(v.Index(i), p)
		}
	case reflect.Map:
		if v.Type().Key().Kind() != reflect.String {
			return // static
		}
		for _, k := range v.MapKeys() {
			e := reflect.New(v.Type().Elem()).Elem()
			e.Set(v.MapIndex(k))
			setPolicy(e, p)
			v.SetMapIndex(k, e)
		}
	case reflect.Interface:
		if !v.IsNil() {
			e := reflect.New(v.Elem().Type()).Elem()
			e.Set(v.Elem())
			setPolicy(e, p)
			v.Set(e)
		}
	}
}

// checkPolicy returns p, panicking (naming fn) unless it is the zero
// Policy or valid.
func checkPolicy(fn string, p Policy) Policy {
	if p != (Policy{}) {
		if err := p.Validate(); err != nil {
			panic(fn + ": " + err.Error())
		}
	}
	return p
}

// ampCompute returns p.Compute if a layer with these parameters runs as
// automatic mixed precision under p: a half compute dtype and float32
// host parameters (not sharded, not blocks inside shard.Map; nil ones
// are absent). Otherwise it returns 0: the layer casts.
func ampCompute(p Policy, params ...*tensor.Tensor) tensor.DType {
	if p.Compute != tensor.BFloat16 && p.Compute != tensor.Float16 {
		return 0
	}
	for _, t := range params {
		if t != nil && (t.DType() != tensor.Float32 || t.Layout() != nil || t.Local() != nil) {
			return 0
		}
	}
	return p.Compute
}

// ampInput returns x for a product computed in dtype compute: x itself
// if float32 or of dtype compute, else x converted to float32.
func ampInput(x *tensor.Tensor, compute tensor.DType) *tensor.Tensor {
	if d := x.DType(); d != tensor.Float32 && d != compute {
		return tensor.Convert(x, tensor.Float32)
	}
	return x
}
