package nn

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Policy is a mixed-precision policy, as in DeepMind's jmp and Flax's
// dtype/param_dtype: the dtype parameters are stored in (Param), the dtype
// layers compute in (Compute) and the dtype a model's outputs are returned
// in (Output). It is applied to a whole model and its inputs through
// pytree, so no layer changes: a layer computes in the dtype of the
// parameters and inputs it is given.
//
// The recommended policy for training is MixedBFloat16: float32
// parameters (the master copy, which the optimizer updates and whose
// state is float32 too), bfloat16 compute, float32 outputs so that the
// loss is float32:
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
