package nn

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// Reduction says how a PyTorch-style loss (CrossEntropy,
// BinaryCrossEntropyWithLogits) reduces its per-example losses: PyTorch's
// reduction argument. The zero value is ReduceMean, PyTorch's default.
type Reduction int

const (
	// ReduceMean is reduction="mean": the weighted mean (see CrossEntropy
	// for the weights it divides by).
	ReduceMean Reduction = iota
	// ReduceSum is reduction="sum": the sum of the per-example losses.
	ReduceSum
	// ReduceNone is reduction="none": the per-example losses, unreduced.
	ReduceNone
)

// String returns PyTorch's name of r: "mean", "sum" or "none".
func (r Reduction) String() string {
	switch r {
	case ReduceMean:
		return "mean"
	case ReduceSum:
		return "sum"
	case ReduceNone:
		return "none"
	}
	return fmt.Sprintf("Reduction(%d)", int(r))
}

// TorchIgnoreIndex is PyTorch's default ignore_index, -100. PyTorch
// always ignores it; CrossEntropy ignores a label only when
// CrossEntropyOptions.Ignore is set, so that a stray -100 panics unless
// asked for: CrossEntropyOptions{Ignore: true, IgnoreIndex:
// nn.TorchIgnoreIndex} is PyTorch's default behaviour.
const TorchIgnoreIndex = -100

// CrossEntropyOptions are the options of CrossEntropy, PyTorch's keyword
// arguments of torch.nn.functional.cross_entropy. The zero value is a
// plain mean cross-entropy without ignored labels, weights or smoothing.
type CrossEntropyOptions struct {
	// Ignore turns IgnoreIndex on. Without it every label must be a class
	// in [0, C) (so class 0 is never ignored by accident).
	Ignore bool
	// IgnoreIndex is ignore_index: with Ignore set, labels equal to it
	// (any int32: TorchIgnoreIndex, or a class such as a padding token)
	// contribute zero loss and zero gradient and are left out of the mean.
	// A non-zero IgnoreIndex without Ignore panics rather than being
	// ignored.
	IgnoreIndex int32
	// Weights is weight: a rescaling weight per class, of logits' dtype and
	// shape [C]. nil means all ones.
	Weights *tensor.Tensor
	// LabelSmoothing is label_smoothing, in [0, 1]: the target becomes
	// (1-ε)·onehot(label) + ε/C (see CrossEntropy for how it meets
	// Weights).
	LabelSmoothing float64
	// Reduction is reduction; the zero value is ReduceMean.
	Reduction Reduction
}

// CrossEntropy returns the cross-entropy of softmax(logits) against integer
// class labels, or against class probabilities, as
// torch.nn.functional.cross_entropy(input, target, weight, ignore_index,
// reduction, label_smoothing) computes it, for a PyTorch user porting code.
// It differs from PyTorch in the class axis: logits are [..., C] with the
// class axis last (gonox's convention, as tensor.SoftmaxCrossEntropy), so
// PyTorch's [N, C, d1, ...] input is gonox's [N, d1, ..., C]. Logits are
// float32 or float64; Weights, if given, of the same dtype.
//
// labels are either int32 class indices of logits' shape without its last
// axis, or, as PyTorch's float target of the input's shape, probabilities
// of logits' dtype and shape (soft targets; see below).
//
// With class indices, l = log_softmax(logits), y_i the label of position
// i, w the weights (ones if nil), ε the smoothing and m_i 0 where y_i is
// ignored and 1 elsewhere, the loss of position i is
//
//	loss_i = m_i·((1-ε)·(-w[y_i]·l[i,y_i]) + (ε/C)·(-Σ_c w[c]·l[i,c]))
//
// ReduceNone returns loss_i (shape of labels); ReduceSum returns Σ_i loss_i;
// ReduceMean returns Σ_i loss_i / Σ_i m_i·w[y_i], so that the smoothing
// term, like the main term, is divided by the weights of the targets:
// PyTorch's formula, weights and all. When every label is ignored (or the
// target weights sum to 0), ReduceMean gives NaN (0/0) with a
// zero gradient, as PyTorch does; ReduceSum gives 0.
//
// With probabilities p (each row need not sum to 1: PyTorch does not ask
// it), the smoothed target is q = (1-ε)·p + ε/C and
//
//	loss_i = -Σ_c w[c]·q[i,c]·l[i,c]
//
// ReduceMean divides Σ_i loss_i by the number of positions (not by the
// weights: PyTorch's rule for probability targets). Ignore must be off, as
// PyTorch refuses ignore_index with them. The loss is differentiable in
// the probabilities too.
//
// It is composed of differentiable tensor ops (LogSoftmax, TakeAlongAxis,
// Where, Sum), so its gradient with respect to logits (and Weights) comes
// from autodiff; ignored positions get a zero gradient.
//
// It panics, naming nn.CrossEntropy and the operands (f32[4,10], i32[4]),
// if labels are neither int32 of the right shape nor probabilities of
// logits' dtype and shape, if Weights have the wrong dtype or length, if
// LabelSmoothing is outside [0, 1], if a label is outside [0, C) and is not
// the ignored index, or if Ignore is set with probabilities.
func CrossEntropy(logits, labels *tensor.Tensor, opts CrossEntropyOptions) *tensor.Tensor {
	const op = "nn.CrossEntropy"
	if logits == nil || labels == nil {
		panic(op + ": nil logits or labels")
	}
	desc := fmt.Sprintf("logits %v, labels %v", logits, labels)
	checkIgnoreFlag(op, desc, opts.Ignore, opts.IgnoreIndex)
	dt := logits.DType()
	if dt != tensor.Float32 && dt != tensor.Float64 {
		panic(fmt.Sprintf("%s: %s: logits must be float32 or float64", op, desc))
	}
	shape := logits.Shape()
	if len(shape) == 0 {
		panic(fmt.Sprintf("%s: %s: logits need a class axis (the last)", op, desc))
	}
	eps := opts.LabelSmoothing
	if !(eps >= 0 && eps <= 1) {
		panic(fmt.Sprintf("%s: %s: label smoothing %v outside [0, 1]", op, desc, eps))
	}
	if labels.DType().IsFloat() {
		if labels.DType() != dt || !slices.Equal(labels.Shape(), shape) {
			panic(fmt.Sprintf("%s: %s: probability targets must have logits' dtype and shape (class indices are int32 of shape %v)", op, desc, shape[:len(shape)-1]))
		}
		if opts.Ignore {
			panic(fmt.Sprintf("%s: %s: Ignore is not supported with probability targets (PyTorch refuses ignore_index with them)", op, desc))
		}
		checkClassWeights(op, desc, opts.Weights, dt, shape[len(shape)-1])
		checkReduction(op, desc, opts.Reduction)
		return softCrossEntropy(tensor.LogSoftmax(logits, -1), labels, opts.Weights, eps, opts.Reduction)
	}
	return nllLoss(op, desc, tensor.LogSoftmax(logits, -1), labels, opts)
}

// softCrossEntropy is CrossEntropy with probability targets p, from the
// log-probabilities lsm.
func softCrossEntropy(lsm, p, weights *tensor.Tensor, eps float64, r Reduction) *tensor.Tensor {
	dt, c := lsm.DType(), lsm.Dim(-1)
	q := p
	if eps > 0 {
		q = tensor.Add(tensor.Mul(p, tensor.Full(dt, 1-eps)), tensor.Full(dt, eps/float64(c)))
	}
	wl := tensor.Mul(lsm, q)
	if weights != nil {
		wl = tensor.Mul(wl, weights)
	}
	loss := tensor.Neg(tensor.Sum(wl, -1))
	switch r {
	case ReduceSum:
		return tensor.Sum(loss)
	case ReduceNone:
		return loss
	}
	return tensor.Mean(loss)
}

// NLLLossOptions are the options of NLLLoss, PyTorch's keyword arguments
// of torch.nn.functional.nll_loss; the fields mean what CrossEntropy's of
// the same names do. The zero value is the plain mean without ignored
// labels or weights.
type NLLLossOptions struct {
	// Ignore turns IgnoreIndex on (see CrossEntropyOptions).
	Ignore bool
	// IgnoreIndex is ignore_index, used with Ignore (non-zero without it
	// panics).
	IgnoreIndex int32
	// Weights is weight: one per class, of logProbs' dtype; nil means ones.
	Weights *tensor.Tensor
	// Reduction is reduction; the zero value is ReduceMean, the mean
	// weighted by the weights of the targets.
	Reduction Reduction
}

// NLLLoss returns the negative log-likelihood of int32 class labels under
// log-probabilities logProbs [..., C] (class axis last, as CrossEntropy),
// as torch.nn.functional.nll_loss(input, target, weight, ignore_index,
// reduction): loss_i = -m_i·w[y_i]·logProbs[i, y_i], reduced as
// CrossEntropy's (ReduceMean divides by Σ_i m_i·w[y_i]). CrossEntropy is
// NLLLoss of tensor.LogSoftmax(logits, -1). It is differentiable in
// logProbs and Weights, and panics as CrossEntropy does on bad operands.
func NLLLoss(logProbs, labels *tensor.Tensor, opts NLLLossOptions) *tensor.Tensor {
	const op = "nn.NLLLoss"
	if logProbs == nil || labels == nil {
		panic(op + ": nil log-probabilities or labels")
	}
	desc := fmt.Sprintf("log-probabilities %v, labels %v", logProbs, labels)
	checkIgnoreFlag(op, desc, opts.Ignore, opts.IgnoreIndex)
	if dt := logProbs.DType(); dt != tensor.Float32 && dt != tensor.Float64 {
		panic(fmt.Sprintf("%s: %s: log-probabilities must be float32 or float64", op, desc))
	}
	if logProbs.Rank() == 0 {
		panic(fmt.Sprintf("%s: %s: log-probabilities need a class axis (the last)", op, desc))
	}
	return nllLoss(op, desc, logProbs, labels, CrossEntropyOptions{Ignore: opts.Ignore, IgnoreIndex: opts.IgnoreIndex,
		Weights: opts.Weights, Reduction: opts.Reduction})
}

// checkIgnoreFlag panics when IgnoreIndex is set without Ignore, which
// would otherwise count that label as an ordinary class.
func checkIgnoreFlag(op, desc string, ignore bool, index int32) {
	if !ignore && index != 0 {
		panic(fmt.Sprintf("%s: %s: IgnoreIndex %d is set but Ignore is off: set Ignore to ignore label %d", op, desc, index, index))
	}
}

func checkClassWeights(op, desc string, w *tensor.Tensor, dt tensor.DType, c int) {
	if w != nil && (w.DType() != dt || !slices.Equal(w.Shape(), []int{c})) {
		panic(fmt.Sprintf("%s: %s: weights %v must be %v[%d], one per class", op, desc, w, dt, c))
	}
}

func checkReduction(op, desc string, r Reduction) {
	switch r {
	case ReduceMean, ReduceSum, ReduceNone:
	default:
		panic(fmt.Sprintf("%s: %s: unknown reduction %v", op, desc, r))
	}
}

// nllLoss is CrossEntropy with class indices from the log-probabilities
// lsm [..., C], for op; desc names the operands.
func nllLoss(op, desc string, lsm, labels *tensor.Tensor, opts CrossEntropyOptions) *tensor.Tensor {
	dt, shape := lsm.DType(), lsm.Shape()
	r := len(shape)
	c := shape[r-1]
	if labels.DType() != tensor.Int32 {
		panic(fmt.Sprintf("%s: %s: labels must be int32 class indices (convert int64 labels with tensor.AsType(labels, tensor.Int32))", op, desc))
	}
	if !slices.Equal(labels.Shape(), shape[:r-1]) {
		panic(fmt.Sprintf("%s: %s: labels must have shape %v (the input without the class axis, which is the last: PyTorch's [N,C,T] is gonox's [N,T,C])", op, desc, shape[:r-1]))
	}
	checkClassWeights(op, desc, opts.Weights, dt, c)
	eps := opts.LabelSmoothing
	checkReduction(op, desc, opts.Reduction)
	for i, l := range labels.Int32s() {
		if (l < 0 || int(l) >= c) && !(opts.Ignore && l == opts.IgnoreIndex) {
			what := "is not an ignored index (set Ignore and IgnoreIndex to ignore it)"
			if opts.Ignore {
				what = fmt.Sprintf("is not the ignore index %d", opts.IgnoreIndex)
			}
			panic(fmt.Sprintf("%s: %s: label %d at %s is outside [0,%d) and %s", op, desc, l, flatIndex(labels.Shape(), i), c, what))
		}
	}

	zero, one := tensor.Full(dt, 0), tensor.Full(dt, 1)
	var valid *tensor.Tensor // bool, nil when nothing can be ignored
	safe := labels
	if opts.Ignore {
		valid = tensor.NotEqual(labels, tensor.Full(tensor.Int32, float64(opts.IgnoreIndex)))
		safe = tensor.Where(valid, labels, tensor.Full(tensor.Int32, 0))
	}
	mask := func(x *tensor.Tensor) *tensor.Tensor {
		if valid == nil {
			return x
		}
		return tensor.Where(valid, x, zero)
	}

	picked := tensor.Squeeze(tensor.TakeAlongAxis(lsm, tensor.ExpandDims(safe, -1), -1), -1)
	var wy *tensor.Tensor // the weight of each target, 0 where ignored
	switch {
	case opts.Weights != nil:
		wy = mask(tensor.Take(opts.Weights, safe, 0))
	case valid != nil:
		wy = tensor.Where(valid, one, zero)
	default:
		wy = tensor.Full(dt, 1, labels.Shape()...)
	}
	loss := mask(tensor.Neg(picked))
	if opts.Weights != nil {
		loss = tensor.Mul(wy, loss)
	}
	if eps > 0 {
		wl := lsm
		if opts.Weights != nil {
			wl = tensor.Mul(lsm, opts.Weights)
		}
		smooth := mask(tensor.Neg(tensor.Sum(wl, -1)))
		loss = tensor.Add(tensor.Mul(loss, tensor.Full(dt, 1-eps)), tensor.Mul(smooth, tensor.Full(dt, eps/float64(c))))
	}
	switch opts.Reduction {
	case ReduceSum:
		return tensor.Sum(loss)
	case ReduceNone:
		return loss
	}
	return tensor.Div(tensor.Sum(loss), tensor.Sum(wy))
}

// BCEOptions are the options of BinaryCrossEntropyWithLogits, PyTorch's
// keyword arguments of
// torch.nn.functional.binary_cross_entropy_with_logits. The zero value is
// the plain mean over all elements.
type BCEOptions struct {
	// Weight is weight: a rescaling weight of each element, broadcast
	// against logits (NumPy's rules); nil means ones.
	Weight *tensor.Tensor
	// PosWeight is pos_weight: the weight of the positive term per class,
	// of shape [C] where C is logits' last axis (or anything that
	// broadcasts against logits); nil means ones.
	PosWeight *tensor.Tensor
	// Reduction is reduction; the zero value is ReduceMean, the plain mean
	// over all elements (Weight does not divide it).
	Reduction Reduction
}

// BinaryCrossEntropyWithLogits returns the binary cross-entropy of
// sigmoid(logits) against targets in [0, 1] (soft targets allowed), as
// torch.nn.functional.binary_cross_entropy_with_logits(input, target,
// weight, pos_weight, reduction) does: per element
//
//	loss = -weight·(pos_weight·t·log σ(x) + (1-t)·log σ(-x))
//
// with the log-sigmoids computed stably, then reduced by opts.Reduction
// (ReduceMean: the mean over all elements, as PyTorch, not divided by the
// weights). logits and targets have one shape, float32 or float64; Weight
// and PosWeight, of the same dtype, broadcast against it. It is
// differentiable in logits, targets and the weights. It panics, naming
// nn.BinaryCrossEntropyWithLogits and its operands, on mismatched dtypes
// or shapes.
func BinaryCrossEntropyWithLogits(logits, targets *tensor.Tensor, opts BCEOptions) *tensor.Tensor {
	const op = "nn.BinaryCrossEntropyWithLogits"
	if logits == nil || targets == nil {
		panic(op + ": nil logits or targets")
	}
	desc := fmt.Sprintf("logits %v, targets %v", logits, targets)
	dt := logits.DType()
	if dt != tensor.Float32 && dt != tensor.Float64 {
		panic(fmt.Sprintf("%s: %s: logits must be float32 or float64", op, desc))
	}
	if targets.DType() != dt || !slices.Equal(logits.Shape(), targets.Shape()) {
		panic(fmt.Sprintf("%s: %s: targets must have logits' dtype and shape", op, desc))
	}
	for _, w := range []struct {
		name string
		t    *tensor.Tensor
	}{{"weight", opts.Weight}, {"pos_weight", opts.PosWeight}} {
		if w.t == nil {
			continue
		}
		if w.t.DType() != dt || !broadcastsTo(w.t.Shape(), logits.Shape()) {
			panic(fmt.Sprintf("%s: %s: %s %v must be %v and broadcast to %v", op, desc, w.name, w.t, dt, logits.Shape()))
		}
	}
	switch opts.Reduction {
	case ReduceMean, ReduceSum, ReduceNone:
	default:
		panic(fmt.Sprintf("%s: %s: unknown reduction %v", op, desc, opts.Reduction))
	}
	pos := tensor.Mul(targets, tensor.LogSigmoid(logits))
	if opts.PosWeight != nil {
		pos = tensor.Mul(pos, opts.PosWeight)
	}
	neg := tensor.Mul(tensor.Sub(tensor.Full(dt, 1), targets), tensor.LogSigmoid(tensor.Neg(logits)))
	loss := tensor.Neg(tensor.Add(pos, neg))
	if opts.Weight != nil {
		loss = tensor.Mul(loss, opts.Weight)
	}
	switch opts.Reduction {
	case ReduceSum:
		return tensor.Sum(loss)
	case ReduceNone:
		return loss
	}
	return tensor.Mean(loss)
}

// broadcastsTo reports whether shape s broadcasts to shape to without
// changing it.
func broadcastsTo(s, to []int) bool {
	if len(s) > len(to) {
		return false
	}
	for i := 1; i <= len(s); i++ {
		if x := s[len(s)-i]; x != 1 && x != to[len(to)-i] {
			return false
		}
	}
	return true
}

// flatIndex renders the multi-index of flat element i of shape: "[2,0]".
func flatIndex(shape []int, i int) string {
	s := ""
	for k := len(shape) - 1; k >= 0; k-- {
		s = fmt.Sprintf(",%d", i%shape[k]) + s
		i /= shape[k]
	}
	if s == "" {
		return "[]"
	}
	return "[" + s[1:] + "]"
}
