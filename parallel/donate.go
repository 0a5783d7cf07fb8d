package parallel

import (
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Donation of a step's dead buffers (see tensor.Donate).
//
// After the update, Step donates what nobody can see any more, so that the
// next step's results reuse its storage instead of fresh zeroed memory:
// the gradients and the loss tensor (internal, never returned), and the
// previous parameters and optimizer state unless the user may hold them —
// they are exposed until a Step replaces them when the trainer was given
// them (New, SetState) or handed them out (Params, PlacedParams, State).
// Leaves that the new parameters or state still use are never donated.
// Placed tensors donate their blocks where their layout supports it
// (tensor.BlockDonator); otherwise only the header is invalidated.

// donateSteps switches the donation off (tests compare both ways).
var donateSteps = true

// donation records whether the current parameters and optimizer state are
// internal to the trainer. The zero value says they are exposed.
type donation struct {
	internal bool
}

// expose marks the current parameters and state as seen by the user.
func (d *donation) expose() { d.internal = false }

// donateStep donates the dead buffers of a step that replaced oldParams
// and oldState by t.params and t.opt; dead lists the step's internal trees
// (gradients, loss).
func (t *Trainer[M, B]) donateStep(oldParams M, oldState optim.State, dead ...any) {
	internal := t.don.internal
	t.don.internal = true
	if !donateSteps {
		return
	}
	if internal {
		dead = append(dead, oldParams, oldState)
	}
	donateDead([]any{t.params, t.opt}, dead...)
}

// namedFresh returns y with the logical axes of x when x has names, y has
// none and both have the same rank (as pytree.Map keeps names), otherwise
// y itself. y must be a value of the step that nothing else holds (a sum
// of micro-batch gradients, a gathered parameter): the named header takes
// the place of y's, which is donated, so that naming it leaves no second
// holder of its storage behind (see tensor.Donate). A traced y belongs to
// its trace and is only named.
func namedFresh(y, x *tensor.Tensor) *tensor.Tensor {
	if y == nil || x == nil || y == x || y.Rank() != x.Rank() || y.LogicalAxes() != nil || x.LogicalAxes() == nil {
		return y
	}
	z := tensor.WithLogicalAxes(y, x.LogicalAxes()...)
	if !y.IsTraced() {
		tensor.Donate(y)
	}
	return z
}

// donateValue donates x, a value of the step that is dead (see
// donateDead), unless it is traced.
func donateValue(x *tensor.Tensor) {
	if donateSteps && x != nil && !x.IsTraced() {
		tensor.Donate(x)
	}
}

// donateDead donates the leaves of the trees in dead (a step's own
// values: micro-batch losses, gradients and their running sums) that are
// not leaves of keep, once the values in keep were computed from them.
// Traced leaves are left alone. Blocks inside shard.Map are donated too:
// every synchronous collective meets the other devices at a barrier after
// reading their operands and before it returns, and a value another
// device still reads (a ppermute's received block, a shared psum result)
// is held by that device's own header, so donating this device's header
// only drops its hold.
func donateDead(keep any, dead ...any) {
	if !donateSteps {
		return
	}
	live := map[*tensor.Tensor]bool{}
	for _, x := range pytree.Leaves(keep) {
		live[x] = true
	}
	for _, tree := range dead {
		for _, x := range pytree.Leaves(tree) {
			if !live[x] {
				donateValue(x)
			}
		}
	}
}
