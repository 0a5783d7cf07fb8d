package autodiff

import (
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Policy decides, for each op a checkpointed function performs, whether
// its result may be kept for the backward pass (jax.checkpoint_policies).
// Results that are not kept are recomputed when backward needs them.
type Policy func(op tensor.NodeInfo) bool

// NothingSaveable keeps nothing: backward recomputes everything from the
// checkpoint's inputs. It saves the most memory.
func NothingSaveable(tensor.NodeInfo) bool { return false }

// EverythingSaveable keeps every result the backward pass needs, like no
// checkpoint at all.
func EverythingSaveable(tensor.NodeInfo) bool { return true }

// DotsSaveable keeps the results of matrix multiplications and recomputes
// the cheap elementwise ops around them.
func DotsSaveable(op tensor.NodeInfo) bool { return op.Op != nil && op.Op.Name == "matmul" }

// SaveOnlyTheseNames keeps only the values tagged with one of the names
// (see tensor.Named).
func SaveOnlyTheseNames(names ...string) Policy {
	names = slices.Clone(names)
	return func(op tensor.NodeInfo) bool {
		return op.Op != nil && op.Op.Name == "name" && slices.Contains(names, op.Label)
	}
}

// SaveAnythingExceptTheseNames keeps everything except values with one of
// the labels: names given with tensor.Named, or op names such as
// "all_gather" (FSDP keeps its sharded weights and re-gathers them in
// backward instead of keeping the gathered copies).
func SaveAnythingExceptTheseNames(names ...string) Policy {
	names = slices.Clone(names)
	return func(op tensor.NodeInfo) bool { return !slices.Contains(names, op.Label) }
}

// Checkpoint returns f wrapped so that differentiating it keeps only what
// policy allows of f's intermediate values and recomputes the rest during
// the backward pass: rematerialisation (jax.checkpoint, eqx.filter_checkpoint).
// In and Out are pytrees; f must be deterministic. Tensors that f closes
// over are handled too. A nil policy is NothingSaveable.
func Checkpoint[In, Out any](f func(In) Out, policy Policy) func(In) Out {
	return func(in In) Out {
		leaves, st := pytree.Flatten(in)
		var ost pytree.Structure
		outs := tensor.Remat(func(ls []*tensor.Tensor) []*tensor.Tensor {
			o := f(pytree.Unflatten[In](st, ls))
			var ol []*tensor.Tensor
			ol, ost = pytree.Flatten(o)
			return ol
		}, policy, leaves...)
		return pytree.Unflatten[Out](ost, outs)
	}
}

// Residuals evaluates f at m as ValueAndGrad would and reports, instead of
// differentiating, what the backward pass would keep alive: count and bytes
// per producing op (or Named label) and per shard.Map device. It is the
// measurable effect of a checkpoint policy.
func Residuals[M any](f func(M) *tensor.Tensor, m M) tensor.ResidualReport {
	tr := tensor.NewTrace()
	mt, _, _, _ := trace(tr, m)
	return tensor.Residuals(f(mt))
}
