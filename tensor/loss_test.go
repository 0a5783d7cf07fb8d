package tensor_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

func TestMSE(t *testing.T) {
	tests := []struct {
		name         string
		pred, target *tensor.Tensor
		want         float64
	}{
		{"vector", tensor.FromFloat32([]float32{1, 2, 3}), tensor.FromFloat32([]float32{1, 0, 0}), 13.0 / 3},
		{"matrix", tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2), tensor.FromFloat32([]float32{0, 0, 0, 0}, 2, 2), 30.0 / 4},
		{"scalar", tensor.Scalar(3), tensor.Scalar(-1), 16},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tensor.MSE(tt.pred, tt.target)
			assert.Zero(t, got.Rank())
			assert.InDelta(t, tt.want, got.Item(), 1e-6)
		})
	}
	assert.True(t, math.IsNaN(tensor.MSE(tensor.FromFloat32(nil), tensor.FromFloat32(nil)).Item()), "mean of nothing")
	srtCheckGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.MSE(xs[0], xs[1]) },
		srtRandn(1, 3, 4), srtRandn(2, 3, 4))
}

func TestMSEPanics(t *testing.T) {
	require.PanicsWithValue(t, "tensor.MSE: f32[3,1], f32[3]: shapes must match exactly (MSE does not broadcast)",
		func() { tensor.MSE(tensor.Zeros(tensor.Float32, 3, 1), tensor.Zeros(tensor.Float32, 3)) })
	require.PanicsWithValue(t, "tensor.MSE: f32[3], i32[3]: operands must be float32",
		func() { tensor.MSE(tensor.Zeros(tensor.Float32, 3), tensor.Zeros(tensor.Int32, 3)) })
}

// srtRefXent computes -log softmax(z)[label] per row in float64.
func srtRefXent(z []float64, c int, labels []int32) []float64 {
	out := make([]float64, len(labels))
	for r := range labels {
		row := z[r*c : (r+1)*c]
		m := math.Inf(-1)
		for _, v := range row {
			m = math.Max(m, v)
		}
		s := 0.0
		for _, v := range row {
			s += math.Exp(v - m)
		}
		out[r] = m + math.Log(s) - row[labels[r]]
	}
	return out
}

func srtLabels(seed uint64, c int, shape ...int) *tensor.Tensor {
	rng := rand.New(rand.NewPCG(seed, 6))
	n := 1
	for _, d := range shape {
		n *= d
	}
	d := make([]int32, n)
	for i := range d {
		d[i] = int32(rng.IntN(c))
	}
	if len(shape) == 0 {
		return tensor.ScalarInt(d[0])
	}
	return tensor.FromInt32(d, shape...)
}

func TestSoftmaxCrossEntropyHandWorked(t *testing.T) {
	// logits [0, ln 2, ln 3]: softmax [1/6, 2/6, 3/6].
	z := tensor.FromFloat64([]float64{0, math.Ln2, math.Log(3)})
	for label, p := range []float64{1.0 / 6, 2.0 / 6, 3.0 / 6} {
		got := tensor.SoftmaxCrossEntropy(z, tensor.ScalarInt(int32(label)))
		assert.Zero(t, got.Rank())
		assert.InDelta(t, -math.Log(p), got.Item(), 1e-6)
	}
	// Uniform logits: log C.
	u := tensor.Zeros(tensor.Float32, 2, 4)
	assert.InDeltaSlice(t, []float64{math.Log(4), math.Log(4)},
		tensor.SoftmaxCrossEntropy(u, tensor.FromInt32([]int32{0, 3})).Float64s(), 1e-6)
}

func TestSoftmaxCrossEntropyMatchesReference(t *testing.T) {
	for i, shape := range [][]int{{5}, {4, 5}, {2, 3, 7}, {0, 4}, {3, 1}, {300, 40}} {
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			z := tensor.MulScalar(srtRandn(uint64(i), shape...), 5)
			c := shape[len(shape)-1]
			labels := srtLabels(uint64(i), c, shape[:len(shape)-1]...)
			got := tensor.SoftmaxCrossEntropy(z, labels)
			srtRequireShape(t, shape[:len(shape)-1], got)
			want := srtRefXent(z.Float64s(), c, labels.Int32s())
			for j := range want {
				require.InDelta(t, want[j], got.Float64s()[j], 1e-5*(1+math.Abs(want[j])))
			}
			// The traced path (fused op with the hidden softmax output)
			// computes the same values bit for bit.
			tr := tensor.NewTrace()
			traced := tensor.SoftmaxCrossEntropy(tr.Leaf(z), labels)
			assert.True(t, traced.IsTraced())
			assert.Equal(t, got.Float32s(), traced.Float32s())
			// Probabilities that are one-hot give the same loss.
			onehot := tensor.AsType(tensor.Equal(tensor.ExpandDims(labels, -1), tensor.Arange(c)), tensor.Float32)
			assert.InDeltaSlice(t, got.Float64s(), tensor.SoftmaxCrossEntropyProbs(z, onehot).Float64s(), 1e-5)
		})
	}
}

func TestSoftmaxCrossEntropyStability(t *testing.T) {
	z := tensor.FromFloat32([]float32{
		1000, -1000, 0,
		1000, -1000, 0,
		-1000, -1000, -1000,
		1000, 1000, -1000,
	}, 4, 3)
	labels := tensor.FromInt32([]int32{0, 1, 2, 1})
	got := tensor.SoftmaxCrossEntropy(z, labels).Float64s()
	assert.InDeltaSlice(t, []float64{0, 2000, math.Log(3), math.Ln2}, got, 1e-3)
	probs := tensor.FromFloat32([]float32{
		1, 0, 0,
		0.5, 0.5, 0,
		0, 0, 1,
		0, 1, 0,
	}, 4, 3)
	gotP := tensor.SoftmaxCrossEntropyProbs(z, probs).Float64s()
	assert.InDeltaSlice(t, []float64{0, 1000, math.Log(3), math.Ln2}, gotP, 1e-3)
	// Gradients stay finite too.
	tr := tensor.NewTrace()
	zl := tr.Leaf(z)
	loss := tensor.Sum(tensor.SoftmaxCrossEntropy(zl, labels))
	g := tensor.Backward(tr, []*tensor.Tensor{loss}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{zl}, false)[0]
	assert.InDeltaSlice(t, []float64{
		0, 0, 0,
		1, -1, 0,
		1.0 / 3, 1.0 / 3, -2.0 / 3,
		0.5, -0.5, 0,
	}, g.Float64s(), 1e-6)
}

func TestSoftmaxCrossEntropyProbsZeroTerms(t *testing.T) {
	// A -Inf logit with zero probability contributes 0, not 0·(-Inf) = NaN.
	z := tensor.FromFloat32([]float32{0, float32(math.Inf(-1)), 0})
	p := tensor.FromFloat32([]float32{0.25, 0, 0.75})
	assert.InDelta(t, math.Ln2, tensor.SoftmaxCrossEntropyProbs(z, p).Item(), 1e-6)
}

func TestSoftmaxCrossEntropyProbsMatchesReference(t *testing.T) {
	for i, shape := range [][]int{{6}, {3, 6}, {2, 2, 5}, {0, 3}} {
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			z := tensor.MulScalar(srtRandn(uint64(i), shape...), 3)
			p := tensor.Softmax(srtRandn(uint64(i+50), shape...), -1)
			zv, pv := z.Float64s(), p.Float64s()
			c := shape[len(shape)-1]
			want := make([]float64, len(zv)/c)
			for r := range want {
				row := zv[r*c : (r+1)*c]
				m := math.Inf(-1)
				for _, v := range row {
					m = math.Max(m, v)
				}
				s := 0.0
				for _, v := range row {
					s += math.Exp(v - m)
				}
				for j, v := range row {
					want[r] -= pv[r*c+j] * (v - m - math.Log(s))
				}
			}
			got := tensor.SoftmaxCrossEntropyProbs(z, p)
			srtRequireShape(t, shape[:len(shape)-1], got)
			if len(want) > 0 {
				assert.InDeltaSlice(t, want, got.Float64s(), 1e-5)
			}
			tr := tensor.NewTrace()
			assert.Equal(t, got.Float32s(), tensor.SoftmaxCrossEntropyProbs(z, tr.Leaf(p)).Float32s())
		})
	}
}

func TestSoftmaxCrossEntropyVJP(t *testing.T) {
	for i, shape := range [][]int{{5}, {3, 4}, {2, 3, 4}} {
		t.Run(fmt.Sprint(shape), func(t *testing.T) {
			c := shape[len(shape)-1]
			z := srtRandn(uint64(i+20), shape...)
			labels := srtLabels(uint64(i), c, shape[:len(shape)-1]...)
			f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.SoftmaxCrossEntropy(xs[0], xs[1]) }
			srtCheckGrad(t, f, z, labels)
			// Second order: the VJP is built from ops on the hidden softmax
			// output, so the Hessian-vector product is right.
			srtCheckGrad(t, srtGradFn(f, 0), z, labels)
			// Third order, through the hidden output's own cotangent.
			srtCheckGrad(t, srtGradFn(srtGradFn(f, 0), 0), z, labels)
			// A nonlinear use of the loss makes the fused backward op's
			// incoming cotangent depend on the logits too.
			sq := func(xs []*tensor.Tensor) *tensor.Tensor {
				l := f(xs)
				return tensor.Mul(l, l)
			}
			srtCheckGrad(t, srtGradFn(sq, 0), z, labels)

			p := tensor.Softmax(srtRandn(uint64(i+30), shape...), -1)
			fp := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.SoftmaxCrossEntropyProbs(xs[0], xs[1]) }
			srtCheckGrad(t, fp, z, p)
			srtCheckGrad(t, srtGradFn(fp, 0), z, p)
			srtCheckGrad(t, srtGradFn(fp, 1), z, p)
			srtCheckGrad(t, srtGradFn(srtGradFn(fp, 0), 0), z, p)
			sqp := func(xs []*tensor.Tensor) *tensor.Tensor {
				l := fp(xs)
				return tensor.Mul(l, l)
			}
			srtCheckGrad(t, srtGradFn(sqp, 0), z, p)
		})
	}
}

func TestSoftmaxCrossEntropyGradientIsSoftmaxMinusOneHot(t *testing.T) {
	z := tensor.FromFloat64([]float64{0, math.Ln2, math.Log(3), 0, 0, 0}, 2, 3)
	labels := tensor.FromInt32([]int32{2, 0})
	g := srtGrad(func(z *tensor.Tensor) *tensor.Tensor { return tensor.SoftmaxCrossEntropy(z, labels) },
		z, tensor.FromFloat32([]float32{1, 2}))
	assert.InDeltaSlice(t, []float64{1.0 / 6, 2.0 / 6, 3.0/6 - 1, 2 * (1.0/3 - 1), 2.0 / 3, 2.0 / 3}, g.Float64s(), 1e-6)
}

func TestSoftmaxCrossEntropyPanics(t *testing.T) {
	z := tensor.Zeros(tensor.Float32, 4, 3)
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: f32[4,3], i32[4]: label 5 at [2] out of range [0,3)",
		func() { tensor.SoftmaxCrossEntropy(z, tensor.FromInt32([]int32{0, 1, 5, 2})) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: f32[2,2,3], i32[2,2]: label -1 at [1,0] out of range [0,3)",
		func() {
			tensor.SoftmaxCrossEntropy(tensor.Zeros(tensor.Float32, 2, 2, 3), tensor.FromInt32([]int32{0, 1, -1, 2}, 2, 2))
		})
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: f32[3], i32[]: label 3 at [] out of range [0,3)",
		func() { tensor.SoftmaxCrossEntropy(tensor.Zeros(tensor.Float32, 3), tensor.ScalarInt(3)) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: f32[4,3], i32[3]: labels must have shape [4] (logits without the class axis)",
		func() { tensor.SoftmaxCrossEntropy(z, tensor.Zeros(tensor.Int32, 3)) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: f32[4,3], f32[4]: labels must be int32 class indices (for target distributions use SoftmaxCrossEntropyProbs)",
		func() { tensor.SoftmaxCrossEntropy(z, tensor.Zeros(tensor.Float32, 4)) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: i32[4,3], i32[4]: logits must be float32",
		func() { tensor.SoftmaxCrossEntropy(tensor.Zeros(tensor.Int32, 4, 3), tensor.Zeros(tensor.Int32, 4)) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: f32[], i32[]: logits need a class axis",
		func() { tensor.SoftmaxCrossEntropy(tensor.Scalar(0), tensor.ScalarInt(0)) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropy: f32[2,0], i32[2]: label 0 at [0] out of range [0,0)",
		func() { tensor.SoftmaxCrossEntropy(tensor.Zeros(tensor.Float32, 2, 0), tensor.Zeros(tensor.Int32, 2)) })

	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropyProbs: f32[4,3], f32[4,2]: shapes must match exactly",
		func() { tensor.SoftmaxCrossEntropyProbs(z, tensor.Zeros(tensor.Float32, 4, 2)) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropyProbs: f32[4,3], i32[4]: operands must be float32 (for integer labels use SoftmaxCrossEntropy)",
		func() { tensor.SoftmaxCrossEntropyProbs(z, tensor.Zeros(tensor.Int32, 4)) })
	require.PanicsWithValue(t, "tensor.SoftmaxCrossEntropyProbs: f32[], f32[]: logits need a class axis",
		func() { tensor.SoftmaxCrossEntropyProbs(tensor.Scalar(0), tensor.Scalar(1)) })
}

func TestSoftplusAndLogSigmoid(t *testing.T) {
	xs := []float32{-1000, -100, -20, -3, -0.5, 0, 0.5, 3, 20, 100, 1000}
	x := tensor.FromFloat32(xs)
	sp := tensor.Softplus(x).Float64s()
	ls := tensor.LogSigmoid(x).Float64s()
	for i, v := range xs {
		f := float64(v)
		// References by other formulas: log(1+e^x) where it does not
		// overflow, and the asymptotes x + e^-x and e^x elsewhere.
		var wantSp, wantLs float64
		switch {
		case f > 30:
			wantSp, wantLs = f+math.Exp(-f), -math.Exp(-f)
		case f < -30:
			wantSp, wantLs = math.Exp(f), f-math.Exp(f)
		default:
			wantSp, wantLs = math.Log(1+math.Exp(f)), -math.Log(1+math.Exp(-f))
		}
		assert.InDelta(t, wantSp, sp[i], 1e-6*(1+math.Abs(wantSp)), "softplus(%v)", v)
		assert.InDelta(t, wantLs, ls[i], 1e-6*(1+math.Abs(wantLs)), "log_sigmoid(%v)", v)
		assert.False(t, math.IsInf(sp[i], 0) || math.IsNaN(sp[i]))
		assert.False(t, math.IsInf(ls[i], 0) || math.IsNaN(ls[i]))
	}
	// Small values are kept, not rounded to 0: softplus(-20) = 2.06e-9.
	assert.InEpsilon(t, math.Exp(-20), sp[2], 1e-6)
	assert.InEpsilon(t, -math.Exp(-20), ls[8], 1e-6)
	assert.Equal(t, float64(1000), sp[10])
	assert.Equal(t, float64(-1000), ls[0])

	for _, f := range []func(*tensor.Tensor) *tensor.Tensor{tensor.Softplus, tensor.LogSigmoid} {
		g := func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0]) }
		x := tensor.MulScalar(srtRandn(3, 4, 5), 3)
		srtCheckGrad(t, g, x)
		srtCheckGrad(t, srtGradFn(g, 0), x)
	}
	// Derivatives at the extremes: σ(x) and σ(-x).
	gsp := srtGrad(tensor.Softplus, tensor.FromFloat32([]float32{-1000, 0, 1000}), tensor.Ones(tensor.Float32, 3))
	assert.Equal(t, []float32{0, 0.5, 1}, gsp.Float32s())
	gls := srtGrad(tensor.LogSigmoid, tensor.FromFloat32([]float32{-1000, 0, 1000}), tensor.Ones(tensor.Float32, 3))
	assert.Equal(t, []float32{1, 0.5, 0}, gls.Float32s())
}

func TestSigmoidBinaryCrossEntropy(t *testing.T) {
	// Moderate logits against the textbook formula.
	z := tensor.MulScalar(srtRandn(4, 3, 5), 3)
	rng := rand.New(rand.NewPCG(1, 1))
	yd := make([]float32, 15)
	for i := range yd {
		yd[i] = float32(rng.Float64())
		if i%3 == 0 {
			yd[i] = float32(i % 2)
		}
	}
	y := tensor.FromFloat32(yd, 3, 5)
	got := tensor.SigmoidBinaryCrossEntropy(z, y)
	require.Equal(t, []int{3, 5}, got.Shape())
	zv := z.Float64s()
	for i, v := range got.Float64s() {
		p := 1 / (1 + math.Exp(-zv[i]))
		want := -float64(yd[i])*math.Log(p) - (1-float64(yd[i]))*math.Log(1-p)
		assert.InDelta(t, want, v, 1e-5, "element %d", i)
	}
	// Extreme logits stay finite and exact.
	ze := tensor.FromFloat32([]float32{1000, 1000, -1000, -1000, 0})
	ye := tensor.FromFloat32([]float32{1, 0, 1, 0, 0.5})
	assert.InDeltaSlice(t, []float64{0, 1000, 1000, 0, math.Ln2}, tensor.SigmoidBinaryCrossEntropy(ze, ye).Float64s(), 1e-6)

	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.SigmoidBinaryCrossEntropy(xs[0], xs[1]) }
	srtCheckGrad(t, f, z, y)
	srtCheckGrad(t, srtGradFn(f, 0), z, y)
	// d/dz = σ(z) - y
	g := srtGrad(func(z *tensor.Tensor) *tensor.Tensor { return tensor.SigmoidBinaryCrossEntropy(z, ye) }, ze, tensor.Ones(tensor.Float32, 5))
	assert.InDeltaSlice(t, []float64{0, 1, -1, 0, 0}, g.Float64s(), 1e-7)
}

// Hand-worked values where the loss is tiny: the confident correct
// predictions whose loss softplus(z) - y·z rounds to 0. With s(x) =
// log(1+e^x): z=30, y=1 gives s(-30) = 9.357622968840175e-14; z=-20, y=0
// gives s(-20) = 2.0611536224385579e-09; z=2, y=1/4 gives 1.5 + s(-2) =
// 1.6269280110429727; z=-3, y=1 gives 3 + s(-3) = 3.048587351573742.
func TestSigmoidBinaryCrossEntropySmallLosses(t *testing.T) {
	z := tensor.FromFloat32([]float32{30, -30, -20, 2, -3, 88})
	y := tensor.FromFloat32([]float32{1, 0, 0, 0.25, 1, 1})
	want := []float64{9.357622968840175e-14, 9.357622968840175e-14, 2.0611536224385579e-09,
		1.6269280110429727, 3.048587351573742, 6.0546018954011858e-39}
	got := tensor.SigmoidBinaryCrossEntropy(z, y).Float64s()
	for i := range want {
		assert.InEpsilon(t, want[i], got[i], 1e-6, "element %d", i)
	}
	// The gradient σ(z) - y keeps those small values too: σ(30) - 1 is
	// -e^-30/(1+e^-30) ≈ -9.357622968840175e-14 in exact arithmetic, but
	// σ(30) rounds to 1 in float32, so it is 0 there, as in optax.
	g := srtGrad(func(z *tensor.Tensor) *tensor.Tensor { return tensor.SigmoidBinaryCrossEntropy(z, y) }, z, tensor.Ones(tensor.Float32, 6))
	assert.InDeltaSlice(t, []float64{0, 0, 2.0611536e-09, 0.8807970779778823 - 0.25, 0.04742587317756678 - 1, 0}, g.Float64s(), 1e-7)
}

func TestNNFunctionPanics(t *testing.T) {
	require.PanicsWithValue(t, "tensor.Softplus: i32[2]: not defined for int32", func() { tensor.Softplus(tensor.Zeros(tensor.Int32, 2)) })
	require.PanicsWithValue(t, "tensor.LogSigmoid: bool[2]: not defined for bool", func() { tensor.LogSigmoid(tensor.Zeros(tensor.Bool, 2)) })
	require.PanicsWithValue(t, "tensor.SigmoidBinaryCrossEntropy: f32[4,1], f32[4]: shapes must match exactly",
		func() {
			tensor.SigmoidBinaryCrossEntropy(tensor.Zeros(tensor.Float32, 4, 1), tensor.Zeros(tensor.Float32, 4))
		})
	require.PanicsWithValue(t, "tensor.SigmoidBinaryCrossEntropy: f32[4], i32[4]: operands must be float32",
		func() {
			tensor.SigmoidBinaryCrossEntropy(tensor.Zeros(tensor.Float32, 4), tensor.Zeros(tensor.Int32, 4))
		})
}

func BenchmarkSoftmaxCrossEntropy(b *testing.B) {
	// An ensemble's classifier (8 models, batch 16, 10 classes: 128 rows
	// of 10, issue 30): the per-row costs, not the bandwidth.
	zs, ls := srtRandn(2, 128, 10), srtLabels(2, 10, 128)
	b.Run("forward/128x10", func(b *testing.B) {
		for b.Loop() {
			tensor.Donate(tensor.SoftmaxCrossEntropy(zs, ls))
		}
	})
	b.Run("forward+backward/128x10", func(b *testing.B) {
		ones := tensor.Ones(tensor.Float32, 128)
		for b.Loop() {
			tr := tensor.NewTrace()
			zl := tr.Leaf(zs)
			loss := tensor.SoftmaxCrossEntropy(zl, ls)
			g := tensor.Backward(tr, []*tensor.Tensor{loss}, []*tensor.Tensor{ones}, []*tensor.Tensor{zl}, false)
			tensor.Donate(g[0])
		}
	})
	z := srtRandn(1, 1024, 1000)
	labels := srtLabels(1, 1000, 1024)
	b.Run("forward/1024x1000", func(b *testing.B) {
		bytes := float64(z.Bytes() + labels.Bytes())
		for b.Loop() {
			tensor.SoftmaxCrossEntropy(z, labels)
		}
		srtReport(b, bytes)
	})
	b.Run("forward+backward/1024x1000", func(b *testing.B) {
		// Read logits, write and re-read the softmax, write the gradient.
		bytes := float64(4*z.Bytes() + labels.Bytes())
		ones := tensor.Ones(tensor.Float32, 1024)
		for b.Loop() {
			tr := tensor.NewTrace()
			zl := tr.Leaf(z)
			loss := tensor.SoftmaxCrossEntropy(zl, labels)
			tensor.Backward(tr, []*tensor.Tensor{loss}, []*tensor.Tensor{ones}, []*tensor.Tensor{zl}, false)
		}
		srtReport(b, bytes)
	})
}
