package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// The losses of torch.nn that optax lacks, for code ported from PyTorch:
// each takes PyTorch's arguments (a Reduction among them: ReduceMean, the
// zero value, is PyTorch's default mean over all elements) and is composed
// of differentiable tensor ops. Operands are float32 or float64, of one
// dtype; the panics name the loss and the operands in type notation.

// checkLossOperands panics, naming op, unless every operand is a float32 or
// float64 tensor of the dtype of the first, and r is a known Reduction.
func checkLossOperands(op string, r Reduction, names []string, xs ...*tensor.Tensor) string {
	desc := ""
	for i, x := range xs {
		if x == nil {
			panic(fmt.Sprintf("%s: nil %s", op, names[i]))
		}
		if i > 0 {
			desc += ", "
		}
		desc += fmt.Sprintf("%s %v", names[i], x)
	}
	dt := xs[0].DType()
	for _, x := range xs {
		if x.DType() != dt || (dt != tensor.Float32 && dt != tensor.Float64) {
			panic(fmt.Sprintf("%s: %s: want float32 or float64 operands of one dtype", op, desc))
		}
	}
	checkReduction(op, desc, r)
	return desc
}

// reduce applies PyTorch's reduction: the mean or sum of all elements, or
// the losses themselves.
func reduce(loss *tensor.Tensor, r Reduction) *tensor.Tensor {
	switch r {
	case ReduceSum:
		return tensor.Sum(loss)
	case ReduceNone:
		return loss
	}
	return tensor.Mean(loss)
}

// MarginRankingLoss returns
// torch.nn.functional.margin_ranking_loss(x1, x2, y, margin, reduction):
// max(0, -y·(x1 - x2) + margin) elementwise, where y is 1 where x1 should
// rank higher and -1 where x2 should, then reduced. x1, x2 and y have one
// shape. It panics on operands of different shapes or dtypes.
func MarginRankingLoss(x1, x2, y *tensor.Tensor, margin float64, r Reduction) *tensor.Tensor {
	const op = "nn.MarginRankingLoss"
	desc := checkLossOperands(op, r, []string{"x1", "x2", "y"}, x1, x2, y)
	if !slices.Equal(x1.Shape(), x2.Shape()) || !slices.Equal(x1.Shape(), y.Shape()) {
		panic(fmt.Sprintf("%s: %s: want one shape", op, desc))
	}
	z := tensor.Add(tensor.Neg(tensor.Mul(y, tensor.Sub(x1, x2))), constLike(x1, margin))
	return reduce(tensor.Relu(z), r)
}

// PairwiseDistance returns torch.nn.functional.pairwise_distance(x1, x2,
// p, eps): the p-norm of x1 - x2 + eps over the last axis (so [..., D]
// pairs give [...]), for p > 0 or math.Inf(1). x1 and x2 broadcast
// against each other. It panics on p <= 0 or NaN, or on operands whose
// dtypes differ or whose shapes do not broadcast.
func PairwiseDistance(x1, x2 *tensor.Tensor, p, eps float64) *tensor.Tensor {
	const op = "nn.PairwiseDistance"
	desc := checkLossOperands(op, ReduceMean, []string{"x1", "x2"}, x1, x2)
	if x1.Rank() == 0 && x2.Rank() == 0 {
		panic(fmt.Sprintf("%s: %s: want vectors (a last axis)", op, desc))
	}
	checkBroadcast(op, x1, x2)
	if !(p > 0) {
		panic(fmt.Sprintf("%s: %s: p %v must be > 0", op, desc, p))
	}
	return pNorm(tensor.Add(tensor.Sub(x1, x2), constLike(x1, eps)), p)
}

// pNorm is the p-norm over the last axis, differentiable.
func pNorm(d *tensor.Tensor, p float64) *tensor.Tensor {
	switch {
	case p == 2:
		return tensor.Sqrt(tensor.Sum(tensor.Square(d), -1))
	case p == 1:
		return tensor.Sum(tensor.Abs(d), -1)
	case math.IsInf(p, 1):
		return tensor.Max(tensor.Abs(d), -1)
	}
	return tensor.Pow(tensor.Sum(tensor.Pow(tensor.Abs(d), constLike(d, p)), -1), constLike(d, 1/p))
}

// TripletMarginOptions are the options of TripletMarginLoss, PyTorch's
// keyword arguments of torch.nn.functional.triplet_margin_loss but the
// margin. The zero value is PyTorch's default: p 2, eps 1e-6, no swap,
// the mean.
type TripletMarginOptions struct {
	// P is p, of the distance's p-norm; 0 means 2.
	P float64
	// Eps is eps, added to the differences (see PairwiseDistance); 0
	// means 1e-6.
	Eps float64
	// Swap is swap: the negative's distance is the smaller of its
	// distances to the anchor and to the positive.
	Swap bool
	// Reduction is reduction.
	Reduction Reduction
}

// TripletMarginLoss returns
// torch.nn.functional.triplet_margin_loss(anchor, positive, negative,
// margin, p, eps, swap, reduction): with d the PairwiseDistance,
// max(d(a, pos) - d(a, neg) + margin, 0) per triplet (the operands are
// [..., D]: one loss per row), then reduced. The three operands have one
// shape and dtype; it panics otherwise, or on P < 0.
func TripletMarginLoss(anchor, positive, negative *tensor.Tensor, margin float64, opts TripletMarginOptions) *tensor.Tensor {
	const op = "nn.TripletMarginLoss"
	desc := checkLossOperands(op, opts.Reduction, []string{"anchor", "positive", "negative"}, anchor, positive, negative)
	if anchor.Rank() == 0 || !slices.Equal(anchor.Shape(), positive.Shape()) || !slices.Equal(anchor.Shape(), negative.Shape()) {
		panic(fmt.Sprintf("%s: %s: want one shape [..., D]", op, desc))
	}
	p, eps := opts.P, opts.Eps
	if !(p >= 0) {
		panic(fmt.Sprintf("%s: %s: P %v must be > 0 (0 means 2)", op, desc, p))
	}
	if p == 0 {
		p = 2
	}
	if eps == 0 {
		eps = 1e-6
	}
	dPos := PairwiseDistance(anchor, positive, p, eps)
	dNeg := PairwiseDistance(anchor, negative, p, eps)
	if opts.Swap {
		dNeg = tensor.Minimum(dNeg, PairwiseDistance(positive, negative, p, eps))
	}
	return reduce(tensor.Relu(tensor.Add(tensor.Sub(dPos, dNeg), constLike(dPos, margin))), opts.Reduction)
}

// PoissonNLLOptions are the options of PoissonNLLLoss, PyTorch's keyword
// arguments of torch.nn.functional.poisson_nll_loss. The zero value is
// PyTorch's default: log_input=True, full=False, eps 1e-8, the mean.
type PoissonNLLOptions struct {
	// Rate says the input is the rate λ itself (PyTorch's
	// log_input=False), not its logarithm.
	Rate bool
	// Full is full: add Stirling's approximation of log(target!),
	// t·log t - t + ½·log(2πt), where the target t exceeds 1.
	Full bool
	// Eps is eps, added to the rate inside the logarithm when Rate is set;
	// 0 means 1e-8.
	Eps float64
	// Reduction is reduction.
	Reduction Reduction
}

// PoissonNLLLoss returns torch.nn.functional.poisson_nll_loss(input,
// target, log_input, full, eps, reduction), the negative log-likelihood of
// counts target under a Poisson distribution of rate λ, up to log(t!):
// exp(input) - target·input for a log-rate input (the default), or
// input - target·log(input + Eps) with Rate; then reduced. input and
// target have one shape and dtype.
func PoissonNLLLoss(input, target *tensor.Tensor, opts PoissonNLLOptions) *tensor.Tensor {
	const op = "nn.PoissonNLLLoss"
	desc := checkLossOperands(op, opts.Reduction, []string{"input", "target"}, input, target)
	if !slices.Equal(input.Shape(), target.Shape()) {
		panic(fmt.Sprintf("%s: %s: want one shape", op, desc))
	}
	if !(opts.Eps >= 0) {
		panic(fmt.Sprintf("%s: %s: Eps %v must be >= 0 (0 means 1e-8)", op, desc, opts.Eps))
	}
	var loss *tensor.Tensor
	if opts.Rate {
		eps := opts.Eps
		if eps == 0 {
			eps = 1e-8
		}
		loss = tensor.Sub(input, tensor.Mul(target, tensor.Log(tensor.Add(input, constLike(input, eps)))))
	} else {
		loss = tensor.Sub(tensor.Exp(input), tensor.Mul(target, input))
	}
	if opts.Full {
		// Stirling's term where t > 1, from t clamped to 1 elsewhere, so
		// that its (unused) value and gradient stay finite at t = 0.
		big := tensor.Greater(target, scalarLike(target, 1))
		t := tensor.Where(big, target, scalarLike(target, 1))
		st := tensor.Add(tensor.Sub(tensor.Mul(t, tensor.Log(t)), t),
			tensor.Mul(constLike(t, 0.5), tensor.Log(tensor.Mul(constLike(t, 2*math.Pi), t))))
		loss = tensor.Add(loss, tensor.Where(big, st, scalarLike(st, 0)))
	}
	return reduce(loss, opts.Reduction)
}

// GaussianNLLOptions are the options of GaussianNLLLoss, PyTorch's keyword
// arguments of torch.nn.functional.gaussian_nll_loss. The zero value is
// PyTorch's default: full=False, eps 1e-6, the mean.
type GaussianNLLOptions struct {
	// Full is full: add the constant ½·log(2π).
	Full bool
	// Eps is eps, the smallest variance used: smaller ones are clamped to
	// it, with the gradient passing as if they were not (PyTorch clamps
	// outside autograd); 0 means 1e-6.
	Eps float64
	// Reduction is reduction.
	Reduction Reduction
}

// GaussianNLLLoss returns torch.nn.functional.gaussian_nll_loss(input,
// target, var, full, eps, reduction): the negative log-likelihood of
// target under a normal distribution of mean input and variance variance,
//
//	½·(log(max(var, eps)) + (input - target)²/max(var, eps))
//
// per element, then reduced. input and target have one shape [..., D];
// variance has that shape, or [..., 1] (one variance for all D), or
// [...] (the same, without the axis), as PyTorch allows. Variances must
// not be negative (PyTorch raises; gonox does not read the data, and
// clamps them to Eps). It panics on other shapes or mixed dtypes.
func GaussianNLLLoss(input, target, variance *tensor.Tensor, opts GaussianNLLOptions) *tensor.Tensor {
	const op = "nn.GaussianNLLLoss"
	desc := checkLossOperands(op, opts.Reduction, []string{"input", "target", "var"}, input, target, variance)
	is, vs := input.Shape(), variance.Shape()
	if !slices.Equal(is, target.Shape()) {
		panic(fmt.Sprintf("%s: %s: input and target must have one shape", op, desc))
	}
	switch {
	case slices.Equal(is, vs):
	case len(is) > 0 && slices.Equal(is[:len(is)-1], vs):
		variance = tensor.ExpandDims(variance, -1)
	case len(is) > 0 && len(vs) == len(is) && slices.Equal(is[:len(is)-1], vs[:len(vs)-1]) && vs[len(vs)-1] == 1:
	default:
		panic(fmt.Sprintf("%s: %s: var must have input's shape, or it with a last axis of 1, or without its last axis", op, desc))
	}
	eps := opts.Eps
	if !(eps >= 0) {
		panic(fmt.Sprintf("%s: %s: Eps %v must be >= 0 (0 means 1e-6)", op, desc, eps))
	}
	if eps == 0 {
		eps = 1e-6
	}
	// max(var, eps) in value, the gradient of var: sg(max) + (var - sg(var)),
	// where var - sg(var) is exactly 0.
	sv := tensor.StopGradient(variance)
	v := tensor.Add(tensor.Maximum(sv, constLike(sv, eps)), tensor.Sub(variance, sv))
	loss := tensor.Mul(constLike(v, 0.5), tensor.Add(tensor.Log(v), tensor.Div(tensor.Square(tensor.Sub(input, target)), v)))
	if opts.Full {
		loss = tensor.Add(loss, constLike(loss, 0.5*math.Log(2*math.Pi)))
	}
	return reduce(loss, opts.Reduction)
}

// MultiMarginOptions are the options of MultiMarginLoss, PyTorch's keyword
// arguments of torch.nn.functional.multi_margin_loss but the margin. The
// zero value is PyTorch's default: p 1, no weights, the mean.
type MultiMarginOptions struct {
	// P is p, 1 or 2; 0 means 1.
	P int
	// Weights is weight: one per class, of x's dtype; nil means ones.
	Weights *tensor.Tensor
	// Reduction is reduction.
	Reduction Reduction
}

// MultiMarginLoss returns torch.nn.functional.multi_margin_loss(x, labels,
// p, margin, weight, reduction), the multi-class hinge loss: for scores x
// [N, C] (or [C]) and int32 labels y [N] (or []), per row
//
//	loss = Σ_{i≠y} w[y]·max(0, margin - x[y] + x[i])^p / C
//
// then reduced over the rows (the mean is not divided by the weights). It
// panics on labels of the wrong dtype or shape or outside [0, C), on P
// other than 0, 1 or 2, or on Weights of the wrong dtype or length.
func MultiMarginLoss(x, labels *tensor.Tensor, margin float64, opts MultiMarginOptions) *tensor.Tensor {
	const op = "nn.MultiMarginLoss"
	desc := checkLossOperands(op, opts.Reduction, []string{"x"}, x)
	if labels == nil {
		panic(op + ": nil labels")
	}
	desc += fmt.Sprintf(", labels %v", labels)
	if x.Rank() < 1 || x.Rank() > 2 || labels.DType() != tensor.Int32 || !slices.Equal(labels.Shape(), x.Shape()[:x.Rank()-1]) {
		panic(fmt.Sprintf("%s: %s: want x [N, C] or [C] and int32 labels [N] or []", op, desc))
	}
	c := x.Dim(-1)
	checkClassWeights(op, desc, opts.Weights, x.DType(), c)
	for i, l := range labels.Int32s() {
		if l < 0 || int(l) >= c {
			panic(fmt.Sprintf("%s: %s: label %d at %s out of range [0,%d)", op, desc, l, flatIndex(labels.Shape(), i), c))
		}
	}
	p := opts.P
	if p == 0 {
		p = 1
	}
	if p != 1 && p != 2 {
		panic(fmt.Sprintf("%s: %s: P %d must be 1 or 2", op, desc, opts.P))
	}
	y := tensor.ExpandDims(labels, -1)
	xy := tensor.TakeAlongAxis(x, y, -1)
	m := tensor.Relu(tensor.Add(tensor.Sub(x, xy), constLike(x, margin)))
	if p == 2 {
		m = tensor.Square(m)
	}
	target := tensor.Equal(tensor.Arange(c), y)
	m = tensor.Where(target, scalarLike(m, 0), m)
	if opts.Weights != nil {
		m = tensor.Mul(m, tensor.ExpandDims(tensor.Take(opts.Weights, labels, 0), -1))
	}
	loss := tensor.Div(tensor.Sum(m, -1), constLike(m, float64(c)))
	return reduce(loss, opts.Reduction)
}
