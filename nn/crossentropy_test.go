package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// nn.CrossEntropy and nn.BinaryCrossEntropyWithLogits against PyTorch 1.13's
// F.cross_entropy and F.binary_cross_entropy_with_logits, in float64 on
// both sides: testdata/torch_layers.py wrote the inputs, the losses and
// the gradients of Σ loss·g in testdata/torch_crossentropy.json.

func torchReduction(t *testing.T, c torchCase) nn.Reduction {
	for _, r := range []nn.Reduction{nn.ReduceMean, nn.ReduceSum, nn.ReduceNone} {
		if c.Config["reduction"] == r.String() {
			return r
		}
	}
	t.Fatalf("%s: unknown reduction %v", c.Name, c.Config["reduction"])
	return 0
}

func TestTorchCrossEntropy(t *testing.T) {
	for _, c := range loadTorchFile(t, "torch_crossentropy.json") {
		t.Run(c.Name, func(t *testing.T) {
			x, g := c.f64(t, "x"), c.f64(t, "g")
			switch c.Kind {
			case "cross_entropy":
				opts := nn.CrossEntropyOptions{LabelSmoothing: c.num("smoothing"), Reduction: torchReduction(t, c)}
				if ig, ok := c.Config["ignore"].(float64); ok {
					opts.Ignore, opts.IgnoreIndex = true, int32(ig)
				}
				if _, ok := c.Tensors["weights"]; ok {
					opts.Weights = c.f64(t, "weights")
				}
				labels := c.int32s(t, "labels")
				y, dx, _ := layerGrads(opts, x, g, func(o nn.CrossEntropyOptions, x *tensor.Tensor) *tensor.Tensor {
					return nn.CrossEntropy(x, labels, o)
				})
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", dx)
			case "bce_with_logits":
				opts := nn.BCEOptions{Reduction: torchReduction(t, c)}
				if _, ok := c.Tensors["weight"]; ok {
					opts.Weight = c.f64(t, "weight")
				}
				if _, ok := c.Tensors["pos_weight"]; ok {
					opts.PosWeight = c.f64(t, "pos_weight")
				}
				targets := c.f64(t, "x2")
				vg := autodiff.ValueAndGradAux(func(in [2]*tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
					y := nn.BinaryCrossEntropyWithLogits(in[0], in[1], opts)
					return tensor.Sum(tensor.Mul(y, g)), y
				})
				_, y, grads := vg([2]*tensor.Tensor{x, targets})
				requireTorch64(t, c, "y", y)
				requireTorch64(t, c, "dx", grads[0])
				requireTorch64(t, c, "dx2", grads[1])
			default:
				t.Fatalf("unknown kind %q", c.Kind)
			}
		})
	}
}

// Hand-worked: uniform logits over 4 classes lose log 4 per example; the
// ignored example neither counts in the mean nor gets a gradient.
func TestCrossEntropyIgnoreHandWorked(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		logits := tensor.AsType(tensor.FromFloat64([]float64{0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0}, 3, 4), dt)
		labels := tensor.FromInt32([]int32{2, -100, 0}, 3)
		opts := nn.CrossEntropyOptions{Ignore: true, IgnoreIndex: nn.TorchIgnoreIndex}
		grad := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return nn.CrossEntropy(x, labels, opts) })(logits)
		require.InDelta(t, math.Log(4), nn.CrossEntropy(logits, labels, opts).Item(), 1e-6, "%v", dt)
		// d mean / d logits = (softmax - onehot)/2 on the two counted rows.
		want := []float64{0.125, 0.125, -0.375, 0.125, 0, 0, 0, 0, -0.375, 0.125, 0.125, 0.125}
		require.InDeltaSlice(t, want, grad.Float64s(), 1e-6, "%v", dt)
		require.Equal(t, dt, grad.DType())

		opts.Reduction = nn.ReduceNone
		none := nn.CrossEntropy(logits, labels, opts).Float64s()
		require.InDeltaSlice(t, []float64{math.Log(4), 0, math.Log(4)}, none, 1e-6, "%v", dt)
	}
}

// Class 0 as the padding token: label 0 ignored, not panicking, and the
// result equals the mean over the rest.
func TestCrossEntropyIgnoreClassZero(t *testing.T) {
	logits := tensor.FromFloat64s([]float64{1, 2, 3, 0.5, -1, 2, 3, 3, 1}, 3, 3)
	labels := tensor.FromInt32([]int32{0, 1, 2}, 3)
	all := nn.CrossEntropy(logits, labels, nn.CrossEntropyOptions{Reduction: nn.ReduceNone}).Float64s()
	got := nn.CrossEntropy(logits, labels, nn.CrossEntropyOptions{Ignore: true}).Item()
	require.InDelta(t, (all[1]+all[2])/2, got, 1e-12)
}

// Every label ignored: the mean is 0/0 = NaN, as PyTorch's, with a zero
// gradient; the sum 0.
func TestCrossEntropyAllIgnored(t *testing.T) {
	logits := tensor.FromFloat64s([]float64{1, 2, 3, 4}, 2, 2)
	labels := tensor.FromInt32([]int32{-1, -1}, 2)
	opts := nn.CrossEntropyOptions{Ignore: true, IgnoreIndex: -1, LabelSmoothing: 0.1}
	require.True(t, math.IsNaN(nn.CrossEntropy(logits, labels, opts).Item()))
	// The gradient is zero (PyTorch's too), not NaN.
	grad := autodiff.Grad(func(x *tensor.Tensor) *tensor.Tensor { return nn.CrossEntropy(x, labels, opts) })(logits)
	require.Equal(t, []float64{0, 0, 0, 0}, grad.Float64s())
	opts.Reduction = nn.ReduceSum
	require.Equal(t, 0.0, nn.CrossEntropy(logits, labels, opts).Item())
}

// The zero options on float32 agree with tensor.SoftmaxCrossEntropy's mean.
func TestCrossEntropyMatchesSoftmaxCrossEntropy(t *testing.T) {
	logits := tensor.FromFloat32([]float32{1, -2, 0.5, 3, 0, 0, 2, 2, -1, 4, 1, 0}, 4, 3)
	labels := tensor.FromInt32([]int32{2, 0, 1, 1}, 4)
	want := tensor.Mean(tensor.SoftmaxCrossEntropy(logits, labels)).Item()
	got := nn.CrossEntropy(logits, labels, nn.CrossEntropyOptions{})
	require.Equal(t, tensor.Float32, got.DType())
	require.InDelta(t, want, got.Item(), 1e-6)
}

func TestCrossEntropyPanics(t *testing.T) {
	f32 := tensor.Zeros(tensor.Float32, 2, 3)
	good := tensor.FromInt32([]int32{0, 2}, 2)
	cases := []struct {
		name           string
		logits, labels *tensor.Tensor
		opts           nn.CrossEntropyOptions
		msg            string
	}{
		{"float labels", f32, tensor.Zeros(tensor.Float32, 2), nn.CrossEntropyOptions{},
			"nn.CrossEntropy: logits f32[2,3], labels f32[2]: probability targets must have logits' dtype and shape (class indices are int32 of shape [2])"},
		{"int64 labels", f32, tensor.Zeros(tensor.Int64, 2), nn.CrossEntropyOptions{},
			"nn.CrossEntropy: logits f32[2,3], labels i64[2]: labels must be int32 class indices"},
		{"probabilities dtype", f32, tensor.Zeros(tensor.Float64, 2, 3), nn.CrossEntropyOptions{},
			"nn.CrossEntropy: logits f32[2,3], labels f64[2,3]: probability targets must have logits' dtype and shape"},
		{"probabilities with Ignore", f32, f32, nn.CrossEntropyOptions{Ignore: true, IgnoreIndex: -100},
			"nn.CrossEntropy: logits f32[2,3], labels f32[2,3]: Ignore is not supported with probability targets"},
		{"probabilities weights", f32, f32, nn.CrossEntropyOptions{Weights: tensor.Zeros(tensor.Float32, 2)},
			"nn.CrossEntropy: logits f32[2,3], labels f32[2,3]: weights f32[2] must be float32[3], one per class"},
		{"probabilities smoothing", f32, f32, nn.CrossEntropyOptions{LabelSmoothing: -0.1}, "label smoothing -0.1 outside [0, 1]"},
		{"probabilities reduction", f32, f32, nn.CrossEntropyOptions{Reduction: -1}, "unknown reduction Reduction(-1)"},
		{"label shape", f32, tensor.FromInt32([]int32{0, 1, 2}, 3), nn.CrossEntropyOptions{},
			"nn.CrossEntropy: logits f32[2,3], labels i32[3]: labels must have shape [2]"},
		{"PyTorch class axis", tensor.Zeros(tensor.Float32, 2, 3, 4), tensor.FromInt32(make([]int32, 8), 2, 4), nn.CrossEntropyOptions{},
			"PyTorch's [N,C,T] is gonox's [N,T,C]"},
		{"int logits", tensor.Zeros(tensor.Int32, 2, 3), good, nn.CrossEntropyOptions{},
			"logits must be float32 or float64"},
		{"scalar logits", tensor.Zeros(tensor.Float32), tensor.Zeros(tensor.Int32), nn.CrossEntropyOptions{},
			"logits need a class axis"},
		{"weights length", f32, good, nn.CrossEntropyOptions{Weights: tensor.Zeros(tensor.Float32, 4)},
			"nn.CrossEntropy: logits f32[2,3], labels i32[2]: weights f32[4] must be float32[3], one per class"},
		{"weights dtype", f32, good, nn.CrossEntropyOptions{Weights: tensor.Zeros(tensor.Float64, 3)},
			"weights f64[3] must be float32[3]"},
		{"label out of range", f32, tensor.FromInt32([]int32{0, 3}, 2), nn.CrossEntropyOptions{},
			"nn.CrossEntropy: logits f32[2,3], labels i32[2]: label 3 at [1] is outside [0,3) and is not an ignored index"},
		{"-100 without Ignore", f32, tensor.FromInt32([]int32{-100, 1}, 2), nn.CrossEntropyOptions{},
			"label -100 at [0] is outside [0,3) and is not an ignored index (set Ignore and IgnoreIndex to ignore it)"},
		{"other ignore index", f32, tensor.FromInt32([]int32{-100, 1}, 2), nn.CrossEntropyOptions{Ignore: true, IgnoreIndex: -1},
			"label -100 at [0] is outside [0,3) and is not the ignore index -1"},
		{"IgnoreIndex without Ignore", f32, good, nn.CrossEntropyOptions{IgnoreIndex: 5},
			"nn.CrossEntropy: logits f32[2,3], labels i32[2]: IgnoreIndex 5 is set but Ignore is off: set Ignore to ignore label 5"},
		{"IgnoreIndex without Ignore, probabilities", f32, f32, nn.CrossEntropyOptions{IgnoreIndex: -100},
			"IgnoreIndex -100 is set but Ignore is off"},
		{"int64 labels hint", f32, tensor.Zeros(tensor.Int64, 2), nn.CrossEntropyOptions{},
			"convert int64 labels with tensor.AsType(labels, tensor.Int32)"},
		{"smoothing", f32, good, nn.CrossEntropyOptions{LabelSmoothing: 1.5}, "label smoothing 1.5 outside [0, 1]"},
		{"smoothing NaN", f32, good, nn.CrossEntropyOptions{LabelSmoothing: math.NaN()}, "label smoothing NaN outside [0, 1]"},
		{"reduction", f32, good, nn.CrossEntropyOptions{Reduction: 7}, "unknown reduction Reduction(7)"},
		{"nil labels", f32, nil, nn.CrossEntropyOptions{}, "nn.CrossEntropy: nil logits or labels"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r)
				require.Contains(t, r, c.msg)
			}()
			nn.CrossEntropy(c.logits, c.labels, c.opts)
		})
	}
}

func TestBinaryCrossEntropyWithLogitsPanics(t *testing.T) {
	x := tensor.Zeros(tensor.Float32, 2, 3)
	cases := []struct {
		name    string
		targets *tensor.Tensor
		opts    nn.BCEOptions
		msg     string
	}{
		{"shape", tensor.Zeros(tensor.Float32, 3, 2), nn.BCEOptions{},
			"nn.BinaryCrossEntropyWithLogits: logits f32[2,3], targets f32[3,2]: targets must have logits' dtype and shape"},
		{"dtype", tensor.Zeros(tensor.Float64, 2, 3), nn.BCEOptions{}, "targets must have logits' dtype and shape"},
		{"pos_weight length", x, nn.BCEOptions{PosWeight: tensor.Zeros(tensor.Float32, 2)},
			"pos_weight f32[2] must be float32 and broadcast to [2 3]"},
		{"weight rank", x, nn.BCEOptions{Weight: tensor.Zeros(tensor.Float32, 1, 2, 3)}, "weight f32[1,2,3] must be float32"},
		{"reduction", x, nn.BCEOptions{Reduction: -1}, "unknown reduction Reduction(-1)"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				r := recover()
				require.NotNil(t, r)
				require.Contains(t, r, c.msg)
			}()
			nn.BinaryCrossEntropyWithLogits(x, c.targets, c.opts)
		})
	}
}

// TestCrossEntropyProbabilities: one-hot probabilities give the loss of
// their class indices per position and summed (weights and smoothing
// included), while the mean divides by the number of positions, not by
// the target weights; float32 and float64 agree; and NLLLoss of
// LogSoftmax is CrossEntropy.
func TestCrossEntropyProbabilities(t *testing.T) {
	logits := tensor.FromFloat64s([]float64{0.5, -1, 2, 0, 1, 1, -2, 0.3, 3, 0.1, 0, -0.5}, 2, 2, 3)
	labels := tensor.FromInt32([]int32{2, 0, 1, 0}, 2, 2)
	onehot := tensor.FromFloat64s([]float64{0, 0, 1, 1, 0, 0, 0, 1, 0, 1, 0, 0}, 2, 2, 3)
	w := tensor.FromFloat64s([]float64{0.5, 2, 1}, 3)
	for _, r := range []nn.Reduction{nn.ReduceNone, nn.ReduceSum} {
		o := nn.CrossEntropyOptions{Weights: w, LabelSmoothing: 0.2, Reduction: r}
		assert.InDeltaSlice(t, nn.CrossEntropy(logits, labels, o).Float64s(), nn.CrossEntropy(logits, onehot, o).Float64s(), 1e-14, "%v", r)
	}
	o := nn.CrossEntropyOptions{Weights: w}
	sum := nn.CrossEntropy(logits, labels, nn.CrossEntropyOptions{Weights: w, Reduction: nn.ReduceSum}).Item()
	assert.InDelta(t, sum/4, nn.CrossEntropy(logits, onehot, o).Item(), 1e-14, "mean over the 4 positions")
	assert.InDelta(t, sum/(1+0.5+2+0.5), nn.CrossEntropy(logits, labels, o).Item(), 1e-14, "mean over the target weights")

	soft := tensor.FromFloat64s([]float64{0.2, 0.3, 0.5, 1, 0, 0, 0.1, 0.1, 0.8, 0.4, 0.4, 0.2}, 2, 2, 3)
	o = nn.CrossEntropyOptions{Weights: w, LabelSmoothing: 0.1}
	want := nn.CrossEntropy(logits, soft, o).Item()
	o.Weights = tensor.Convert(w, tensor.Float32)
	got := nn.CrossEntropy(tensor.Convert(logits, tensor.Float32), tensor.Convert(soft, tensor.Float32), o)
	require.Equal(t, tensor.Float32, got.DType())
	assert.InDelta(t, want, got.Item(), 1e-6)

	for _, r := range []nn.Reduction{nn.ReduceMean, nn.ReduceSum, nn.ReduceNone} {
		ce := nn.CrossEntropy(logits, labels, nn.CrossEntropyOptions{Weights: w, Reduction: r, Ignore: true, IgnoreIndex: 1})
		nll := nn.NLLLoss(tensor.LogSoftmax(logits, -1), labels, nn.NLLLossOptions{Weights: w, Reduction: r, Ignore: true, IgnoreIndex: 1})
		assert.Equal(t, ce.Float64s(), nll.Float64s(), "%v", r)
	}
}

func TestNLLLossPanics(t *testing.T) {
	lp := tensor.Zeros(tensor.Float32, 2, 3)
	for _, c := range []struct {
		name string
		f    func()
		msg  string
	}{
		{"nil", func() { nn.NLLLoss(lp, nil, nn.NLLLossOptions{}) }, "nn.NLLLoss: nil log-probabilities or labels"},
		{"int input", func() {
			nn.NLLLoss(tensor.Zeros(tensor.Int32, 2, 3), tensor.Zeros(tensor.Int32, 2), nn.NLLLossOptions{})
		},
			"nn.NLLLoss: log-probabilities i32[2,3], labels i32[2]: log-probabilities must be float32 or float64"},
		{"scalar", func() { nn.NLLLoss(tensor.Zeros(tensor.Float32), tensor.Zeros(tensor.Int32), nn.NLLLossOptions{}) },
			"nn.NLLLoss: log-probabilities f32[], labels i32[]: log-probabilities need a class axis"},
		{"IgnoreIndex without Ignore", func() { nn.NLLLoss(lp, tensor.FromInt32([]int32{1, 0}, 2), nn.NLLLossOptions{IgnoreIndex: 2}) },
			"nn.NLLLoss: log-probabilities f32[2,3], labels i32[2]: IgnoreIndex 2 is set but Ignore is off"},
		{"float labels", func() { nn.NLLLoss(lp, lp, nn.NLLLossOptions{}) },
			"nn.NLLLoss: log-probabilities f32[2,3], labels f32[2,3]: labels must be int32 class indices"},
		{"label out of range", func() { nn.NLLLoss(lp, tensor.FromInt32([]int32{3, 0}, 2), nn.NLLLossOptions{}) },
			"nn.NLLLoss: log-probabilities f32[2,3], labels i32[2]: label 3 at [0] is outside [0,3)"},
		{"weights", func() {
			nn.NLLLoss(lp, tensor.FromInt32([]int32{1, 0}, 2), nn.NLLLossOptions{Weights: tensor.Ones(tensor.Float64, 3)})
		},
			"weights f64[3] must be float32[3], one per class"},
		{"reduction", func() { nn.NLLLoss(lp, tensor.FromInt32([]int32{1, 0}, 2), nn.NLLLossOptions{Reduction: 5}) },
			"unknown reduction Reduction(5)"},
	} {
		t.Run(c.name, func(t *testing.T) { requirePanicContains(t, c.f, c.msg) })
	}
}
