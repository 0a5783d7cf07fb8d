package optim

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// NewtonSchulzCoeffs are the coefficients (a, b, c) of one quintic
// Newton–Schulz iteration X ← aX + (bA + cA²)X with A = XXᵀ.
type NewtonSchulzCoeffs [3]float64

var (
	// MuonCoeffs are the coefficients of Keller Jordan's Muon, used for
	// every iteration (optax's default).
	MuonCoeffs = []NewtonSchulzCoeffs{{3.4445, -4.7750, 2.0315}}
	// DionCoeffs are the five per-iteration coefficients of Dion (optax's
	// "dion" preset).
	DionCoeffs = []NewtonSchulzCoeffs{
		{4.0848, -6.8946, 2.9270},
		{3.9505, -6.3029, 2.6377},
		{3.7418, -5.5913, 2.3037},
		{2.8769, -3.1427, 1.2046},
		{2.8366, -3.0525, 1.2012},
	}
)

// Preconditioning is how a matrix is scaled before the Newton–Schulz
// iterations, so that its singular values are at most about 1.
type Preconditioning int

const (
	// Frobenius divides the matrix by its Frobenius norm (+ eps): optax's
	// default.
	Frobenius Preconditioning = iota
	// AOL rescales the rows in the first iteration by the inverse square
	// roots of the row sums of |XXᵀ| (Almost Orthogonal Lipschitz),
	// which usually saves one iteration.
	AOL
	// Schatten divides by the square root of the Frobenius norm of XXᵀ
	// (the Schatten-4 norm of X) in the first iteration.
	Schatten
)

// String returns the preconditioning's name: Frobenius, AOL or Schatten.
func (p Preconditioning) String() string {
	switch p {
	case Frobenius:
		return "Frobenius"
	case AOL:
		return "AOL"
	case Schatten:
		return "Schatten"
	}
	return fmt.Sprintf("Preconditioning(%d)", int(p))
}

// MuonDims says how Muon reads a parameter as a batch of matrices: the
// dimensions contracted with the layer's input (Reduction, its fan-in) and
// those of its output (Output, its fan-out); any other dimension is a batch
// dimension (optax.contrib.MuonDimensionNumbers). Negative dimensions count
// from the end. A Linear weight [in, out] is MuonDims{Reduction: []int{0},
// Output: []int{1}}.
type MuonDims struct {
	Reduction, Output []int
}

// MatrixDims are the MuonDims of a [in, out] matrix.
var MatrixDims = MuonDims{Reduction: []int{0}, Output: []int{1}}

// MuonOptions are the optional hyperparameters of Muon and ScaleByMuon.
// Zero fields take optax's defaults; use Zero for a literal 0.
type MuonOptions struct {
	// Coeffs are the Newton–Schulz coefficients: one triple used for all
	// NSSteps iterations (default MuonCoeffs), or several, one per
	// iteration, which fixes their number (DionCoeffs).
	Coeffs []NewtonSchulzCoeffs
	// NSSteps is the number of Newton–Schulz iterations for a single
	// triple of Coeffs (default 5).
	NSSteps int
	// Beta is the decay of the momentum (default 0.95).
	Beta float64
	// Eps keeps the norms away from zero (default 1e-8); the Adam part
	// uses it as its eps too.
	Eps float64
	// NoNesterov uses plain momentum instead of Nesterov's (optax's
	// nesterov=False), for Muon and its Adam part.
	NoNesterov bool
	// Adaptive scales each orthogonalized update by its inner product with
	// the momentum, the dual norm (Pethick et al. 2025).
	Adaptive bool
	// Preconditioning is the scaling before the iterations (default
	// Frobenius).
	Preconditioning Preconditioning
	// Dims chooses the parameters Muon updates and says how it reads them
	// as matrices; nil returns false. Without Dims, Muon takes the rank-2
	// parameters as [in, out] matrices (MatrixDims) and the Adam part the
	// rest.
	Dims func(path pytree.Path, x *tensor.Tensor) (MuonDims, bool)
	// ConsistentRMS, when set, scales the orthogonalized update by
	// sqrt(max(fanIn, fanOut))·ConsistentRMS, so that its RMS matches
	// AdamW's (0.2 does); otherwise by sqrt(max(1, fanOut/fanIn)).
	ConsistentRMS float64
	// WeightDecay is Muon's decoupled weight decay, multiplied by the
	// learning rate (default 0), for the parameters WeightDecayMask selects
	// (nil: all of Muon's).
	WeightDecay     float64
	WeightDecayMask pytree.Predicate

	// The Adam part (Muon only), for the parameters Muon does not update:
	// AdamW with Nesterov momentum unless NoNesterov. AdamB1 (default
	// 0.9), AdamB2 (0.999), AdamEpsRoot (0), AdamWeightDecay (0), and
	// AdamLearningRate (nil: Muon's learning rate).
	AdamB1, AdamB2, AdamEpsRoot, AdamWeightDecay float64
	AdamLearningRate                             Schedule
}

// MuonState is the state of ScaleByMuon and of the Muon part of Muon.
type MuonState struct {
	// Count is the number of updates made so far (i32[]).
	Count *tensor.Tensor
	// Mu is the momentum, a tree like the params.
	Mu any
}

// Muon returns the Muon optimizer (Jordan et al. 2024,
// optax.contrib.muon): the momentum of each matrix parameter, orthogonalized
// by Newton–Schulz iterations, scaled by its shape, then by -lr:
//
//	m ← β·m + (1-β)·g;  m̂ = m/(1-β^t)  (Nesterov: β·m/(1-β^(t+1)) + (1-β)·g/(1-β^t))
//	O = NewtonSchulz(m̂)               (≈ U·Vᵀ for m̂ = U·S·Vᵀ)
//	u = -lr(t-1) · (sqrt(max(1, fanOut/fanIn))·O + wd·p)
//
// The other parameters (biases, norms, embeddings if Dims leaves them out)
// are updated by AdamW, as optax does: the result is a Partition whose
// state is a PartitionState with groups "muon" (a MuonState) and "adam"
// (an AdamState).
//
// On parameters placed on a mesh Muon runs on the global tensors (the
// matrix products are propagated); inside shard.Map it refuses a matrix
// whose block varies over mesh axes, since Newton–Schulz needs the whole
// matrix. optax's "spectral" preconditioning (an exact spectral norm) is
// not offered.
func Muon(lr Schedule, opts ...MuonOptions) Transform {
	const op = "optim.Muon"
	needSchedule(op, lr)
	o := oneOpt(op, opts)
	m := newMuon(op, lr, o)
	adamLR := o.AdamLearningRate
	if adamLR == nil {
		adamLR = lr
	} else {
		needSchedule(op+": AdamLearningRate", adamLR)
	}
	eps := o.Eps
	if eps == 0 {
		eps = 1e-8
	}
	adam := newAdam(op, adamLR, AdamOptions{B1: o.AdamB1, B2: o.AdamB2, Eps: eps, EpsRoot: o.AdamEpsRoot, Nesterov: !o.NoNesterov},
		orDefault(o.AdamWeightDecay, 0), nil)
	checkNonNeg(op, "AdamWeightDecay", adam.wd)
	return newPartition(op, map[string]Transform{"muon": m, "adam": adam}, func(path pytree.Path, x *tensor.Tensor) string {
		if _, ok := m.dims(path, x); ok {
			return "muon"
		}
		return "adam"
	})
}

// ScaleByMuon returns Muon's direction alone, the orthogonalized momentum
// (optax.contrib.scale_by_muon), for the parameters its Dims selects (by
// default the rank-2 ones); it panics on any other. It does not scale by
// the shape, decay the weights or apply a learning rate, and the Adam
// options are not used.
func ScaleByMuon(opts ...MuonOptions) Transform {
	const op = "optim.ScaleByMuon"
	m := newMuon(op, nil, oneOpt(op, opts))
	m.bare = true
	return m
}

type muon struct {
	op       string
	lr       Schedule
	coeffs   []NewtonSchulzCoeffs
	steps    int
	beta     float64
	eps      float64
	nesterov bool
	adaptive bool
	precond  Preconditioning
	dimsFn   func(pytree.Path, *tensor.Tensor) (MuonDims, bool)
	rms      float64
	wd       float64
	mask     pytree.Predicate
	bare     bool // ScaleByMuon: no shape scaling, decay or learning rate
}

func newMuon(op string, lr Schedule, o MuonOptions) *muon {
	m := &muon{op: op, lr: lr, coeffs: o.Coeffs, steps: o.NSSteps, beta: orDefault(o.Beta, 0.95), eps: orDefault(o.Eps, 1e-8),
		nesterov: !o.NoNesterov, adaptive: o.Adaptive, precond: o.Preconditioning, dimsFn: o.Dims,
		rms: orDefault(o.ConsistentRMS, 0), wd: orDefault(o.WeightDecay, 0), mask: o.WeightDecayMask}
	if m.coeffs == nil {
		m.coeffs = MuonCoeffs
	}
	if m.steps == 0 {
		m.steps = 5
	}
	switch {
	case len(m.coeffs) == 0:
		panic(op + ": empty Coeffs")
	case m.steps < 0:
		panic(fmt.Sprintf("%s: NSSteps %d, want > 0", op, m.steps))
	case len(m.coeffs) > 1 && o.NSSteps != 0 && o.NSSteps != len(m.coeffs):
		panic(fmt.Sprintf("%s: %d Coeffs (one per iteration) and NSSteps %d", op, len(m.coeffs), o.NSSteps))
	case m.precond < Frobenius || m.precond > Schatten:
		panic(fmt.Sprintf("%s: unknown %v", op, m.precond))
	}
	if len(m.coeffs) > 1 {
		m.steps = len(m.coeffs)
	}
	m.coeffs = slices.Clone(m.coeffs)
	checkUnit(op, "Beta", m.beta, false)
	checkNonNeg(op, "Eps", m.eps)
	checkNonNeg(op, "ConsistentRMS", m.rms)
	checkNonNeg(op, "WeightDecay", m.wd)
	return m
}

// dims returns how Muon reads x, and whether it updates it at all.
func (m *muon) dims(path pytree.Path, x *tensor.Tensor) (MuonDims, bool) {
	if !isFloat(x) {
		return MuonDims{}, false
	}
	if m.dimsFn != nil {
		return m.dimsFn(path, x)
	}
	return MatrixDims, x.Rank() == 2
}

func (m *muon) Init(params any) State {
	rejectHalf(m.op, "parameter", params)
	return MuonState{Count: newCount(), Mu: stateLike(params, 0)}
}

func (m *muon) Update(grads any, state State, params any) (any, State) {
	rejectHalf(m.op, "gradient", grads)
	st := stateAs[MuonState](m.op, state)
	n := countValue(m.op, st.Count)
	t := n + 1
	post := learningRate(m.op, m.lr, n)
	var extras []any
	if m.wd != 0 && !m.bare {
		needParams(m.op, params)
		extras = []any{selected(params, m.mask)}
	}
	dims := m.leafDims(grads, params)
	u, s := leafStep(m.op, grads, []any{st.Mu}, extras, func(g *tensor.Tensor, s, x []*tensor.Tensor) (*tensor.Tensor, []*tensor.Tensor) {
		mu := ema(s[0], g, m.beta)
		mhat := firstMoment(mu, g, m.beta, t, m.nesterov)
		d := dims[g]
		o := m.orthogonalize(mhat, d)
		if m.adaptive {
			o = tensor.Mul(o, tensor.Sum(tensor.Mul(mhat, o)))
		}
		if !m.bare {
			fanIn, fanOut := fans(o.Shape(), d)
			if m.rms != 0 {
				o = scale(o, math.Sqrt(float64(max(fanIn, fanOut)))*m.rms)
			} else {
				o = scale(o, math.Sqrt(math.Max(1, float64(fanOut)/float64(fanIn))))
			}
			if len(x) > 0 {
				o = withDecay(o, x[0], m.wd)
			}
		}
		return scale(o, post), []*tensor.Tensor{mu}
	})
	return u, MuonState{Count: incCount(st.Count, n), Mu: s[0]}
}

// leafDims returns the dimension numbers of each gradient leaf, read from
// the parameter at its path (from the gradient without params).
func (m *muon) leafDims(grads, params any) map[*tensor.Tensor]MuonDims {
	byPath := map[string]*tensor.Tensor{}
	if params != nil {
		pp, pl := pytree.LeavesWithPath(params)
		for i, p := range pl {
			byPath[pp[i].String()] = p
		}
	}
	paths, leaves := pytree.LeavesWithPath(grads)
	dims := map[*tensor.Tensor]MuonDims{}
	for i, g := range leaves {
		if g == nil {
			continue
		}
		x := g
		if p := byPath[paths[i].String()]; p != nil {
			x = p
		}
		d, ok := m.dims(paths[i], x)
		if !ok {
			panic(fmt.Sprintf("%s: parameter %s %v is not one Muon updates (its Dims leave it out): use Muon, which gives it to Adam, or Partition", m.op, paths[i], g))
		}
		dims[g] = d
	}
	return dims
}

// fans returns the products of the reduction and output dimensions.
func fans(shape []int, d MuonDims) (fanIn, fanOut int) {
	fanIn, fanOut = 1, 1
	for _, a := range d.Reduction {
		fanIn *= shape[normAxis(a, len(shape))]
	}
	for _, a := range d.Output {
		fanOut *= shape[normAxis(a, len(shape))]
	}
	return
}

func normAxis(a, rank int) int {
	if a < 0 {
		a += rank
	}
	return a
}

// orthogonalize returns OrthogonalizeNewtonSchulz of x read as matrices by
// d, shaped like x.
func (m *muon) orthogonalize(x *tensor.Tensor, d MuonDims) *tensor.Tensor {
	if axes := x.Local().AxisNames(); len(axes) > 0 {
		panic(fmt.Sprintf("%s: %v varies over mesh axes %v inside shard.Map: Newton–Schulz needs the whole matrix; run Muon on the global placed parameters instead", m.op, x, axes))
	}
	return newtonSchulz(m.op, x, d, m.coeffs, m.steps, m.precond, m.eps)
}

// OrthogonalizeNewtonSchulz returns the orthogonalization of x by Newton–Schulz
// iterations (optax.contrib.orthogonalize_via_newton_schulz): x read as a
// batch of matrices by d (nil d: x is a matrix) is scaled as precond says
// and iterated steps times with coeffs (one triple for all iterations, or
// one per iteration, which fixes their number), giving ≈ U·Vᵀ for each
// matrix U·S·Vᵀ. Tall matrices are iterated transposed. The result has x's
// shape.
func OrthogonalizeNewtonSchulz(x *tensor.Tensor, d *MuonDims, coeffs []NewtonSchulzCoeffs, steps int, precond Preconditioning, eps float64) *tensor.Tensor {
	const op = "optim.OrthogonalizeNewtonSchulz"
	dims := MatrixDims
	switch {
	case d != nil:
		dims = *d
	case x.Rank() != 2:
		panic(fmt.Sprintf("%s: %v is not a matrix and has no MuonDims", op, x))
	}
	if len(coeffs) == 0 {
		panic(op + ": no coefficients")
	}
	if len(coeffs) > 1 {
		steps = len(coeffs)
	}
	if steps < 1 {
		panic(fmt.Sprintf("%s: %d steps, want >= 1", op, steps))
	}
	return newtonSchulz(op, x, dims, coeffs, steps, precond, eps)
}

func newtonSchulz(op string, x *tensor.Tensor, d MuonDims, coeffs []NewtonSchulzCoeffs, steps int, precond Preconditioning, eps float64) *tensor.Tensor {
	perm, inv, flat, unflat := muonReshape(op, x, d)
	b := tensor.Reshape(tensor.Transpose(x, perm...), flat...)
	transposed := flat[1] > flat[2]
	if transposed {
		b = tensor.Transpose(b, 0, 2, 1)
	}
	if precond == Frobenius {
		b = tensor.Div(b, tensor.AddScalar(tensor.Sqrt(tensor.SumKeep(tensor.Square(b), 1, 2)), float32(eps)))
	}
	for i := range steps {
		c := coeffs[min(i, len(coeffs)-1)]
		switch {
		case i == 0 && precond == AOL:
			b = nsFirstAOL(b, c, eps)
		case i == 0 && precond == Schatten:
			b = nsFirstSchatten(b, c, eps)
		default:
			b = nsStep(b, tensor.MatMulT(b, b, false, true), c)
		}
	}
	if transposed {
		b = tensor.Transpose(b, 0, 2, 1)
	}
	return tensor.Transpose(tensor.Reshape(b, unflat...), inv...)
}

// nsStep is one iteration on a batch of matrices b with a = b·bᵀ:
// c0·b + (c1·a + c2·a·a)·b.
func nsStep(b, a *tensor.Tensor, c NewtonSchulzCoeffs) *tensor.Tensor {
	p := tensor.Add(tensor.MulScalar(a, float32(c[1])), tensor.MulScalar(tensor.MatMul(a, a), float32(c[2])))
	return tensor.Add(tensor.MulScalar(b, float32(c[0])), tensor.MatMul(p, b))
}

// nsFirstAOL is the first iteration with AOL rescaling: the rows of b are
// divided by sqrt(Σ_j |a_ij|) (at least eps) and a by the same on both
// sides.
func nsFirstAOL(b *tensor.Tensor, c NewtonSchulzCoeffs, eps float64) *tensor.Tensor {
	a := tensor.MatMulT(b, b, false, true)
	r := tensor.Maximum(tensor.SumKeep(tensor.Abs(a), 2), tensor.Scalar(float32(eps)))
	s := tensor.Rsqrt(r) // [B, m, 1]
	b = tensor.Mul(b, s)
	a = tensor.Mul(tensor.Mul(a, s), tensor.Transpose(s, 0, 2, 1))
	return nsStep(b, a, c)
}

// nsFirstSchatten is the first iteration with Schatten-4 rescaling: b is
// divided by sqrt(‖a‖_F) (at least eps) and a by ‖a‖_F.
func nsFirstSchatten(b *tensor.Tensor, c NewtonSchulzCoeffs, eps float64) *tensor.Tensor {
	a := tensor.MatMulT(b, b, false, true)
	f := tensor.Maximum(tensor.Sqrt(tensor.SumKeep(tensor.Square(a), 1, 2)), tensor.Scalar(float32(eps)))
	s := tensor.Rsqrt(f) // [B, 1, 1]
	return nsStep(tensor.Mul(b, s), tensor.Mul(a, tensor.Square(s)), c)
}

// muonReshape returns the permutation that puts x's batch, reduction and
// output dimensions in that order, its inverse, the [batch, reduction,
// output] shape and the permuted shape, panicking on dimension numbers
// that do not fit x.
func muonReshape(op string, x *tensor.Tensor, d MuonDims) (perm, inv, flat, unflat []int) {
	rank := x.Rank()
	if rank < 2 {
		panic(fmt.Sprintf("%s: %v has rank %d, want >= 2", op, x, rank))
	}
	role := make([]int, rank) // 0 batch, 1 reduction, 2 output
	for r, axes := range [][]int{d.Reduction, d.Output} {
		if len(axes) == 0 {
			panic(fmt.Sprintf("%s: %v: MuonDims %v has no %s dimension", op, x, d, [2]string{"reduction", "output"}[r]))
		}
		for _, a := range axes {
			n := normAxis(a, rank)
			if n < 0 || n >= rank || role[n] != 0 {
				panic(fmt.Sprintf("%s: %v: MuonDims %v: dimension %d is out of range or given twice", op, x, d, a))
			}
			role[n] = r + 1
		}
	}
	shape := x.Shape()
	flat = []int{1, 1, 1}
	for r := range 3 {
		for i := range rank {
			if role[i] == r {
				perm = append(perm, i)
				flat[r] *= shape[i]
				unflat = append(unflat, shape[i])
			}
		}
	}
	inv = make([]int, rank)
	for i, p := range perm {
		inv[p] = i
	}
	return perm, inv, flat, unflat
}
