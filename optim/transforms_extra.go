package optim

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// ZeroNansState is the state of ZeroNans (optax.ZeroNansState).
type ZeroNansState struct {
	// FoundNaN is a tree like the params holding, for each float leaf, a
	// bool[] that says whether the last update of that leaf had a NaN
	// (false after Init; kept where a gradient is nil); nil for the other
	// leaves.
	FoundNaN any
}

// ZeroNans returns a transform that replaces the NaN elements of the
// updates by zeros and leaves the others, infinities included, unchanged
// (optax.zero_nans). Its state records, per leaf, whether the last
// update had a NaN (optax's found_nan: not a running flag).
func ZeroNans() Transform { return zeroNans{} }

type zeroNans struct{}

func (zeroNans) Init(params any) State {
	rejectHalf("optim.ZeroNans", "parameter", params)
	return ZeroNansState{FoundNaN: pytree.Map(params, func(p *tensor.Tensor) *tensor.Tensor {
		if !isFloat(p) {
			return nil
		}
		return tensor.ScalarBool(false)
	})}
}

func (zeroNans) Update(grads any, state State, _ any) (any, State) {
	const op = "optim.ZeroNans"
	rejectHalf(op, "gradient", grads)
	st := stateAs[ZeroNansState](op, state)
	defer func() { sameStructure(op, recover(), zeroNansRoles) }()
	r := mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, found := xs[0], xs[1]
		if !isFloat(g) {
			return []*tensor.Tensor{nil, found}
		}
		nan := tensor.IsNaN(g)
		return []*tensor.Tensor{tensor.Where(nan, tensor.Scalar(0), g), tensor.Any(nan)}
	}, grads, st.FoundNaN)
	return r[0], ZeroNansState{FoundNaN: r[1]}
}

// zeroNansRoles names the trees of ZeroNans's walk.
var zeroNansRoles = roles("gradients", "optimizer state's FoundNaN")

// AdaptiveGradClip returns adaptive gradient clipping, AGC of the NFNets
// (optax.adaptive_grad_clip): each unit of an update leaf g whose
// unit-wise norm ‖g‖ is at least clipping·max(‖p‖, eps), p the unit of
// the parameter, is scaled to that norm, g·clipping·max(‖p‖, eps)/max(‖g‖,
// 1e-6); units below it pass unchanged. It reads params (Update panics
// without them) and keeps no state (EmptyState).
//
// The units are optax's unitwise_norm's, with gonox's weight layouts:
//   - a scalar or a leaf with at most one dimension larger than 1 (a
//     bias, [1, n]) is one unit: the norm of the whole leaf;
//   - a matrix is [in, out] (nn.Linear's layout, Haiku's IO, which optax
//     assumes): the norm is over axis 0, one unit per output column;
//   - a rank-3 leaf is a multi-head linear weight [in, heads, d]: over
//     axis 0, as in optax;
//   - a rank-4 leaf is a convolution kernel, which gonox stores [out, in,
//     kh, kw]: the norm is over axes 1, 2, 3, one unit per output
//     channel. Optax's rank-4 rule sums axes 0, 1, 2 of Flax's HWIO
//     kernel [kh, kw, in, out]: the same units in the other layout.
//
// Larger ranks panic, as in optax. It panics unless clipping > 0 and
// eps >= 0 (optax's default eps is 1e-3).
func AdaptiveGradClip(clipping, eps float64) Transform {
	const op = "optim.AdaptiveGradClip"
	if !(clipping > 0) || math.IsInf(clipping, 0) {
		panic(fmt.Sprintf("%s: clipping %v, want finite > 0", op, clipping))
	}
	checkNonNeg(op, "eps", eps)
	return &agc{clip: clipping, eps: eps}
}

type agc struct{ clip, eps float64 }

func (a *agc) Init(params any) State {
	rejectHalf("optim.AdaptiveGradClip", "parameter", params)
	return EmptyState{}
}

// unitwiseNorm returns the unit-wise L2 norm of x with its reduced axes
// kept (see AdaptiveGradClip), for broadcasting against x.
func unitwiseNorm(op string, x *tensor.Tensor) *tensor.Tensor {
	big := 0
	for _, d := range x.BorrowShape() {
		if d > 1 {
			big++
		}
	}
	sq := tensor.Square(x)
	var s *tensor.Tensor
	switch {
	case big <= 1:
		s = tensor.SumKeep(sq, axesFrom(0, x.Rank())...)
	case x.Rank() == 2 || x.Rank() == 3:
		s = tensor.SumKeep(sq, 0)
	case x.Rank() == 4:
		s = tensor.SumKeep(sq, 1, 2, 3)
	default:
		panic(fmt.Sprintf("%s: leaf %v has rank %d; unit-wise norms are defined for ranks up to 4", op, x, x.Rank()))
	}
	return tensor.Sqrt(s)
}

func (a *agc) Update(grads any, state State, params any) (any, State) {
	const op = "optim.AdaptiveGradClip"
	rejectHalf(op, "gradient", grads)
	stateAs[EmptyState](op, state)
	needParams(op, params)
	defer func() { sameStructure(op, recover(), agcRoles) }()
	r := mapMulti(1, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, p := xs[0], xs[1]
		if !isFloat(g) {
			return []*tensor.Tensor{nil}
		}
		gradFits(op, g, p, params)
		gn, pn := unitwiseNorm(op, g), unitwiseNorm(op, p)
		maxNorm := tensor.MulScalar(tensor.Maximum(pn, tensor.Scalar(float32(a.eps))), float32(a.clip))
		clipped := tensor.Mul(g, tensor.Div(maxNorm, tensor.Maximum(gn, tensor.Scalar(1e-6))))
		return []*tensor.Tensor{tensor.Where(tensor.Less(gn, maxNorm), g, clipped)}
	}, grads, params)
	return r[0], state
}

// agcRoles names the trees of AdaptiveGradClip's walk.
var agcRoles = roles("gradients", "parameters")

// Centralize returns gradient centralization (optax.centralize): each
// update leaf of rank 2 or more has its mean over every axis but the
// first subtracted, x − mean(x, axes 1…), as optax does; vectors and
// scalars pass unchanged. For gonox's [in, out] matrices that centres
// each input's row; for its [out, in, kh, kw] convolution kernels each
// output channel, as the paper (Yong et al., 2020) does. Its state is
// EmptyState.
func Centralize() Transform {
	return Stateless(func(u, _ any) any {
		rejectHalf("optim.Centralize", "update", u)
		return mapLeaves(u, func(x *tensor.Tensor) *tensor.Tensor {
			if x.Rank() < 2 {
				return x
			}
			return tensor.Sub(x, tensor.MeanKeep(x, axesFrom(1, x.Rank())...))
		})
	})
}

// ScaleBySign returns a transform that replaces each update element by
// its sign, −1, 0 or 1 (optax.scale_by_sign; NaN stays NaN). Chained
// before ScaleByLearningRate it is signSGD. Its state is EmptyState.
func ScaleBySign() Transform {
	return Stateless(func(u, _ any) any {
		rejectHalf("optim.ScaleBySign", "update", u)
		return mapLeaves(u, tensor.Sign)
	})
}

// SignSGD returns signSGD, Chain(ScaleBySign(), ScaleByLearningRate(lr)):
// each parameter moves by −lr·sign(g).
func SignSGD(lr Schedule) Transform {
	needSchedule("optim.SignSGD", lr)
	return Chain(ScaleBySign(), ScaleByLearningRate(lr))
}

// ApplyEveryState is the state of ApplyEvery (optax.ApplyEvery).
type ApplyEveryState struct {
	// Count is the number of updates since the last emitted one, in
	// [0, k) (i32[]).
	Count *tensor.Tensor
	// GradAcc is the sum of the updates since the last emitted one, a
	// tree like the params.
	GradAcc any
}

// ApplyEvery returns a transform that accumulates k updates and emits
// their sum every k-th call, zeros on the others (optax.apply_every). With
// k = 1 it is Identity. MultiSteps, which emits the mean through an inner
// optimizer, is usually what gradient accumulation wants. It panics
// unless k >= 1.
func ApplyEvery(k int) Transform {
	if k < 1 {
		panic(fmt.Sprintf("optim.ApplyEvery: k %d, want >= 1", k))
	}
	return &applyEvery{k: k}
}

type applyEvery struct{ k int }

func (a *applyEvery) Init(params any) State {
	rejectHalf("optim.ApplyEvery", "parameter", params)
	return ApplyEveryState{Count: newCount(), GradAcc: stateLike(params, 0)}
}

func (a *applyEvery) Update(grads any, state State, _ any) (any, State) {
	const op = "optim.ApplyEvery"
	rejectHalf(op, "gradient", grads)
	st := stateAs[ApplyEveryState](op, state)
	c := countValue(op, st.Count)
	if c < 0 || c >= a.k {
		panic(fmt.Sprintf("%s: state count %d outside [0, %d): a state of another ApplyEvery?", op, c, a.k))
	}
	keep, emit := c != 0, c == a.k-1
	defer func() { sameStructure(op, recover(), applyEveryRoles) }()
	r := mapMulti(2, func(xs []*tensor.Tensor) []*tensor.Tensor {
		g, acc := xs[0], xs[1]
		if g == nil {
			return []*tensor.Tensor{nil, acc}
		}
		noState(op, g, acc)
		gradFits(op, g, acc, st.GradAcc)
		if keep {
			g = tensor.Add(acc, g)
		}
		g = withAxesOf(g, acc)
		if emit {
			return []*tensor.Tensor{g, g}
		}
		return []*tensor.Tensor{like(g, 0), g}
	}, grads, st.GradAcc)
	n := (c + 1) % a.k
	count := tensor.ScalarInt(int32(n))
	if l := st.Count.Local(); l != nil {
		count = tensor.WithLocal(count, l)
	}
	return r[0], ApplyEveryState{Count: count, GradAcc: r[1]}
}

// applyEveryRoles names the trees of ApplyEvery's walk.
var applyEveryRoles = roles("gradients", "optimizer state's GradAcc")

// AddNoiseState is the state of AddNoise (optax.AddNoiseState).
type AddNoiseState struct {
	// Count is the number of updates so far (i32[]).
	Count *tensor.Tensor
	// RNGKey is the key of the next update's noise, its words as i32[2]
	// (tensor.Key.Data).
	RNGKey *tensor.Tensor
}

// AddNoise returns a transform that adds Gaussian noise of variance
// eta/(1+t)^gamma to each update element at the update numbered t from 0
// (optax.add_noise; Neelakantan et al., 2015, use gamma 0.55). The noise
// is drawn as optax draws it: the state's key, tensor.NewKey(seed) at
// first, is split into n+1 keys for the n float leaves (pytree.Leaves
// order), the first becoming the next state's key and key i+1 drawing
// tensor.Normal for leaf i (tensor.NormalFloat64 for a float64 leaf). It
// panics unless eta >= 0 and gamma is finite.
func AddNoise(eta, gamma float64, seed uint64) Transform {
	const op = "optim.AddNoise"
	checkNonNeg(op, "eta", eta)
	if !finite(eta) || !finite(gamma) {
		panic(fmt.Sprintf("%s: eta %v, gamma %v, want both finite", op, eta, gamma))
	}
	return &addNoise{eta: eta, gamma: gamma, seed: seed}
}

type addNoise struct {
	eta, gamma float64
	seed       uint64
}

func (a *addNoise) Init(params any) State {
	rejectHalf("optim.AddNoise", "parameter", params)
	return AddNoiseState{Count: newCount(), RNGKey: keyTensor(tensor.NewKey(a.seed))}
}

func (a *addNoise) Update(grads any, state State, _ any) (any, State) {
	const op = "optim.AddNoise"
	rejectHalf(op, "gradient", grads)
	st := stateAs[AddNoiseState](op, state)
	c := countValue(op, st.Count)
	if st.RNGKey == nil || st.RNGKey.DType() != tensor.Int32 || st.RNGKey.Size() != 2 {
		panic(fmt.Sprintf("%s: state key is %v, want i32[2]; create the state with Init", op, st.RNGKey))
	}
	w := st.RNGKey.Int32s()
	key := tensor.WrapKeyData([2]uint32{uint32(w[0]), uint32(w[1])})
	nf := 0
	for _, g := range pytree.Leaves(grads) {
		if isFloat(g) {
			nf++
		}
	}
	keys := key.Split(nf + 1)
	std := math.Sqrt(a.eta / math.Pow(float64(min(c+1, math.MaxInt32)), a.gamma))
	i := 0
	out := mapLeaves(grads, func(g *tensor.Tensor) *tensor.Tensor {
		i++
		if g.DType() == tensor.Float64 {
			return tensor.Add(g, tensor.Mul(tensor.NormalFloat64(keys[i], g.Shape()...), tensor.FromFloat64s([]float64{std})))
		}
		return tensor.Add(g, tensor.MulScalar(tensor.Normal(keys[i], g.Shape()...), float32(std)))
	})
	return out, AddNoiseState{Count: incCount(st.Count, c), RNGKey: keyTensor(keys[0])}
}

// SkipLargeUpdatesState is the state of SkipLargeUpdates.
type SkipLargeUpdatesState struct {
	// NormSquared is the squared global norm of the last incoming
	// updates (f32[]).
	NormSquared *tensor.Tensor
	// Skipped is the number of updates skipped so far (i32[]).
	Skipped *tensor.Tensor
	// Inner is the wrapped transform's state.
	Inner State
}

// SkipLargeUpdates returns a transform that applies inner only to
// updates whose squared global norm Σ u² is below maxSquaredNorm, and
// otherwise returns zeros and keeps inner's state as it was: optax's
// skip_large_updates, which optax.MultiSteps takes as its
// should_skip_update_fn, as a wrapper. A NaN norm is skipped too (it is
// not below). For non-finite updates, ApplyIfFinite is optax's
// skip_not_finite wrapped so (with a limit of consecutive skips). It
// panics unless maxSquaredNorm > 0.
func SkipLargeUpdates(inner Transform, maxSquaredNorm float64) Transform {
	const op = "optim.SkipLargeUpdates"
	if inner == nil {
		panic(op + ": nil inner transform")
	}
	if !(maxSquaredNorm > 0) {
		panic(fmt.Sprintf("%s: maxSquaredNorm %v, want > 0", op, maxSquaredNorm))
	}
	return &skipLarge{inner: inner, max: maxSquaredNorm}
}

type skipLarge struct {
	inner Transform
	max   float64
}

func (s *skipLarge) Init(params any) State {
	return SkipLargeUpdatesState{NormSquared: tensor.Scalar(0), Skipped: newCount(), Inner: s.inner.Init(params)}
}

func (s *skipLarge) Update(grads any, state State, params any) (any, State) {
	return s.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to the inner transform.
func (s *skipLarge) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	const op = "optim.SkipLargeUpdates"
	st := stateAs[SkipLargeUpdatesState](op, state)
	n := countValue(op, st.Skipped)
	var sq float64
	if t := treeSum(grads, nil, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(x)) }); t != nil {
		sq = t.Item()
	}
	out := SkipLargeUpdatesState{NormSquared: tensor.Scalar(float32(sq)), Skipped: st.Skipped, Inner: st.Inner}
	if sq < s.max {
		var u any
		u, out.Inner = UpdateExtra(s.inner, grads, st.Inner, params, extra)
		return u, out
	}
	out.Skipped = incCount(st.Skipped, n)
	return mapLeaves(grads, func(x *tensor.Tensor) *tensor.Tensor { return like(x, 0) }), out
}
