package shard

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Constraint returns x laid out by s: jax.lax.with_sharding_constraint, to
// steer propagation where its rules would choose otherwise (keep an
// activation sharded over the batch, say). A placed x is moved (pending
// sums reduced), the communication charged to "constraint"; a host x is
// placed. It is differentiable: the cotangent moves back to where x was.
//
// It panics if s's mesh differs from x's or a dimension is not divisible by
// its axes, naming x in type notation and the fix.
func Constraint(x *tensor.Tensor, s Sharding) *tensor.Tensor {
	if s.mesh == nil {
		panic("shard.Constraint: zero Sharding (use NewSharding or Replicated)")
	}
	if msg := s.spec.check(s.mesh, x.Shape()); msg != "" {
		panic(fmt.Sprintf("shard.Constraint: %s to %v: %s; choose axes that divide the dimension, or pad it", typeOf(x), s.spec, msg))
	}
	if x.Local() != nil {
		panic(fmt.Sprintf("shard.Constraint: %v is a block inside shard.Map; constraints apply to global tensors", x))
	}
	l := layoutOf("shard.Constraint", x)
	if l == nil {
		return Put(x, s)
	}
	if !l.sharding.mesh.Equal(s.mesh) {
		panic(fmt.Sprintf("shard.Constraint: %s is on %v, the constraint on %v; move it with shard.Put first", typeOf(x), l.sharding.mesh, s.mesh))
	}
	return moveTo("constraint", x, s)
}
