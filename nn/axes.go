package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Conventional logical axis names, the vocabulary of Flax, MaxText and the
// shard package's Rules. Constructors never set names on their own: every
// options struct has an Axes field, empty by default, and these constants (or
// the helpers MegatronAxes, DefaultAttentionAxes, DefaultMoEAxes) fill it.
const (
	AxisBatch  = "batch"  // examples in a batch
	AxisLength = "length" // sequence positions
	AxisEmbed  = "embed"  // the model (residual stream) dimension
	AxisMLP    = "mlp"    // the hidden dimension of a feed-forward block
	AxisHeads  = "heads"  // attention heads (times the head dimension)
	AxisVocab  = "vocab"  // vocabulary entries
	AxisExpert = "expert" // experts of a mixture of experts
)

// MegatronAxes returns logical axes for the layers of an MLP with the given
// number of linear layers that alternate (AxisEmbed, AxisMLP) and (AxisMLP,
// AxisEmbed): for the usual two-layer block, the first linear is
// column-parallel and the second row-parallel when rules map AxisMLP to a
// tensor-parallel mesh axis, so the hidden activation never needs gathering
// and the block ends in a single all-reduce (Megatron-LM). Rules that map
// AxisEmbed to a data-parallel axis give FSDP instead.
func MegatronAxes(layers int) [][2]string {
	out := make([][2]string, layers)
	for i := range out {
		if i%2 == 0 {
			out[i] = [2]string{AxisEmbed, AxisMLP}
		} else {
			out[i] = [2]string{AxisMLP, AxisEmbed}
		}
	}
	return out
}

// withAxes annotates x with names unless every name is empty.
func withAxes(x *tensor.Tensor, names ...string) *tensor.Tensor {
	if x == nil {
		return nil
	}
	for _, n := range names {
		if n != "" {
			if len(names) != x.Rank() {
				panic(fmt.Sprintf("nn: %d logical axis names %q for %v", len(names), names, x))
			}
			return tensor.WithLogicalAxes(x, names...)
		}
	}
	return x
}
