package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/tensor"
)

// ApplyIfFiniteOptions are the options of ApplyIfFinite.
type ApplyIfFiniteOptions struct {
	// Psum, inside shard.Map, is c.Psum: the devices then count the
	// non-finite elements of all their blocks together and take the same
	// decision (see GlobalNorm). Leave it nil outside shard.Map.
	Psum PsumFunc
}

// ApplyIfFiniteState is the state of ApplyIfFinite.
type ApplyIfFiniteState struct {
	// NotFiniteCount is the number of consecutive updates with a NaN or
	// an infinity (i32[]), 0 after a finite one.
	NotFiniteCount *tensor.Tensor
	// LastFinite says whether the last update was finite (bool[]).
	LastFinite *tensor.Tensor
	// TotalNotFinite is the number of non-finite updates so far (i32[]).
	TotalNotFinite *tensor.Tensor
	// Inner is the wrapped transform's state.
	Inner State
}

// ApplyIfFinite returns a transform that applies inner only to updates
// that are all finite (optax.apply_if_finite): an update with a NaN or an
// infinity anywhere becomes zeros and leaves inner's state as it was. After
// more than maxConsecutiveErrors non-finite updates in a row, inner is
// applied anyway, so that a run that has diverged shows it instead of
// stalling silently. The finiteness is that of the incoming updates (the
// gradients, first in a chain). It panics unless maxConsecutiveErrors >= 0.
//
// For float16 training, where overflows are expected and the loss scale
// adapts, StepScaled does the same with a DynamicLossScale.
func ApplyIfFinite(inner Transform, maxConsecutiveErrors int, opts ...ApplyIfFiniteOptions) Transform {
	const op = "optim.ApplyIfFinite"
	if inner == nil {
		panic(op + ": nil inner transform")
	}
	if maxConsecutiveErrors < 0 {
		panic(fmt.Sprintf("%s: maxConsecutiveErrors %d, want >= 0", op, maxConsecutiveErrors))
	}
	return &applyIfFinite{inner: inner, max: maxConsecutiveErrors, o: oneOpt(op, opts)}
}

type applyIfFinite struct {
	inner Transform
	max   int
	o     ApplyIfFiniteOptions
}

func (a *applyIfFinite) Init(params any) State {
	return ApplyIfFiniteState{
		NotFiniteCount: newCount(),
		LastFinite:     tensor.ScalarBool(true),
		TotalNotFinite: newCount(),
		Inner:          a.inner.Init(params),
	}
}

func (a *applyIfFinite) Update(grads any, state State, params any) (any, State) {
	return a.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to the inner transform.
func (a *applyIfFinite) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	const op = "optim.ApplyIfFinite"
	st := stateAs[ApplyIfFiniteState](op, state)
	run := countValue(op, st.NotFiniteCount)
	total := countValue(op, st.TotalNotFinite)
	if st.LastFinite == nil {
		panic(op + ": state has no LastFinite; create it with Init")
	}
	finite := countNonFinite(grads, a.o.Psum) == 0
	out := ApplyIfFiniteState{LastFinite: tensor.ScalarBool(finite), Inner: st.Inner}
	if l := st.LastFinite.Local(); l != nil {
		out.LastFinite = tensor.WithLocal(out.LastFinite, l)
	}
	if finite {
		out.NotFiniteCount, out.TotalNotFinite = resetCount(st.NotFiniteCount), st.TotalNotFinite
	} else {
		out.NotFiniteCount, out.TotalNotFinite = incCount(st.NotFiniteCount, run), incCount(st.TotalNotFinite, total)
		run = min(run+1, math.MaxInt32)
	}
	if finite || run > a.max {
		var u any
		u, out.Inner = UpdateExtra(a.inner, grads, st.Inner, params, extra)
		return u, out
	}
	return mapLeaves(grads, func(x *tensor.Tensor) *tensor.Tensor { return like(x, 0) }), out
}

// countNonFinite returns the number of NaN and infinite elements of the
// float32 leaves of tree, summed over the devices with psum (see treeSum).
func countNonFinite(tree any, psum PsumFunc) float64 {
	n := treeSum(tree, psum, func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Where(tensor.IsFinite(x), tensor.Scalar(0), tensor.Scalar(1)))
	})
	if n == nil {
		return 0
	}
	return n.Item()
}

// resetCount returns a zero int32 counter marked as the same shard.Map
// block as c.
func resetCount(c *tensor.Tensor) *tensor.Tensor {
	r := tensor.ScalarInt(0)
	if l := c.Local(); l != nil {
		r = tensor.WithLocal(r, l)
	}
	return r
}
