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

func TestEmbeddingForward(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 5, 3, nn.EmbeddingOptions{})
	require.Equal(t, []int{5, 3}, e.W.Shape())
	// Equinox's default: a standard normal table.
	assert.Equal(t, tensor.Normal(tensor.NewKey(0), 5, 3).Float32s(), e.W.Float32s())
	ids := tensor.FromInt32([]int32{4, 0, 4, 2, 1, 3}, 2, 3)
	y := e.Forward(ids)
	require.Equal(t, []int{2, 3, 3}, y.Shape())
	w := toMat(e.W)
	var want []float64
	for _, id := range ids.Ints() {
		want = append(want, w[id]...)
	}
	assert.Equal(t, want, y.Float64s())
	assert.Equal(t, y.Float32s(), e.Call(ids, tensor.NewKey(1)).Float32s())
	// A scalar id gives one vector.
	assert.Equal(t, w[2], e.Forward(tensor.ScalarInt(2)).Float64s())
}

func TestEmbeddingGrad(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 4, 2, nn.EmbeddingOptions{Init: nn.Ones})
	ids := tensor.FromInt32([]int32{1, 3, 1, 1})
	_, g := autodiff.ValueAndGrad(func(e nn.Embedding) *tensor.Tensor { return tensor.Sum(e.Forward(ids)) })(e)
	// Row 1 is used three times, row 3 once, rows 0 and 2 never.
	assert.Equal(t, []float32{0, 0, 3, 3, 0, 0, 1, 1}, g.W.Float32s())
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return nn.Embedding{W: xs[0]}.Forward(ids) }, randn(1, 4, 2))
}

func TestEmbeddingAttend(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 6, 4, nn.EmbeddingOptions{})
	x := randn(1, 2, 3, 4)
	got := e.Attend(x)
	require.Equal(t, []int{2, 3, 6}, got.Shape())
	w := toMat(e.W)
	rows := toMat(tensor.Reshape(x, 6, 4))
	var want []float64
	for _, r := range rows {
		for _, v := range w {
			s := 0.0
			for j := range r {
				s += r[j] * v[j]
			}
			want = append(want, s)
		}
	}
	assert.InDeltaSlice(t, want, got.Float64s(), 1e-5)
	checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return nn.Embedding{W: xs[0]}.Attend(xs[1]) }, e.W, x)
	assert.Equal(t, []int{6}, e.Attend(randn(2, 4)).Shape())
}

func TestEmbeddingPanics(t *testing.T) {
	e := nn.NewEmbedding(tensor.NewKey(0), 5, 3, nn.EmbeddingOptions{})
	requirePanicContains(t, func() { e.Forward(tensor.FromFloat32([]float32{1})) }, "nn.Embedding: ids f32[1]: want int32 ids")
	requirePanicContains(t, func() { e.Forward(tensor.FromInt32([]int32{0, 5}, 1, 2)) }, "nn.Embedding: ids i32[1,2]: id 5 at flat index 1 is outside [0, 5)")
	requirePanicContains(t, func() { e.Forward(tensor.FromInt32([]int32{-1})) }, "id -1 at flat index 0")
	requirePanicContains(t, func() { e.Attend(randn(0, 2, 4)) }, "nn.Embedding.Attend: x f32[2,4], W f32[5,3]: last dim of x must be 3")
	requirePanicContains(t, func() { nn.NewEmbedding(tensor.NewKey(0), -1, 3, nn.EmbeddingOptions{}) }, "nn.NewEmbedding: negative size vocab=-1 dim=3")
}

// TestEmbeddingPadding: PyTorch's padding_idx. NewEmbedding zeroes the
// row (a negative index counts from the end), Forward gives the row as it
// is and no gradient reaches it, in float32 and float64; without Padding
// the zero value is Equinox's layer, every row learnt.
func TestEmbeddingPadding(t *testing.T) {
	for _, idx := range []int{1, -3} { // row 1 of 4 either way
		e := nn.NewEmbedding(tensor.NewKey(2), 4, 2, nn.EmbeddingOptions{Padding: true, PaddingIdx: idx})
		require.Equal(t, 1, e.PaddingIdx, "resolved to [0, vocab)")
		w := toMat(e.W)
		require.Equal(t, []float64{0, 0}, w[1], "padding row starts at zeros")
		want := toMat(nn.NewEmbedding(tensor.NewKey(2), 4, 2, nn.EmbeddingOptions{}).W)
		assert.Equal(t, want[0], w[0], "the other rows are the default draw")
		assert.Equal(t, want[3], w[3])
	}
	ids := tensor.FromInt32([]int32{1, 3, 1, 0})
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		w := tensor.Convert(tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2), dt)
		e := nn.Embedding{W: w, Padding: true, PaddingIdx: 1}
		y, g := autodiff.ValueAndGrad(func(e nn.Embedding) *tensor.Tensor {
			return tensor.Sum(tensor.Mul(e.Forward(ids), tensor.Convert(tensor.FromFloat32([]float32{1, 2}), dt)))
		})(e)
		// Rows 1, 3, 1, 0: (3+8)+(7+16)+(3+8)+(1+4), the nonzero padding row included.
		assert.InDelta(t, 50.0, y.Float64s()[0], 0, "%v", dt)
		assert.Equal(t, []float64{1, 2, 0, 0, 0, 0, 1, 2}, g.W.Float64s(), "%v: no gradient to row 1", dt)
		_, g = autodiff.ValueAndGrad(func(e nn.Embedding) *tensor.Tensor { return tensor.Sum(e.Forward(ids)) })(nn.Embedding{W: w})
		assert.Equal(t, []float64{1, 1, 2, 2, 0, 0, 1, 1}, g.W.Float64s(), "%v: without Padding row 1 learns", dt)
	}
}

// TestEmbeddingMaxNorm: rows above MaxNorm come out rescaled to it (by
// MaxNorm/(norm + 1e-7)), the gradient is the plain lookup's, Renorm
// rescales the looked-up rows of the table and leaves the others.
func TestEmbeddingMaxNorm(t *testing.T) {
	for _, dt := range []tensor.DType{tensor.Float32, tensor.Float64} {
		// Row norms: 5, 0.5, 10 (p=2).
		w := tensor.Convert(tensor.FromFloat32([]float32{3, 4, 0.3, 0.4, 6, 8}, 3, 2), dt)
		e := nn.Embedding{W: w, MaxNorm: 2}
		ids := tensor.FromInt32([]int32{0, 1, 0})
		y, g := autodiff.ValueAndGrad(func(e nn.Embedding) *tensor.Tensor { return tensor.Sum(e.Forward(ids)) })(e)
		s := 2 / (5 + 1e-7)
		assert.InDelta(t, 2*7*s+0.7, y.Float64s()[0], 1e-6, "%v", dt)
		assert.Equal(t, []float64{2, 2, 1, 1, 0, 0}, g.W.Float64s(), "%v: the plain lookup's gradient", dt)
		r := e.Renorm(ids).W.Float64s()
		assert.InDeltaSlice(t, []float64{3 * s, 4 * s, 0.3, 0.4, 6, 8}, r, 1e-6, "%v: row 2 is not looked up", dt)
		// The 1-norm and the largest magnitude.
		got := nn.Embedding{W: w, MaxNorm: 2, NormType: 1}.Forward(ids).Float64s()
		assert.InDeltaSlice(t, []float64{3 * 2 / 7.0, 4 * 2 / 7.0}, got[:2], 1e-6, "%v", dt)
		got = nn.Embedding{W: w, MaxNorm: 2, NormType: math.Inf(1)}.Forward(ids).Float64s()
		assert.InDeltaSlice(t, []float64{1.5, 2}, got[:2], 1e-6, "%v", dt)
	}
	e := nn.Embedding{W: tensor.Ones(tensor.Float32, 2, 2)}
	assert.Same(t, e.W, e.Renorm(tensor.FromInt32([]int32{0})).W, "without MaxNorm Renorm is the identity")
}

func TestEmbeddingOptionPanics(t *testing.T) {
	k := tensor.NewKey(0)
	w := tensor.Ones(tensor.Float32, 4, 2)
	ids := tensor.FromInt32([]int32{0, 1}, 2)
	for _, c := range []struct {
		name string
		f    func()
		want string
	}{
		{"padding too large", func() { nn.NewEmbedding(k, 4, 2, nn.EmbeddingOptions{Padding: true, PaddingIdx: 4}) },
			"nn.NewEmbedding: padding index 4 outside [-4, 4)"},
		{"padding too small", func() { nn.Embedding{W: w, Padding: true, PaddingIdx: -5}.Forward(ids) },
			"nn.Embedding: padding index -5 outside [-4, 4)"},
		{"PaddingIdx without Padding", func() { nn.NewEmbedding(k, 4, 2, nn.EmbeddingOptions{PaddingIdx: 3}) },
			"nn.NewEmbedding: PaddingIdx 3 is set but Padding is off: set Padding to make row 3 the padding row"},
		{"PaddingIdx without Padding at Forward", func() { nn.Embedding{W: w, PaddingIdx: 3}.Forward(ids) },
			"nn.Embedding: PaddingIdx 3 is set but Padding is off"},
		{"int64 ids hint", func() { nn.Embedding{W: w}.Forward(tensor.Zeros(tensor.Int64, 2)) },
			"want int32 ids (convert int64 ids with tensor.AsType(ids, tensor.Int32))"},
		{"negative max norm", func() { nn.NewEmbedding(k, 4, 2, nn.EmbeddingOptions{MaxNorm: -1}) },
			"nn.NewEmbedding: MaxNorm -1 must be >= 0 (0 turns it off)"},
		{"NaN norm type", func() { nn.Embedding{W: w, MaxNorm: 1, NormType: math.NaN()}.Forward(ids) },
			"nn.Embedding: NormType NaN must be > 0 (0 means 2)"},
		{"Renorm float ids", func() { nn.Embedding{W: w, MaxNorm: 1}.Renorm(tensor.Ones(tensor.Float32, 2)) },
			"nn.Embedding.Renorm: ids f32[2]: want int32 ids"},
		{"Renorm id outside", func() { nn.Embedding{W: w, MaxNorm: 1}.Renorm(tensor.FromInt32([]int32{1, 4}, 2)) },
			"nn.Embedding.Renorm: ids i32[2]: id 4 at flat index 1 is outside [0, 4)"},
		{"Renorm nil ids", func() { nn.Embedding{W: w, MaxNorm: 1}.Renorm(nil) }, "nn.Embedding.Renorm"},
	} {
		t.Run(c.name, func(t *testing.T) { requirePanicContains(t, c.f, c.want) })
	}
}
