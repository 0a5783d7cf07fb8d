package nn_test

import (
	"encoding/json"
	"math"
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// lossRef is testdata/torch_losses.json, written by
// testdata/torch_losses.py: inputs and float64 references from PyTorch
// (torch.nn.functional and autograd) and from the textbook formulas.
type lossRef struct {
	Regression     map[string][]float64 `json:"regression"`
	KL             map[string][]float64 `json:"kl"`
	Cosine         map[string][]float64 `json:"cosine"`
	Classification map[string][]float64 `json:"classification"`
	CTC            struct {
		Shape         []int     `json:"shape"`
		Logits        []float64 `json:"logits"`
		Labels        []int     `json:"labels"`
		LogitPaddings []float64 `json:"logit_paddings"`
		LabelPaddings []float64 `json:"label_paddings"`
		Loss          []float64 `json:"loss"`
		Grad          []float64 `json:"grad"`
	} `json:"ctc"`
}

func loadLossRef(t *testing.T) lossRef {
	t.Helper()
	b, err := os.ReadFile("testdata/torch_losses.json")
	require.NoError(t, err)
	var r lossRef
	require.NoError(t, json.Unmarshal(b, &r))
	return r
}

func m34(v []float64) *tensor.Tensor { return tensor.FromFloat64(v, 3, 4) }

// near checks |got-want| <= atol + rtol·|want| elementwise.
func near(t *testing.T, want, got []float64, rtol, atol float64, what string) {
	t.Helper()
	require.Len(t, got, len(want), what)
	for i := range want {
		if d := math.Abs(got[i] - want[i]); !(d <= atol+rtol*math.Abs(want[i])) {
			require.Failf(t, "values differ", "%s: element %d: got %.9g, want %.9g\n got  %v\n want %v", what, i, got[i], want[i], got, want)
		}
	}
}

func TestLossesAgainstReferences(t *testing.T) {
	r := loadLossRef(t)
	p, y := m34(r.Regression["p"]), m34(r.Regression["y"])
	logp, q, logq := m34(r.KL["logp"]), m34(r.KL["q"]), m34(r.KL["logq"])
	a, b := m34(r.Cosine["a"]), m34(r.Cosine["b"])
	c := r.Classification
	x, labels, signs := m34(c["x"]), m34(c["y"]), m34(c["signs"])
	for _, tc := range []struct {
		name  string
		got   *tensor.Tensor
		want  []float64
		shape []int
	}{
		{"SquaredError", nn.SquaredError(p, y), r.Regression["squared"], []int{3, 4}},
		{"L2Loss", nn.L2Loss(p, y), scaled(r.Regression["squared"], 0.5), []int{3, 4}},
		{"HuberLoss", nn.HuberLoss(p, y, 1), r.Regression["huber"], []int{3, 4}},
		{"HuberLoss delta", nn.HuberLoss(p, y, 0.7), r.Regression["huber_delta"], []int{3, 4}},
		{"LogCosh", nn.LogCosh(p, y), r.Regression["log_cosh"], []int{3, 4}},
		{"KLDivergence", nn.KLDivergence(logp, q), r.KL["kl"], []int{3}},
		{"KLDivergenceWithLogTargets", nn.KLDivergenceWithLogTargets(logp, logq), r.KL["kl_log"], []int{3}},
		{"CosineSimilarity", nn.CosineSimilarity(a, b, 1e-12), r.Cosine["cos"], []int{3}},
		{"CosineDistance", nn.CosineDistance(a, b, 1e-12), oneMinus(r.Cosine["cos"]), []int{3}},
		{"HingeLoss", nn.HingeLoss(x, signs), c["hinge"], []int{3, 4}},
		{"SigmoidFocalLoss", nn.SigmoidFocalLoss(x, labels, 2), c["focal"], []int{3, 4}},
		{"SigmoidFocalLoss alpha", nn.SigmoidFocalLoss(x, labels, 3, 0.25), c["focal_alpha"], []int{3, 4}},
		{"SmoothLabels", nn.SmoothLabels(labels, 0.1), c["smooth"], []int{3, 4}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			require.Equal(t, tc.shape, tc.got.Shape())
			near(t, tc.want, tc.got.Float64s(), 2e-6, 2e-6, tc.name)
		})
	}
}

func scaled(v []float64, s float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i] = s * v[i]
	}
	return out
}

func oneMinus(v []float64) []float64 {
	out := make([]float64, len(v))
	for i := range v {
		out[i] = 1 - v[i]
	}
	return out
}

// CTCLoss equals torch.nn.functional.ctc_loss, and so does its gradient
// (by autodiff through the forward recursion).
func TestCTCLossAgainstTorch(t *testing.T) {
	r := loadLossRef(t).CTC
	bs, ts, ks, ns := r.Shape[0], r.Shape[1], r.Shape[2], r.Shape[3]
	logits := tensor.FromFloat64(r.Logits, bs, ts, ks)
	labels := tensor.FromInts(r.Labels, bs, ns)
	lp, lbp := tensor.FromFloat64(r.LogitPaddings, bs, ts), tensor.FromFloat64(r.LabelPaddings, bs, ns)
	loss := nn.CTCLoss(logits, lp, labels, lbp)
	require.Equal(t, []int{bs}, loss.Shape())
	near(t, r.Loss, loss.Float64s(), 1e-5, 1e-5, "loss")

	g := autodiff.Grad(func(l *tensor.Tensor) *tensor.Tensor { return tensor.Sum(nn.CTCLoss(l, lp, labels, lbp)) })(logits)
	near(t, r.Grad, g.Float64s(), 1e-4, 1e-5, "gradient")
	// Padding frames get no gradient.
	gv := g.Float64s()
	for i, pad := range r.LogitPaddings {
		if pad == 1 {
			for k := range ks {
				assert.Zero(t, gv[i*ks+k], "padding frame %d", i)
			}
		}
	}
}

// A single frame and a single label: the loss is -log p(label), and with
// the blank elsewhere, brute force over the alignments of "a" in 2 frames:
// a·a, a·blank, blank·a.
func TestCTCLossByHand(t *testing.T) {
	lg := []float64{0.3, -1.2, 0.8, 0.1, 0.5, -0.4} // 2 frames, classes {blank, a, b}
	logits := tensor.FromFloat64(lg, 1, 2, 3)
	soft := func(f int) []float64 {
		e := []float64{math.Exp(lg[3*f]), math.Exp(lg[3*f+1]), math.Exp(lg[3*f+2])}
		s := e[0] + e[1] + e[2]
		return []float64{e[0] / s, e[1] / s, e[2] / s}
	}
	p0, p1 := soft(0), soft(1)
	want := -math.Log(p0[1]*p1[1] + p0[1]*p1[0] + p0[0]*p1[1])
	got := nn.CTCLoss(logits, tensor.Zeros(tensor.Float32, 1, 2), tensor.FromInts([]int{1}, 1, 1), tensor.Zeros(tensor.Float32, 1, 1))
	assert.InDelta(t, want, got.Item(), 1e-5)
	// With the second frame padded, only "a" in the first frame remains.
	got = nn.CTCLoss(logits, tensor.FromFloat64([]float64{0, 1}, 1, 2), tensor.FromInts([]int{1}, 1, 1), tensor.Zeros(tensor.Float32, 1, 1))
	assert.InDelta(t, -math.Log(p0[1]), got.Item(), 1e-5)
	// "a a" needs a blank between: 3 frames at least; in 2 it is
	// impossible, and the loss is about -LogEpsilon.
	got = nn.CTCLoss(logits, tensor.Zeros(tensor.Float32, 1, 2), tensor.FromInts([]int{1, 1}, 1, 2), tensor.Zeros(tensor.Float32, 1, 2))
	assert.Greater(t, got.Item(), 1e4)
}

// Gradients against finite differences, away from the kinks.
func TestLossGradients(t *testing.T) {
	p := randn(1, 3, 5)
	y := randn(2, 3, 5)
	logits := randn(3, 3, 5)
	q := tensor.Softmax(randn(4, 3, 5), -1)
	labels := tensor.AsType(tensor.Greater(randn(5, 3, 5), tensor.Scalar(0)), tensor.Float32)
	for _, tc := range []struct {
		name string
		f    func(xs []*tensor.Tensor) *tensor.Tensor
		xs   []*tensor.Tensor
	}{
		{"HuberLoss", func(xs []*tensor.Tensor) *tensor.Tensor { return nn.HuberLoss(xs[0], xs[1], 0.8) }, []*tensor.Tensor{p, y}},
		{"LogCosh", func(xs []*tensor.Tensor) *tensor.Tensor { return nn.LogCosh(xs[0], xs[1]) }, []*tensor.Tensor{p, y}},
		{"KLDivergence", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.KLDivergence(tensor.LogSoftmax(xs[0], -1), xs[1])
		}, []*tensor.Tensor{logits, q}},
		{"KLDivergenceWithLogTargets", func(xs []*tensor.Tensor) *tensor.Tensor {
			return nn.KLDivergenceWithLogTargets(tensor.LogSoftmax(xs[0], -1), tensor.LogSoftmax(xs[1], -1))
		}, []*tensor.Tensor{logits, y}},
		{"CosineSimilarity", func(xs []*tensor.Tensor) *tensor.Tensor { return nn.CosineSimilarity(xs[0], xs[1], 1e-12) }, []*tensor.Tensor{p, y}},
		{"SigmoidFocalLoss", func(xs []*tensor.Tensor) *tensor.Tensor { return nn.SigmoidFocalLoss(xs[0], labels, 2, 0.3) }, []*tensor.Tensor{logits}},
	} {
		t.Run(tc.name, func(t *testing.T) { checkGrad(t, tc.f, tc.xs...) })
	}
	// A zero target probability has a finite (zero) gradient.
	z := tensor.FromFloat64([]float64{0, 0.5, 0.5}, 3)
	g := autodiff.Grad(func(q *tensor.Tensor) *tensor.Tensor {
		return nn.KLDivergence(tensor.LogSoftmax(tensor.FromFloat64([]float64{1, 2, 3}, 3), -1), q)
	})(z)
	assert.False(t, math.IsNaN(g.Float64s()[0]))
}

// Broadcasting, nil targets, large errors, the focal weight's stability.
func TestLossEdgeCases(t *testing.T) {
	p := tensor.FromFloat64([]float64{1, -2, 3, 4, 5, -6}, 2, 3)
	row := tensor.FromFloat64([]float64{1, 1, 1}, 3)
	assert.Equal(t, []int{2, 3}, nn.HuberLoss(p, row, 1).Shape(), "targets broadcast")
	assert.Equal(t, []float64{0.5, 1.5, 2.5, 3.5, 4.5, 5.5}, nn.HuberLoss(p, nil, 1).Float64s(), "nil targets are zeros: |e| - ½ beyond delta")
	assert.Equal(t, []float64{1, 4, 9, 16, 25, 36}, nn.SquaredError(p, nil).Float64s())
	// log cosh of 100 is 100 - log 2, without overflow.
	assert.InDelta(t, 100-math.Ln2, nn.LogCosh(tensor.FromFloat64([]float64{100}, 1), nil).Item(), 1e-4)
	// The focal loss of a confident correct prediction is tiny but not 0.
	f := nn.SigmoidFocalLoss(tensor.FromFloat64([]float64{17}, 1), tensor.FromFloat64([]float64{1}, 1), 2).Item()
	sig := 1 / (1 + math.Exp(17))
	assert.InEpsilon(t, math.Log1p(math.Exp(-17))*sig*sig, f, 1e-4)
	// Gamma 0 is the cross-entropy.
	x, l := randn(7, 4), tensor.FromFloat64([]float64{0, 1, 0.3, 1}, 4)
	near(t, tensor.SigmoidBinaryCrossEntropy(x, l).Float64s(), nn.SigmoidFocalLoss(x, l, 0).Float64s(), 1e-6, 1e-7, "gamma 0")

	requirePanicContains(t, func() { nn.SquaredError(p, row) }, "nn.SquaredError: predictions f32[2,3] and targets f32[3] differ in shape")
	requirePanicContains(t, func() { nn.HuberLoss(p, nil, 0) }, "nn.HuberLoss: delta 0, want > 0")
	requirePanicContains(t, func() { nn.SmoothLabels(p, 2) }, "nn.SmoothLabels: alpha 2 outside [0, 1]")
	requirePanicContains(t, func() { nn.KLDivergence(p, tensor.FromInts([]int{1, 2, 3}, 3)) }, "nn.KLDivergence", "want float32 or float64 operands of one dtype")
	requirePanicContains(t, func() { nn.HingeLoss(p, tensor.Convert(p, tensor.Float64)) },
		"nn.HingeLoss: f32[2,3] and f64[2,3]: want float32 or float64 operands of one dtype")
	requirePanicContains(t, func() { nn.HuberLoss(p, tensor.Convert(p, tensor.Float64), 1) },
		"nn.HuberLoss: predictions f32[2,3] and targets f64[2,3] differ in dtype")
	requirePanicContains(t, func() { nn.L2Loss(tensor.Arange(3), nil) }, "nn.L2Loss: predictions i32[3], want float32 or float64")
	requirePanicContains(t, func() {
		nn.CTCLoss(randn(1, 2, 3, 4), tensor.Zeros(tensor.Float32, 2, 4), tensor.FromInts([]int{1, 2}, 2, 1), tensor.Zeros(tensor.Float32, 2, 1))
	}, "nn.CTCLoss", "want logitPaddings f32[B, T]")
	requirePanicContains(t, func() {
		nn.CTCLoss(randn(1, 1, 2, 3), tensor.Zeros(tensor.Float32, 1, 2), tensor.FromInts([]int{1}, 1, 1), tensor.Zeros(tensor.Float32, 1, 1), nn.CTCOptions{BlankID: 3})
	}, "nn.CTCLoss: BlankID 3 outside [0, 3)")
}
