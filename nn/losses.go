package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// The losses of optax.losses, under their names spelled the Go way. Like
// optax's they are not reduced: regression and classification losses
// return one value per element, losses over distributions or vectors one
// per row (their last axis summed), CTCLoss one per sequence. Take
// tensor.Mean of the result for the usual mean loss. They are ordinary
// differentiable tensor expressions, on float32 or float64 operands of
// one dtype (CTCLoss: float32), their constants in float64 for float64
// operands.
//
// tensor has the fused MSE (the mean of SquaredError) and the cross
// entropies: tensor.SoftmaxCrossEntropy (optax's
// softmax_cross_entropy_with_integer_labels), tensor.SoftmaxCrossEntropyProbs
// (softmax_cross_entropy) and tensor.SigmoidBinaryCrossEntropy.

// errorsOf returns predictions - targets (broadcast), or predictions when
// targets is nil, checking that predictions are float32 or float64 and
// targets of their dtype.
func errorsOf(op string, predictions, targets *tensor.Tensor) *tensor.Tensor {
	if predictions == nil {
		panic(op + ": nil predictions")
	}
	if dt := predictions.DType(); dt != tensor.Float32 && dt != tensor.Float64 {
		panic(fmt.Sprintf("%s: predictions %v, want float32 or float64", op, predictions))
	}
	if targets == nil {
		return predictions
	}
	if targets.DType() != predictions.DType() {
		panic(fmt.Sprintf("%s: predictions %v and targets %v differ in dtype", op, predictions, targets))
	}
	checkBroadcast(op, predictions, targets)
	return tensor.Sub(predictions, targets)
}

// checkBroadcast panics, naming the loss op, unless the shapes of a and b
// broadcast (NumPy's rules), so that a mismatch names the loss rather
// than the tensor op inside it.
func checkBroadcast(op string, a, b *tensor.Tensor) {
	as, bs := a.Shape(), b.Shape()
	for i := 1; i <= min(len(as), len(bs)); i++ {
		if x, y := as[len(as)-i], bs[len(bs)-i]; x != y && x != 1 && y != 1 {
			panic(fmt.Sprintf("%s: %v and %v: shapes do not broadcast (dim -%d: %d vs %d)", op, a, b, i, x, y))
		}
	}
}

// sameShape panics unless a and b have one shape.
func sameShape(op string, a, b *tensor.Tensor) {
	if b != nil && !slices.Equal(a.Shape(), b.Shape()) {
		panic(fmt.Sprintf("%s: predictions %v and targets %v differ in shape (no broadcasting: a [N] against [N,1] would silently give [N,N])", op, a, b))
	}
}

// SquaredError returns (predictions - targets)² elementwise
// (optax.losses.squared_error); a nil targets means zeros. As in optax,
// predictions and targets must have one shape: no broadcasting. Its mean
// is tensor.MSE, fused.
func SquaredError(predictions, targets *tensor.Tensor) *tensor.Tensor {
	const op = "nn.SquaredError"
	if predictions != nil {
		sameShape(op, predictions, targets)
	}
	return tensor.Square(errorsOf(op, predictions, targets))
}

// L2Loss returns ½(predictions - targets)² elementwise
// (optax.losses.l2_loss): half SquaredError, whose gradient is the error.
// Shapes must agree, as for SquaredError.
func L2Loss(predictions, targets *tensor.Tensor) *tensor.Tensor {
	const op = "nn.L2Loss"
	if predictions != nil {
		sameShape(op, predictions, targets)
	}
	e := errorsOf(op, predictions, targets)
	return tensor.Mul(tensor.Square(e), constLike(e, 0.5))
}

// HuberLoss returns the Huber loss of the errors e = predictions - targets
// elementwise (optax.losses.huber_loss, torch's huber_loss):
//
//	½e²                 |e| <= delta
//	delta·(|e| - ½delta)  |e| > delta
//
// quadratic near 0 and linear beyond delta, so outliers pull with a
// bounded gradient. Targets broadcast against predictions; nil means
// zeros. It panics unless delta > 0. PyTorch's smooth_l1_loss with beta is
// HuberLoss with delta = beta, divided by beta.
func HuberLoss(predictions, targets *tensor.Tensor, delta float64) *tensor.Tensor {
	const op = "nn.HuberLoss"
	if !(delta > 0) {
		panic(fmt.Sprintf("%s: delta %v, want > 0", op, delta))
	}
	abs := tensor.Abs(errorsOf(op, predictions, targets))
	quad := tensor.Minimum(abs, constLike(abs, delta))
	// |e| - min(|e|, delta) is max(|e| - delta, 0) without splitting the
	// gradient at |e| = delta.
	lin := tensor.Sub(abs, quad)
	return tensor.Add(tensor.Mul(tensor.Square(quad), constLike(quad, 0.5)), tensor.Mul(lin, constLike(lin, delta)))
}

// LogCosh returns log(cosh(e)) of the errors e = predictions - targets
// elementwise (optax.losses.log_cosh): about ½e² for small errors and
// |e| - log 2 for large ones. It is computed as |e| + softplus(-2|e|) -
// log 2, which cannot overflow. Targets broadcast; nil means zeros.
func LogCosh(predictions, targets *tensor.Tensor) *tensor.Tensor {
	abs := tensor.Abs(errorsOf("nn.LogCosh", predictions, targets))
	return tensor.Add(tensor.Add(abs, tensor.Softplus(tensor.Mul(abs, constLike(abs, -2)))), constLike(abs, -math.Ln2))
}

// KLDivergence returns the Kullback–Leibler divergence KL(targets ‖
// predictions) of each row (optax.losses.kl_divergence, torch's kl_div
// summed over the last axis):
//
//	Σ targets·(log targets - logPredictions)
//
// over the last axis, with 0·log 0 = 0. logPredictions are
// log-probabilities (tensor.LogSoftmax of logits), targets probabilities;
// they broadcast. The result has the shape of the broadcast operands
// without their last axis. A zero target has a zero gradient.
func KLDivergence(logPredictions, targets *tensor.Tensor) *tensor.Tensor {
	const op = "nn.KLDivergence"
	checkFloat(op, logPredictions, targets)
	zero := tensor.Equal(targets, scalarLike(targets, 0))
	// log of 1 where a target is 0: its term is 0·(0 - logp) and the
	// gradient of the log stays finite (jnp.where(t == 0, 0, log t) would
	// give NaN gradients there).
	logT := tensor.Log(tensor.Where(zero, scalarLike(targets, 1), targets))
	return tensor.Sum(tensor.Mul(targets, tensor.Sub(logT, logPredictions)), -1)
}

// KLDivergenceWithLogTargets is KLDivergence with the targets given as
// log-probabilities (optax.losses.kl_divergence_with_log_targets, torch's
// kl_div with log_target=True): Σ exp(logTargets)·(logTargets -
// logPredictions) over the last axis.
func KLDivergenceWithLogTargets(logPredictions, logTargets *tensor.Tensor) *tensor.Tensor {
	checkFloat("nn.KLDivergenceWithLogTargets", logPredictions, logTargets)
	return tensor.Sum(tensor.Mul(tensor.Exp(logTargets), tensor.Sub(logTargets, logPredictions)), -1)
}

// CosineSimilarity returns the cosine of the angle between predictions
// and targets along the last axis (optax.losses.cosine_similarity):
// ⟨a/‖a‖, b/‖b‖⟩, each squared norm bounded below by eps (0 gives NaN for
// a zero vector, as in optax; 1e-12 is safe). They broadcast; the result
// has their shape without the last axis.
func CosineSimilarity(predictions, targets *tensor.Tensor, eps float64) *tensor.Tensor {
	const op = "nn.CosineSimilarity"
	checkFloat(op, predictions, targets)
	if !(eps >= 0) {
		panic(fmt.Sprintf("%s: eps %v is negative", op, eps))
	}
	unit := func(x *tensor.Tensor) *tensor.Tensor {
		n2 := tensor.SumKeep(tensor.Square(x), -1)
		if eps > 0 {
			n2 = tensor.Maximum(n2, constLike(n2, eps))
		}
		return tensor.Div(x, tensor.Sqrt(n2))
	}
	return tensor.Sum(tensor.Mul(unit(predictions), unit(targets)), -1)
}

// CosineDistance returns 1 - CosineSimilarity(predictions, targets, eps)
// (optax.losses.cosine_distance).
func CosineDistance(predictions, targets *tensor.Tensor, eps float64) *tensor.Tensor {
	return tensor.AddScalar(tensor.Neg(CosineSimilarity(predictions, targets, eps)), 1)
}

// HingeLoss returns max(0, 1 - outputs·targets) elementwise for targets in
// {-1, +1} (optax.losses.hinge_loss), the loss of a linear SVM. They
// broadcast.
func HingeLoss(outputs, targets *tensor.Tensor) *tensor.Tensor {
	checkFloat("nn.HingeLoss", outputs, targets)
	return tensor.Relu(tensor.AddScalar(tensor.Neg(tensor.Mul(outputs, targets)), 1))
}

// SigmoidFocalLoss returns the focal loss of Lin et al. (2017)
// elementwise (optax.losses.sigmoid_focal_loss, torchvision's
// sigmoid_focal_loss): the sigmoid binary cross-entropy weighted by
// (1 - p_t)^gamma, with p_t the predicted probability of the true label,
// so easy examples count less (gamma 2 is usual; 0 gives the
// cross-entropy). With alpha, positives are weighted by alpha and
// negatives by 1-alpha. labels are in [0, 1] and have the shape of logits.
// log(1 - p_t) is computed in log space, so large logits do not lose the
// weight to rounding.
func SigmoidFocalLoss(logits, labels *tensor.Tensor, gamma float64, alpha ...float64) *tensor.Tensor {
	const op = "nn.SigmoidFocalLoss"
	checkFloat(op, logits, labels)
	if !(gamma >= 0) {
		panic(fmt.Sprintf("%s: gamma %v is negative", op, gamma))
	}
	if len(alpha) > 1 {
		panic(fmt.Sprintf("%s: %d alphas, want at most 1", op, len(alpha)))
	}
	if !slices.Equal(logits.Shape(), labels.Shape()) {
		panic(fmt.Sprintf("%s: logits %v and labels %v differ in shape", op, logits, labels))
	}
	// -y·log σ(x) - (1-y)·log σ(-x): unlike softplus(x) - y·x, it keeps
	// the cross-entropy of a confident right prediction (x = 20, y = 1).
	ce := tensor.Neg(tensor.Add(tensor.Mul(labels, tensor.LogSigmoid(logits)),
		tensor.Mul(tensor.AddScalar(tensor.Neg(labels), 1), tensor.LogSigmoid(tensor.Neg(logits)))))
	loss := ce
	if gamma != 0 {
		// With y' the larger of y and 1-y and x' = -x (y >= ½) or x:
		// log(1-p_t) = log σ(x') + log y' + softplus(-x' + log(1-y') - log y').
		pos := tensor.GreaterEqual(labels, scalarLike(labels, 0.5))
		flip := tensor.AddScalar(tensor.Neg(labels), 1)
		yp := tensor.Where(pos, labels, flip)
		xp := tensor.Where(pos, tensor.Neg(logits), logits)
		logYp := tensor.Log(yp)
		log1mYp := tensor.Log(tensor.AddScalar(tensor.Neg(yp), 1)) // exact: 1-y' for y' >= ½
		log1mpt := tensor.Add(tensor.Add(tensor.LogSigmoid(xp), logYp),
			tensor.Softplus(tensor.Sub(tensor.Sub(log1mYp, xp), logYp)))
		loss = tensor.Mul(ce, tensor.Exp(tensor.Mul(log1mpt, constLike(log1mpt, gamma))))
	}
	if len(alpha) == 1 {
		// a·y + (1-a)·(1-y), its constants in float32 arithmetic for
		// float32 labels (as always) and in float64 for float64 ones.
		a := alpha[0]
		slope, at0 := tensor.Scalar(2*float32(a)-1), tensor.Scalar(1-float32(a))
		if labels.DType() == tensor.Float64 {
			slope, at0 = tensor.ScalarFloat64(2*a-1), tensor.ScalarFloat64(1-a)
		}
		w := tensor.Add(tensor.Mul(labels, slope), at0)
		loss = tensor.Mul(w, loss)
	}
	return loss
}

// SmoothLabels returns (1-alpha)·labels + alpha/K, with K the size of the
// last axis (optax.losses.smooth_labels): label smoothing of one-hot (or
// soft) labels, for tensor.SoftmaxCrossEntropyProbs. It panics unless
// 0 <= alpha <= 1.
func SmoothLabels(labels *tensor.Tensor, alpha float64) *tensor.Tensor {
	const op = "nn.SmoothLabels"
	checkFloat(op, labels, labels)
	if !(alpha >= 0 && alpha <= 1) {
		panic(fmt.Sprintf("%s: alpha %v outside [0, 1]", op, alpha))
	}
	if labels.Rank() == 0 {
		panic(fmt.Sprintf("%s: labels %v have no class axis", op, labels))
	}
	k := float64(labels.Dim(labels.Rank() - 1))
	return tensor.Add(tensor.Mul(labels, constLike(labels, 1-alpha)), constLike(labels, alpha/k))
}

func checkFloat(op string, a, b *tensor.Tensor) {
	if a == nil || b == nil {
		panic(op + ": nil operand")
	}
	for _, x := range []*tensor.Tensor{a, b} {
		if x.DType() != a.DType() || (x.DType() != tensor.Float32 && x.DType() != tensor.Float64) {
			panic(fmt.Sprintf("%s: %v and %v: want float32 or float64 operands of one dtype", op, a, b))
		}
	}
	checkBroadcast(op, a, b)
}
