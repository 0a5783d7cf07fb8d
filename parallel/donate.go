package parallel

import (
	"cmp"
	"slices"
	"sync"
	"unsafe"

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
// internal to the trainer: made by it (a step, placed copies of what it
// was given, the optimizer's Init) and never handed out. The zero value
// says both are exposed.
type donation struct {
	params, state bool
}

// expose marks the current parameters and state as seen by the user.
func (d *donation) expose() { d.params, d.state = false, false }

// fresh reports whether no leaf of tree is a leaf of the trees in given
// (what the trainer was given): tree is then the trainer's own, copies
// made by placing it or a state made by the optimizer's Init.
func fresh(tree any, given ...any) bool {
	theirs := map[*tensor.Tensor]bool{}
	for _, g := range given {
		for _, x := range pytree.Leaves(g) {
			theirs[x] = true
		}
	}
	for _, x := range pytree.Leaves(tree) {
		if theirs[x] {
			return false
		}
	}
	return true
}

// early returns the callback of optim.StepWith that donates each
// parameter's old leaves as soon as its update is computed: its gradient
// (grads is the step's own), and the old parameter and state when they
// are internal; nil when steps donate nothing. The update then holds one
// copy of the parameters and state, not two.
func (t *Trainer[M, B]) early(grads M) func([]*tensor.Tensor) {
	if !donateSteps {
		return nil
	}
	mine := map[*tensor.Tensor]bool{}
	trees := []any{grads}
	if t.don.params {
		trees = append(trees, t.params)
	}
	if t.don.state {
		trees = append(trees, t.opt)
	}
	for _, tree := range trees {
		for _, x := range pytree.Leaves(tree) {
			mine[x] = true
		}
	}
	return func(dead []*tensor.Tensor) {
		for _, x := range dead {
			if mine[x] {
				donateValue(x)
			}
		}
	}
}

// donateStep donates the dead buffers of a step that replaced oldParams
// and oldState by t.params and t.opt; dead lists the step's internal trees
// (gradients, loss).
func (t *Trainer[M, B]) donateStep(oldParams M, oldState optim.State, dead ...any) {
	params, state := t.don.params, t.don.state
	t.don.params, t.don.state = true, true
	if !donateSteps {
		return
	}
	if params {
		dead = append(dead, oldParams)
	}
	if state {
		dead = append(dead, oldState)
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
	if y == nil || x == nil || y == x || y.Rank() != x.Rank() || y.BorrowLogicalAxes() != nil || x.BorrowLogicalAxes() == nil {
		return y
	}
	z := tensor.WithLogicalAxes(y, x.BorrowLogicalAxes()...) // copied
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
	var xs []*tensor.Tensor
	for _, tree := range dead {
		xs = append(xs, pytree.Leaves(tree)...)
	}
	if len(xs) == 0 {
		// Nothing to donate (the sharded update that took every
		// gradient later leaves its reduced gradients nil): no walk of
		// the kept trees.
		return
	}
	// The kept leaves by address, sorted: a device's update calls this
	// with a few hundred of them a few times a step, where a map grew
	// and hashed for each call.
	live := pytree.Leaves(keep)
	slices.SortFunc(live, byAddress)
	for _, x := range xs {
		if _, ok := slices.BinarySearchFunc(live, x, byAddress); !ok {
			donateValue(x)
		}
	}
}

// byAddress orders tensors by the address of their headers.
func byAddress(a, b *tensor.Tensor) int {
	return cmp.Compare(uintptr(unsafe.Pointer(a)), uintptr(unsafe.Pointer(b)))
}

// evalLoss evaluates loss at p, recording the ops it performs
// (tensor.Recycling), and returns the loss and the function that donates
// the pass's intermediates: Eval calls it once it has read the loss (after
// the Map has returned, on a mesh), so that the activations of an
// evaluation go to the allocator cache and the next step reuses them.
func evalLoss[M any](p M, loss func(M) *tensor.Tensor) (*tensor.Tensor, func()) {
	if !donateSteps {
		return loss(p), func() {}
	}
	leaves, st := pytree.Flatten(p)
	out, recycle := tensor.Recycling(func(in []*tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{loss(pytree.Unflatten[M](st, in))}
	}, leaves...)
	return out[0], recycle
}

// evalRecycles collects the recycle functions of the devices' evalLoss
// calls inside the Map of Eval, which runs them after the Map returns.
type evalRecycles struct {
	mu sync.Mutex
	fs []func()
}

// add records f; the devices of a Map call it concurrently.
func (r *evalRecycles) add(f func()) {
	r.mu.Lock()
	r.fs = append(r.fs, f)
	r.mu.Unlock()
}

// run calls and forgets the recorded functions.
func (r *evalRecycles) run() {
	r.mu.Lock()
	fs := r.fs
	r.fs = nil
	r.mu.Unlock()
	for _, f := range fs {
		f()
	}
}
