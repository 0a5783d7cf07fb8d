package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// CTCOptions are the optional parameters of CTCLoss.
type CTCOptions struct {
	// BlankID is the class of the blank symbol (default 0).
	BlankID int
	// LogEpsilon stands for log 0 in the forward recursion (default
	// -1e5, optax's), finite so that gradients stay finite.
	LogEpsilon float64
}

// CTCLoss returns the connectionist temporal classification loss of each
// sequence (Graves et al. 2006; optax.losses.ctc_loss, torch's ctc_loss
// with reduction "none"): -log of the probability, summed over all the
// alignments of the labels to the frames, with blanks and repeats, of the
// label sequence.
//
//	logits          f32[B, T, K]  unnormalized scores of K classes per frame
//	logitPaddings   f32[B, T]     1 for padding frames, 0 for real ones
//	labels          i32[B, N]     label ids, without blanks
//	labelPaddings   f32[B, N]     1 for padding labels, 0 for real ones
//
// The result is f32[B]. Float64 logits (and paddings) give f64[B], the
// recursion computed in float64. Paddings must come after the real frames and labels
// (a frame or label count per sequence, as torch's lengths). The forward
// recursion runs over the T frames in log space (tensor.LogSumExp) on
// [B, N+1] blank and [B, N] label scores, and autodiff differentiates it:
// the gradient with respect to the logits is that of the CTC paper (and
// torch's). A sequence that no alignment can produce (more labels, counting
// the blanks repeats need, than frames) gets a loss of about -LogEpsilon
// rather than +Inf.
func CTCLoss(logits, logitPaddings, labels, labelPaddings *tensor.Tensor, opts ...CTCOptions) *tensor.Tensor {
	const op = "nn.CTCLoss"
	var o CTCOptions
	switch len(opts) {
	case 0:
	case 1:
		o = opts[0]
	default:
		panic(fmt.Sprintf("%s: %d option structs, want at most 1", op, len(opts)))
	}
	logEps := o.LogEpsilon
	if logEps == 0 {
		logEps = -1e5
	}
	b, t, k, n := ctcShapes(op, logits, logitPaddings, labels, labelPaddings)
	if o.BlankID < 0 || o.BlankID >= k {
		panic(fmt.Sprintf("%s: BlankID %d outside [0, %d)", op, o.BlankID, k))
	}
	checkCTCLabels(op, labels, labelPaddings, k, o.BlankID)
	dt := logits.DType()

	logprobs := tensor.LogSoftmax(logits, -1)                                         // [B, T, K]
	phiLP := tensor.Squeeze(tensor.SliceAxis(logprobs, 2, o.BlankID, o.BlankID+1), 2) // [B, T]
	oneHot := tensor.AsType(tensor.OneHot(labels, k), dt)                             // [B, N, K]
	emitLP := tensor.MatMulT(logprobs, oneHot, false, true)                           // [B, T, N]

	// repeat[b, i] = 1 where labels[b, i] == labels[b, i+1] (0 for the last).
	repeat := tensor.Zeros(dt, b, n)
	if n > 1 {
		same := tensor.AsType(tensor.Equal(tensor.SliceAxis(labels, 1, 0, n-1), tensor.SliceAxis(labels, 1, 1, n)), dt)
		repeat = tensor.Pad(same, [][2]int{{0, 0}, {0, 1}}, 0)
	}
	// Added to a score where a transition is not allowed.
	eps, one := constLike(repeat, logEps), constLike(repeat, 1)
	noRepeat := tensor.Mul(repeat, eps)                             // emit → phi without a blank: not after a repeat
	noBlank := tensor.Mul(tensor.Add(tensor.Neg(repeat), one), eps) // emit → blank → phi: only after a repeat

	phi := tensor.Pad(tensor.Full(dt, logEps, b, n), [][2]int{{0, 0}, {1, 0}}, 0) // [B, N+1]: 0, eps, ...
	emit := tensor.Full(dt, logEps, b, n)                                         // [B, N]
	for step := range t {
		lpEmit := tensor.Squeeze(tensor.SliceAxis(emitLP, 1, step, step+1), 1) // [B, N]
		lpPhi := tensor.SliceAxis(phiLP, 1, step, step+1)                      // [B, 1]
		pad := tensor.SliceAxis(logitPaddings, 1, step, step+1)                // [B, 1]
		keep := tensor.Add(tensor.Neg(pad), one)                               // 1 - pad

		prevPhi := phi
		phi = addPhi(phi, tensor.Add(emit, noRepeat)) // epsilon transition emit → phi
		nextEmit := logAddExp(tensor.Add(tensor.SliceAxis(phi, 1, 0, n), lpEmit), tensor.Add(emit, lpEmit))
		nextPhi := addPhi(tensor.Add(phi, lpPhi), tensor.Add(tensor.Add(emit, lpPhi), noBlank))

		emit = tensor.Add(tensor.Mul(pad, emit), tensor.Mul(keep, nextEmit))
		phi = tensor.Add(tensor.Mul(pad, prevPhi), tensor.Mul(keep, nextPhi))
	}
	last := addPhi(phi, emit)
	// The score after each sequence's last label.
	lens := tensor.AsType(tensor.Add(tensor.Neg(tensor.Sum(labelPaddings, 1)), constLike(labelPaddings, float64(n))), tensor.Int32)
	return tensor.Neg(tensor.Sum(tensor.Mul(last, tensor.AsType(tensor.OneHot(lens, n+1), dt)), 1))
}

// checkCTCLabels panics if a real (unpadded) label is outside [0, k) or is
// the blank: tensor.OneHot would turn an id beyond the classes into zeros,
// a log-probability of 0 at every frame, and the loss would be a finite
// number that means nothing. Labels it cannot read on the host (placed, or
// one example's inside Vmap) are left unchecked.
func checkCTCLabels(op string, labels, labelPaddings *tensor.Tensor, k, blank int) {
	if labels.Layout() != nil || labels.InsideVmap() || labelPaddings.Layout() != nil || labelPaddings.InsideVmap() {
		return
	}
	n := labels.Dim(1)
	var pads []float64
	if labelPaddings.DType() == tensor.Float64 {
		pads = labelPaddings.RawFloat64()
	} else {
		pads = make([]float64, labelPaddings.Size())
		for i, p := range labelPaddings.RawFloat32() {
			pads[i] = float64(p)
		}
	}
	for i, id := range labels.RawInt32() {
		if pads[i] != 0 {
			continue
		}
		switch {
		case id < 0 || int(id) >= k:
			panic(fmt.Sprintf("%s: labels %v: label %d at [%d,%d] is outside [0, %d)", op, labels, id, i/n, i%n, k))
		case int(id) == blank:
			panic(fmt.Sprintf("%s: labels %v: label %d at [%d,%d] is the blank (BlankID %d); labels come without blanks", op, labels, id, i/n, i%n, blank))
		}
	}
}

// addPhi returns phi with phi[:, 1:] replaced by logaddexp(phi[:, 1:], s).
func addPhi(phi, s *tensor.Tensor) *tensor.Tensor {
	n := phi.Dim(1)
	return tensor.Concat(1, tensor.SliceAxis(phi, 1, 0, 1), logAddExp(tensor.SliceAxis(phi, 1, 1, n), s))
}

// logAddExp returns log(e^a + e^b) elementwise, stably.
func logAddExp(a, b *tensor.Tensor) *tensor.Tensor {
	return tensor.LogSumExp(tensor.Stack(0, a, b), 0)
}

// ctcShapes checks CTCLoss's operands and returns B, T, K and N.
func ctcShapes(op string, logits, logitPaddings, labels, labelPaddings *tensor.Tensor) (b, t, k, n int) {
	for _, x := range []*tensor.Tensor{logits, logitPaddings, labels, labelPaddings} {
		if x == nil {
			panic(op + ": nil operand")
		}
	}
	bad := func(why string) {
		panic(fmt.Sprintf("%s: logits %v, logitPaddings %v, labels %v, labelPaddings %v: %s", op, logits, logitPaddings, labels, labelPaddings, why))
	}
	switch {
	case logits.Rank() != 3 || (logits.DType() != tensor.Float32 && logits.DType() != tensor.Float64):
		bad("want logits f32[B, T, K] or f64[B, T, K]")
	case labels.Rank() != 2 || labels.DType() != tensor.Int32:
		bad("want labels i32[B, N]")
	case logitPaddings.DType() != logits.DType() || labelPaddings.DType() != logits.DType():
		bad("want paddings of logits' dtype (1 for padding)")
	}
	b, t, k = logits.Dim(0), logits.Dim(1), logits.Dim(2)
	n = labels.Dim(1)
	switch {
	case t == 0:
		bad("no frames")
	case labels.Dim(0) != b:
		bad("labels have another batch size")
	case logitPaddings.Rank() != 2 || logitPaddings.Dim(0) != b || logitPaddings.Dim(1) != t:
		bad("want logitPaddings f32[B, T]")
	case labelPaddings.Rank() != 2 || labelPaddings.Dim(0) != b || labelPaddings.Dim(1) != n:
		bad("want labelPaddings f32[B, N]")
	}
	return b, t, k, n
}
