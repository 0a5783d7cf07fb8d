package autodiff

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// ScanOption changes how Scan runs.
type ScanOption func(*scanSettings)

type scanSettings struct {
	length    int // -1: from xs
	reverse   bool
	remat     bool
	k         int // steps per checkpointed segment; 0: ⌈√T⌉
	policy    Policy
	hasPolicy bool
}

// ScanLength sets the number of steps, as lax.scan's length does. It is
// needed when xs has no tensor leaves (a loop driven by its carry alone);
// when xs has leaves, their leading dimension must equal n.
func ScanLength(n int) ScanOption {
	if n < 0 {
		panic(fmt.Sprintf("autodiff.ScanLength: negative length %d", n))
	}
	return func(s *scanSettings) { s.length = n }
}

// ScanReverse runs the loop from the last element of xs to the first, as
// lax.scan's reverse=True does. The outputs stay in the order of xs: ys[t]
// is what f returned for xs[t].
func ScanReverse() ScanOption { return func(s *scanSettings) { s.reverse = true } }

// ScanRemat makes the backward pass of Scan keep only every k-th carry and
// recompute the steps between from it (a checkpoint around every segment
// of k steps, jax.checkpoint around a scan of scans). The memory the
// gradient needs falls from O(T) steps of intermediate values to O(T/k)
// carries plus O(k) steps, at the price of running every step's forward
// computation twice. k <= 0 chooses k = ⌈√T⌉, which makes both terms
// O(√T). Within a segment nothing is kept unless ScanRematPolicy says so.
//
// As lax.scan traces its body once, f is called for the steps of the
// first segment only (and of a shorter last one): the other segments, in
// the forward pass and in the recomputation, replay the ops those calls
// recorded (tensor.RematCompiled). f must therefore compute its results
// from its arguments and the values it closes over alone; Go code in it
// that counts or logs steps sees only the first segment's.
func ScanRemat(k int) ScanOption {
	return func(s *scanSettings) {
		s.remat = true
		s.k = max(k, 0)
	}
}

// ScanRematPolicy is ScanRemat(0) with a policy that chooses what the
// recomputation may keep from the forward pass within each segment (see
// Checkpoint): DotsSaveable keeps the matrix products, say. Combined with
// ScanRemat, ScanRemat sets k.
func ScanRematPolicy(policy Policy) ScanOption {
	return func(s *scanSettings) {
		s.remat = true
		s.policy, s.hasPolicy = policy, true
	}
}

// Scan loops f over the leading axis of xs, threading a carry through the
// steps, as jax.lax.scan does:
//
//	carry := init
//	for t := range T {
//		carry, ys[t] = f(carry, xs[t])
//	}
//	return carry, stack(ys)
//
// C, X and Y are pytrees (a *tensor.Tensor, a struct of them, a slice...).
// Every tensor leaf of xs has the same leading dimension T, and f sees
// each leaf indexed at t; the tensor leaves of the ys f returns are
// stacked along a new leading axis of size T. f must return a carry of
// the structure, dtypes and shapes of init, and ys of one structure,
// dtypes and shapes at every step (a nil leaf stays nil); Scan panics
// naming the step and the leaf otherwise. With T = 0 Scan returns init and
// ys with a leading dimension of 0, and calls f once on zeros to learn
// their shapes.
//
// Scan is differentiable like any Go loop over ops: a gradient of its
// results reaches init, xs and the tensors f closes over (model
// parameters). Without remat the backward pass keeps every step's
// intermediate values until it has used them; ScanRemat bounds that memory
// by O(√T) steps. Options: ScanLength, ScanReverse, ScanRemat,
// ScanRematPolicy. With remat, f must be deterministic (split random keys
// outside and pass them in xs).
func Scan[C, X, Y any](f func(carry C, x X) (C, Y), init C, xs X, opts ...ScanOption) (C, Y) {
	s := scanSettings{length: -1}
	for _, o := range opts {
		o(&s)
	}
	xl, xst := pytree.Flatten(xs)
	n := scanLength(s.length, xs, xl)
	cl, cst := pytree.Flatten(init)
	sc := &scanner[C, X, Y]{f: f, cst: cst, xst: xst, carryAvals: avals(cl)}
	if n == 0 {
		return init, sc.empty(init, xl)
	}
	if !s.remat {
		return sc.plain(init, xl, n, s.reverse)
	}
	k := s.k
	if k == 0 {
		k = int(math.Ceil(math.Sqrt(float64(n))))
	}
	policy := Policy(NothingSaveable)
	if s.hasPolicy && s.policy != nil {
		policy = s.policy
	}
	return sc.remat(cl, xl, n, min(k, n), s.reverse, policy)
}

// scanLength returns T: the leading dimension of every leaf of xs, or the
// length option.
func scanLength(length int, xs any, xl []*tensor.Tensor) int {
	n := length
	for i, x := range xl {
		if x.Rank() == 0 {
			panic(fmt.Sprintf("autodiff.Scan: xs leaf %s is a scalar %v; every leaf needs a leading axis to scan over",
				leafName(xs, i), x))
		}
		if n < 0 {
			n = x.Dim(0)
			continue
		}
		if x.Dim(0) != n {
			what := "the other leaves"
			if length >= 0 {
				what = "ScanLength"
			}
			panic(fmt.Sprintf("autodiff.Scan: xs leaf %s is %v; its leading dimension %d differs from %d (%s)",
				leafName(xs, i), x, x.Dim(0), n, what))
		}
	}
	if n < 0 {
		panic("autodiff.Scan: xs has no tensor leaves; give the number of steps with ScanLength")
	}
	return n
}

// leafName names the i-th leaf of tree by its path.
func leafName(tree any, i int) string {
	paths := pytree.Paths(tree)
	if i < len(paths) && paths[i].String() != "" {
		return paths[i].String()
	}
	return fmt.Sprintf("%d", i)
}

// aval is the dtype and shape of a tensor.
type aval struct {
	dt    tensor.DType
	shape []int
}

func avals(ts []*tensor.Tensor) []aval {
	out := make([]aval, len(ts))
	for i, t := range ts {
		out[i] = aval{t.DType(), t.Shape()}
	}
	return out
}

func (a aval) String() string {
	return fmt.Sprint(tensor.Zeros(a.dt, a.shape...)) // type notation, e.g. f32[3,4]
}

type scanner[C, X, Y any] struct {
	f          func(C, X) (C, Y)
	cst, xst   pytree.Structure
	carryAvals []aval
	yst        pytree.Structure
	yAvals     []aval
	haveY      bool
}

// step runs f at step t and checks what it returns.
func (sc *scanner[C, X, Y]) step(t int, carry C, xt []*tensor.Tensor) (C, []*tensor.Tensor) {
	c, y := sc.f(carry, pytree.Unflatten[X](sc.xst, xt))
	cl, cst := pytree.Flatten(c)
	if !cst.Equal(sc.cst) {
		panic(fmt.Sprintf("autodiff.Scan: step %d: f returned a carry of structure %v; init has %v", t, cst, sc.cst))
	}
	for i, x := range cl {
		if a := sc.carryAvals[i]; x.DType() != a.dt || !slices.Equal(x.Shape(), a.shape) {
			panic(fmt.Sprintf("autodiff.Scan: step %d: carry leaf %s is %v; init has %v", t, leafName(c, i), x, a))
		}
	}
	yl, yst := pytree.Flatten(y)
	if !sc.haveY {
		sc.yst, sc.yAvals, sc.haveY = yst, avals(yl), true
		return c, yl
	}
	if !yst.Equal(sc.yst) {
		panic(fmt.Sprintf("autodiff.Scan: step %d: f returned ys of structure %v; earlier steps returned %v", t, yst, sc.yst))
	}
	for i, x := range yl {
		if a := sc.yAvals[i]; x.DType() != a.dt || !slices.Equal(x.Shape(), a.shape) {
			panic(fmt.Sprintf("autodiff.Scan: step %d: ys leaf %s is %v; earlier steps returned %v", t, leafName(y, i), x, a))
		}
	}
	return c, yl
}

// order returns the index of the j-th step to run of n.
func order(j, n int, reverse bool) int {
	if reverse {
		return n - 1 - j
	}
	return j
}

// plain runs the loop as it is: the backward pass keeps every step.
func (sc *scanner[C, X, Y]) plain(init C, xl []*tensor.Tensor, n int, reverse bool) (C, Y) {
	pieces := make([][]*tensor.Tensor, len(xl))
	for i, x := range xl {
		pieces[i] = tensor.Unstack(x, 0) // one op: its gradient is one Concat
	}
	ys := make([][]*tensor.Tensor, n)
	carry := init
	xt := make([]*tensor.Tensor, len(xl))
	for j := range n {
		t := order(j, n, reverse)
		for i := range xl {
			xt[i] = pieces[i][t]
			pieces[i][t] = nil
		}
		carry, ys[t] = sc.step(t, carry, xt)
	}
	return carry, sc.stack(ys, false)
}

// stack joins per-step leaves ys[t][i] leafwise along a new axis 0, or
// with blocks set, blocks of steps along their axis 0.
func (sc *scanner[C, X, Y]) stack(ys [][]*tensor.Tensor, blocks bool) Y {
	out := make([]*tensor.Tensor, len(sc.yAvals))
	parts := make([]*tensor.Tensor, len(ys))
	for i := range sc.yAvals {
		for t := range ys {
			parts[t] = ys[t][i]
		}
		if blocks {
			out[i] = tensor.Concat(0, parts...)
		} else {
			out[i] = tensor.Stack(0, parts...)
		}
	}
	return pytree.Unflatten[Y](sc.yst, out)
}

// empty returns the ys of a loop of no steps: f is called once on zeros to
// learn their structure and shapes, as lax.scan traces its body.
func (sc *scanner[C, X, Y]) empty(init C, xl []*tensor.Tensor) Y {
	xt := make([]*tensor.Tensor, len(xl))
	for i, x := range xl {
		xt[i] = tensor.Zeros(x.DType(), x.Shape()[1:]...)
	}
	sc.step(0, init, xt)
	out := make([]*tensor.Tensor, len(sc.yAvals))
	for i, a := range sc.yAvals {
		out[i] = tensor.Zeros(a.dt, append([]int{0}, a.shape...)...)
	}
	return pytree.Unflatten[Y](sc.yst, out)
}

// remat runs the loop in segments of k steps, each a checkpoint whose
// inputs are its first carry and its part of xs: the forward pass keeps
// ⌈n/k⌉ carries, and the backward pass of a segment recomputes its k
// steps before differentiating them. f is traced once for the segments
// of k steps (and once more for a shorter last one): the others replay
// the program compiled then (tensor.RematCompiled), so that what the
// forward pass keeps per segment is its inputs, not a program of k steps.
func (sc *scanner[C, X, Y]) remat(cl, xl []*tensor.Tensor, n, k int, reverse bool, policy Policy) (C, Y) {
	nseg := (n + k - 1) / k
	sizes := make([]int, nseg)
	for s := range sizes {
		sizes[s] = min(k, n-s*k)
	}
	// A traced leaf of xs is cut into the segments' parts by one op (its
	// gradient is one Concat). An untraced one (data, token ids) is given
	// whole to every segment, with the indices of the segment's steps,
	// which takes its part inside the checkpoint: the forward pass keeps
	// no copy of it, and the segments' programs do not differ.
	chunks := make([][]*tensor.Tensor, len(xl))
	untraced := false
	for i, x := range xl {
		if x.IsTraced() {
			chunks[i] = tensor.SplitSizes(x, 0, sizes)
		} else {
			untraced = true
		}
	}
	nc := len(cl)
	run := map[int]func(...*tensor.Tensor) []*tensor.Tensor{} // by segment size
	ys := make([][]*tensor.Tensor, nseg)
	carry := cl
	for j := range nseg {
		s := order(j, nseg, reverse)
		lo, m := s*k, sizes[s]
		in := slices.Clone(carry)
		for i, x := range xl {
			if chunks[i] != nil {
				in = append(in, chunks[i][s])
				chunks[i][s] = nil
			} else {
				in = append(in, x)
			}
		}
		if untraced {
			idx := make([]int32, m)
			for t := range idx {
				idx[t] = int32(lo + t)
			}
			in = append(in, tensor.FromInt32(idx, m))
		}
		f := run[m]
		if f == nil {
			f = tensor.RematCompiled(func(ls []*tensor.Tensor) []*tensor.Tensor {
				return sc.segment(ls[:nc], ls[nc:nc+len(xl)], ls[nc+len(xl):], chunks, lo, m, reverse)
			}, policy)
			run[m] = f
		}
		out := f(in...)
		carry, ys[s] = out[:nc], out[nc:]
	}
	return pytree.Unflatten[C](sc.cst, carry), sc.stack(ys, true)
}

// segment runs m steps (in reverse if asked) from the carry leaves cl,
// with xin the segment's inputs from xs (its part of a traced leaf, or the
// whole of an untraced one, of which it takes the steps idx[0] lists); it
// returns the final carry leaves and the ys leaves stacked over the
// segment. lo, the index of its first step, names steps in messages.
func (sc *scanner[C, X, Y]) segment(cl, xin, idx []*tensor.Tensor, chunks [][]*tensor.Tensor, lo, m int, reverse bool) []*tensor.Tensor {
	pieces := make([][]*tensor.Tensor, len(xin))
	for i, x := range xin {
		if chunks[i] == nil {
			x = tensor.Take(x, idx[0], 0)
		}
		pieces[i] = tensor.Unstack(x, 0)
	}
	carry := pytree.Unflatten[C](sc.cst, cl)
	ys := make([][]*tensor.Tensor, m)
	xt := make([]*tensor.Tensor, len(xin))
	for j := range m {
		t := order(j, m, reverse)
		for i := range xin {
			xt[i] = pieces[i][t]
		}
		carry, ys[t] = sc.step(lo+t, carry, xt)
	}
	out, _ := pytree.Flatten(carry)
	parts := make([]*tensor.Tensor, m)
	for i := range sc.yAvals {
		for t := range ys {
			parts[t] = ys[t][i]
		}
		out = append(out, tensor.Stack(0, parts...))
	}
	return out
}
