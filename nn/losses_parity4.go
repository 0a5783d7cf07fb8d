package nn

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// More losses of torch.nn.functional, as those of losses_torch.go: PyTorch's
// arguments, a Reduction (ReduceMean, the zero value, the mean over all
// elements), float32 or float64 operands of one dtype, differentiable
// compositions of tensor ops, panics naming the loss and its operands in
// type notation.

// HingeEmbeddingLoss returns
// torch.nn.functional.hinge_embedding_loss(x, y, margin, reduction): per
// element x where y is 1 and max(0, margin - x) where y is -1 (PyTorch's
// formula: the first term where y ≠ -1, the second where y ≠ 1, summed),
// then reduced. x and y have one shape and dtype; x is typically a
// distance. PyTorch's default margin is 1. It panics on operands of
// different shapes or dtypes.
func HingeEmbeddingLoss(x, y *tensor.Tensor, margin float64, r Reduction) *tensor.Tensor {
	const op = "nn.HingeEmbeddingLoss"
	desc := checkLossOperands(op, r, []string{"x", "y"}, x, y)
	if !slices.Equal(x.Shape(), y.Shape()) {
		panic(fmt.Sprintf("%s: %s: want one shape", op, desc))
	}
	zero := scalarLike(x, 0)
	hinge := tensor.Relu(tensor.Sub(constLike(x, margin), x))
	neg := tensor.Where(tensor.NotEqual(y, scalarLike(y, 1)), hinge, zero)
	pos := tensor.Where(tensor.NotEqual(y, scalarLike(y, -1)), x, zero)
	return reduce(tensor.Add(neg, pos), r)
}

// CosineEmbeddingLoss returns torch.nn.functional.cosine_embedding_loss(x1,
// x2, y, margin, reduction): for rows x1, x2 [N, D] (or vectors [D]) and
// y [N] (or []) of 1 or -1, with cos = x1·x2 / √((|x1|² + 1e-12)(|x2|² +
// 1e-12)) per row, 1 - cos where y is 1 and max(0, cos - margin) where y
// is -1 (0 elsewhere), then reduced over the rows. PyTorch's default
// margin is 0. It panics on operands of other ranks, shapes or dtypes.
func CosineEmbeddingLoss(x1, x2, y *tensor.Tensor, margin float64, r Reduction) *tensor.Tensor {
	const op = "nn.CosineEmbeddingLoss"
	desc := checkLossOperands(op, r, []string{"x1", "x2", "y"}, x1, x2, y)
	if x1.Rank() < 1 || x1.Rank() > 2 || !slices.Equal(x1.Shape(), x2.Shape()) || !slices.Equal(y.Shape(), x1.Shape()[:x1.Rank()-1]) {
		panic(fmt.Sprintf("%s: %s: want x1, x2 [N, D] and y [N], or x1, x2 [D] and y []", op, desc))
	}
	const eps = 1e-12 // PyTorch's EPSILON
	prod := tensor.Sum(tensor.Mul(x1, x2), -1)
	m1 := tensor.Add(tensor.Sum(tensor.Mul(x1, x1), -1), constLike(x1, eps))
	m2 := tensor.Add(tensor.Sum(tensor.Mul(x2, x2), -1), constLike(x1, eps))
	cos := tensor.Div(prod, tensor.Sqrt(tensor.Mul(m1, m2)))
	zero := scalarLike(cos, 0)
	pos := tensor.Where(tensor.Equal(y, scalarLike(y, 1)), tensor.Sub(scalarLike(cos, 1), cos), zero)
	neg := tensor.Where(tensor.Equal(y, scalarLike(y, -1)), tensor.Relu(tensor.Sub(cos, constLike(cos, margin))), zero)
	return reduce(tensor.Add(pos, neg), r)
}

// SoftMarginLoss returns torch.nn.functional.soft_margin_loss(x, y,
// reduction): log(1 + exp(-y·x)) per element (computed as a stable
// softplus), then reduced. x and y (of 1 or -1) have one shape and dtype.
// It panics on operands of different shapes or dtypes.
func SoftMarginLoss(x, y *tensor.Tensor, r Reduction) *tensor.Tensor {
	const op = "nn.SoftMarginLoss"
	desc := checkLossOperands(op, r, []string{"x", "y"}, x, y)
	if !slices.Equal(x.Shape(), y.Shape()) {
		panic(fmt.Sprintf("%s: %s: want one shape", op, desc))
	}
	return reduce(tensor.Softplus(tensor.Neg(tensor.Mul(y, x))), r)
}

// MultiLabelMarginLoss returns
// torch.nn.functional.multilabel_margin_loss(x, labels, reduction), the
// multi-class multi-label hinge loss: for scores x [N, C] (or [C]) and
// int32 labels of x's shape, each row of labels lists a sample's target
// classes up to its first -1 (or its end), and
//
//	loss = Σ_{j target} Σ_{i not target} max(0, 1 - (x[j] - x[i])) / C
//
// per row (a class listed twice counts twice, as in PyTorch), then reduced
// over the rows. The labels are read on the host. It panics on labels of
// the wrong dtype or shape or outside [-1, C).
func MultiLabelMarginLoss(x, labels *tensor.Tensor, r Reduction) *tensor.Tensor {
	const op = "nn.MultiLabelMarginLoss"
	desc := checkLossOperands(op, r, []string{"x"}, x)
	if labels == nil {
		panic(op + ": nil labels")
	}
	desc += fmt.Sprintf(", labels %v", labels)
	if x.Rank() < 1 || x.Rank() > 2 || labels.DType() != tensor.Int32 || !slices.Equal(labels.Shape(), x.Shape()) {
		panic(fmt.Sprintf("%s: %s: want x [N, C] or [C] and int32 labels of x's shape", op, desc))
	}
	c := x.Dim(-1)
	ls := labels.Int32s()
	for i, l := range ls {
		if l < -1 || int(l) >= c {
			panic(fmt.Sprintf("%s: %s: label %d at %s out of range [-1,%d)", op, desc, l, flatIndex(labels.Shape(), i), c))
		}
	}
	// w[n, j, i]: how many times row n lists target j, where i is not a
	// target of row n.
	n := len(ls) / max(1, c)
	w := make([]float64, n*c*c)
	count, target := make([]float64, c), make([]bool, c)
	for row := range n {
		clear(count)
		clear(target)
		for _, l := range ls[row*c : (row+1)*c] {
			if l < 0 {
				break
			}
			count[l]++
			target[l] = true
		}
		for j := range c {
			for i := range c {
				if !target[i] {
					w[(row*c+j)*c+i] = count[j]
				}
			}
		}
	}
	x2 := tensor.Reshape(x, n, c)
	pairs := tensor.Relu(tensor.Add(tensor.Sub(tensor.ExpandDims(x2, 1), tensor.ExpandDims(x2, 2)), scalarLike(x, 1)))
	weights := tensor.Convert(tensor.FromFloat64s(w, n, c, c), x.DType())
	loss := tensor.Div(tensor.Sum(tensor.Mul(pairs, weights), 1, 2), constLike(x, float64(c)))
	return reduce(tensor.Reshape(loss, x.Shape()[:x.Rank()-1]...), r)
}

// MultiLabelSoftMarginLossOptions are the options of
// MultiLabelSoftMarginLoss. The zero value is PyTorch's default.
type MultiLabelSoftMarginLossOptions struct {
	// Weights is weight: one per class, of x's dtype; nil means ones.
	Weights *tensor.Tensor
	// Reduction is reduction.
	Reduction Reduction
}

// MultiLabelSoftMarginLoss returns
// torch.nn.functional.multilabel_soft_margin_loss(x, y, weight,
// reduction): for scores x [..., C] and targets y of x's shape (1 for the
// sample's classes, 0 for the others; soft targets allowed)
//
//	loss = -Σ_c w[c]·(y·log σ(x) + (1-y)·log σ(-x)) / C
//
// per row, then reduced over the rows. It panics on operands of different
// shapes or dtypes or on Weights of the wrong dtype or length.
func MultiLabelSoftMarginLoss(x, y *tensor.Tensor, opts MultiLabelSoftMarginLossOptions) *tensor.Tensor {
	const op = "nn.MultiLabelSoftMarginLoss"
	desc := checkLossOperands(op, opts.Reduction, []string{"x", "y"}, x, y)
	if x.Rank() < 1 || !slices.Equal(x.Shape(), y.Shape()) {
		panic(fmt.Sprintf("%s: %s: want x [..., C] and y of its shape", op, desc))
	}
	c := x.Dim(-1)
	checkClassWeights(op, desc, opts.Weights, x.DType(), c)
	loss := tensor.Neg(tensor.Add(tensor.Mul(y, tensor.LogSigmoid(x)),
		tensor.Mul(tensor.Sub(scalarLike(y, 1), y), tensor.LogSigmoid(tensor.Neg(x)))))
	if opts.Weights != nil {
		loss = tensor.Mul(loss, opts.Weights)
	}
	return reduce(tensor.Div(tensor.Sum(loss, -1), constLike(x, float64(c))), opts.Reduction)
}

// BinaryCrossEntropy returns torch.nn.functional.binary_cross_entropy(p,
// targets, weight, reduction), BCELoss on probabilities p in [0, 1]: per
// element
//
//	loss = -weight·(t·max(log p, -100) + (1-t)·max(log(1-p), -100))
//
// (PyTorch clamps the logs at -100, so p of 0 or 1 give finite losses),
// then reduced. p and targets have one shape and dtype; opts.Weight
// broadcasts against it, and opts.PosWeight must be nil (PyTorch's BCELoss
// has none). The gradients are PyTorch's for p in (0, 1); at p of 0 or 1
// a clamped log contributes 0 and the other log its derivative, so that
// they stay finite (PyTorch's backward gives (p - t)/1e-12 there). Prefer BinaryCrossEntropyWithLogits on the
// logits, which is stable. p outside [0, 1] gives NaN (PyTorch raises an
// error). It panics on operands of different shapes or dtypes.
func BinaryCrossEntropy(p, targets *tensor.Tensor, opts BCEOptions) *tensor.Tensor {
	const op = "nn.BinaryCrossEntropy"
	names, ops := []string{"p", "targets"}, []*tensor.Tensor{p, targets}
	if opts.Weight != nil {
		names, ops = append(names, "weight"), append(ops, opts.Weight)
	}
	desc := checkLossOperands(op, opts.Reduction, names, ops...)
	if !slices.Equal(p.Shape(), targets.Shape()) {
		panic(fmt.Sprintf("%s: %s: want p and targets of one shape", op, desc))
	}
	if opts.Weight != nil && !broadcastsTo(opts.Weight.Shape(), p.Shape()) {
		panic(fmt.Sprintf("%s: %s: weight does not broadcast to p's shape", op, desc))
	}
	if opts.PosWeight != nil {
		panic(fmt.Sprintf("%s: %s: PosWeight %v: BCELoss has no pos_weight (use BinaryCrossEntropyWithLogits)", op, desc, opts.PosWeight))
	}
	one := scalarLike(p, 1)
	loss := tensor.Neg(tensor.Add(tensor.Mul(targets, clampedLog(p)),
		tensor.Mul(tensor.Sub(one, targets), clampedLog(tensor.Sub(one, p)))))
	if opts.Weight != nil {
		loss = tensor.Mul(loss, opts.Weight)
	}
	return reduce(loss, opts.Reduction)
}

// clampedLog is max(log q, -100) with a zero (not NaN) gradient at q = 0.
func clampedLog(q *tensor.Tensor) *tensor.Tensor {
	zero := tensor.Equal(q, scalarLike(q, 0))
	safe := tensor.Where(zero, scalarLike(q, 1), q)
	floor := scalarLike(q, -100)
	return tensor.Where(zero, floor, tensor.Maximum(tensor.Log(safe), floor))
}
