package autodiff_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// rnn is a small Elman network: h' = tanh(x·Wx + h·Wh + b), y = h'·Wy.
type rnn struct {
	Wx, Wh, B, Wy *tensor.Tensor
}

func newRNN(r *rand.Rand, in, hidden, out int) rnn {
	return rnn{
		Wx: tensor.MulScalar(randT(r, in, hidden), 0.4),
		Wh: tensor.MulScalar(randT(r, hidden, hidden), 0.3),
		B:  tensor.MulScalar(randT(r, hidden), 0.1),
		Wy: tensor.MulScalar(randT(r, hidden, out), 0.5),
	}
}

func (m rnn) cell(h, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
	h = tensor.Tanh(tensor.Add(tensor.Add(tensor.MatMul(x, m.Wx), tensor.MatMul(h, m.Wh)), m.B))
	return h, tensor.MatMul(h, m.Wy)
}

// loop is the reference: the same recurrence as an ordinary Go loop over
// xs[t] taken with Slice.
func (m rnn) loop(h, xs *tensor.Tensor, reverse bool) (*tensor.Tensor, *tensor.Tensor) {
	n := xs.Dim(0)
	ys := make([]*tensor.Tensor, n)
	for j := range n {
		t := j
		if reverse {
			t = n - 1 - j
		}
		x := tensor.Squeeze(tensor.SliceAxis(xs, 0, t, t+1), 0)
		h, ys[t] = m.cell(h, x)
	}
	return h, tensor.Stack(0, ys...)
}

type rnnParams struct {
	M  rnn
	H0 *tensor.Tensor
	Xs *tensor.Tensor
}

func scanLoss(opts ...autodiff.ScanOption) func(p rnnParams) *tensor.Tensor {
	return func(p rnnParams) *tensor.Tensor {
		h, ys := autodiff.Scan(p.M.cell, p.H0, p.Xs, opts...)
		return tensor.Add(tensor.Sum(tensor.Square(ys)), tensor.Sum(tensor.Mul(h, h)))
	}
}

func loopLoss(reverse bool) func(p rnnParams) *tensor.Tensor {
	return func(p rnnParams) *tensor.Tensor {
		h, ys := p.M.loop(p.H0, p.Xs, reverse)
		return tensor.Add(tensor.Sum(tensor.Square(ys)), tensor.Sum(tensor.Mul(h, h)))
	}
}

// Scan, with and without remat, in both directions, equals a Go loop: the
// carry, the stacked outputs and the gradients with respect to the
// parameters, the initial carry and xs.
func TestScanEqualsLoop(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	p := rnnParams{M: newRNN(r, 3, 5, 2), H0: randT(r, 4, 5), Xs: randT(r, 11, 4, 3)}
	for _, reverse := range []bool{false, true} {
		wantH, wantYs := p.M.loop(p.H0, p.Xs, reverse)
		wantL, wantG := autodiff.ValueAndGrad(loopLoss(reverse))(p)
		for _, k := range []int{-1, 0, 1, 2, 3, 4, 11, 20} {
			opts := []autodiff.ScanOption{}
			if reverse {
				opts = append(opts, autodiff.ScanReverse())
			}
			if k >= 0 {
				opts = append(opts, autodiff.ScanRemat(k))
			}
			t.Run(fmt.Sprintf("reverse=%v/k=%d", reverse, k), func(t *testing.T) {
				h, ys := autodiff.Scan(p.M.cell, p.H0, p.Xs, opts...)
				assert.Equal(t, []int{11, 4, 2}, ys.Shape())
				requireClose(t, wantH, h, 1e-6)
				requireClose(t, wantYs, ys, 1e-6)
				l, g := autodiff.ValueAndGrad(scanLoss(opts...))(p)
				assert.InDelta(t, wantL.Item(), l.Item(), 1e-4*math.Abs(wantL.Item()))
				require.NoError(t, pytree.Diff(wantG, g, 1e-5, 1e-5))
			})
		}
	}
}

func requireClose(t *testing.T, want, got *tensor.Tensor, tol float64) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape())
	w, g := want.Float64s(), got.Float64s()
	for i := range w {
		require.InDelta(t, w[i], g[i], tol*(1+math.Abs(w[i])), "element %d", i)
	}
}

// The gradient of a scan agrees with finite differences (CheckGrad), with
// remat too.
func TestScanCheckGrad(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	m := newRNN(r, 2, 3, 1)
	xs := randT(r, 6, 2, 2)
	for _, opts := range [][]autodiff.ScanOption{nil, {autodiff.ScanRemat(2)}, {autodiff.ScanRemat(0), autodiff.ScanReverse()}} {
		f := func(in []*tensor.Tensor) *tensor.Tensor {
			mm := m
			mm.Wh = in[1]
			h, ys := autodiff.Scan(mm.cell, in[0], in[2], opts...)
			return tensor.Add(tensor.Sum(ys), tensor.Sum(h))
		}
		require.NoError(t, autodiff.CheckGrad(f, []*tensor.Tensor{randT(r, 2, 3), m.Wh, xs}, autodiff.CheckOptions{}))
	}
}

// Pytrees: a struct carry with an integer counter, xs as a slice of two
// tensors, ys as a struct with a nil leaf; and a loop with no xs at all.
func TestScanPytrees(t *testing.T) {
	type carry struct {
		Sum   *tensor.Tensor
		Count *tensor.Tensor // int32
	}
	type out struct {
		Prod *tensor.Tensor
		None *tensor.Tensor // always nil
	}
	a := tensor.FromFloat32([]float32{1, 2, 3, 4}, 4, 1)
	b := tensor.FromFloat32([]float32{10, 20, 30, 40}, 4, 1)
	f := func(c carry, x []*tensor.Tensor) (carry, out) {
		return carry{Sum: tensor.Add(c.Sum, x[0]), Count: tensor.Add(c.Count, tensor.ScalarInt(1))},
			out{Prod: tensor.Mul(c.Sum, x[1])}
	}
	init := carry{Sum: tensor.Zeros(tensor.Float32, 1), Count: tensor.ScalarInt(0)}
	for _, opts := range [][]autodiff.ScanOption{nil, {autodiff.ScanRemat(3)}} {
		c, ys := autodiff.Scan(f, init, []*tensor.Tensor{a, b}, opts...)
		assert.Equal(t, []float32{10}, c.Sum.Float32s())
		assert.Equal(t, []int32{4}, c.Count.Int32s())
		// Prod[t] = (1+...+t)·b[t]: 0, 10·1, 20·3, 30·6... with the
		// running sum before step t.
		assert.Equal(t, []float32{0, 20, 90, 240}, ys.Prod.Float32s())
		assert.Nil(t, ys.None)
	}

	// No xs: the length comes from ScanLength; the reverse run sees the
	// same carry sequence.
	double := func(c *tensor.Tensor, _ struct{}) (*tensor.Tensor, *tensor.Tensor) {
		return tensor.MulScalar(c, 2), c
	}
	for _, opts := range [][]autodiff.ScanOption{{autodiff.ScanLength(5)}, {autodiff.ScanLength(5), autodiff.ScanRemat(2)}} {
		c, ys := autodiff.Scan(double, tensor.Scalar(1), struct{}{}, opts...)
		assert.Equal(t, float64(32), c.Item())
		assert.Equal(t, []float32{1, 2, 4, 8, 16}, ys.Float32s())
		_, rys := autodiff.Scan(double, tensor.Scalar(1), struct{}{}, append(opts, autodiff.ScanReverse())...)
		assert.Equal(t, []float32{16, 8, 4, 2, 1}, rys.Float32s())
	}
}

// A loop of no steps returns init and ys with a leading dimension of 0.
func TestScanEmpty(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	m := newRNN(r, 3, 5, 2)
	h0 := randT(r, 4, 5)
	for _, opts := range [][]autodiff.ScanOption{nil, {autodiff.ScanRemat(0)}} {
		h, ys := autodiff.Scan(m.cell, h0, tensor.Zeros(tensor.Float32, 0, 4, 3), opts...)
		assert.Same(t, h0, h)
		assert.Equal(t, []int{0, 4, 2}, ys.Shape())
	}
	c, ys := autodiff.Scan(func(c *tensor.Tensor, _ struct{}) (*tensor.Tensor, struct{}) { return c, struct{}{} },
		tensor.Scalar(3), struct{}{}, autodiff.ScanLength(0))
	assert.Equal(t, float64(3), c.Item())
	assert.Equal(t, struct{}{}, ys)
}

// Mistakes panic naming the step and the leaf.
func TestScanPanics(t *testing.T) {
	id := func(c *tensor.Tensor, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) { return c, x }
	type pair struct{ A, B *tensor.Tensor }
	cases := []struct {
		name string
		run  func()
		want string
	}{
		{"no length", func() {
			autodiff.Scan(func(c *tensor.Tensor, _ struct{}) (*tensor.Tensor, struct{}) { return c, struct{}{} },
				tensor.Scalar(0), struct{}{})
		}, "autodiff.Scan: xs has no tensor leaves; give the number of steps with ScanLength"},
		{"lengths differ", func() {
			autodiff.Scan(func(c *tensor.Tensor, p pair) (*tensor.Tensor, struct{}) { return c, struct{}{} },
				tensor.Scalar(0), pair{tensor.Zeros(tensor.Float32, 3), tensor.Zeros(tensor.Float32, 4)})
		}, "autodiff.Scan: xs leaf B is f32[4]; its leading dimension 4 differs from 3 (the other leaves)"},
		{"length option", func() {
			autodiff.Scan(id, tensor.Scalar(0), tensor.Zeros(tensor.Float32, 3), autodiff.ScanLength(4))
		}, "autodiff.Scan: xs leaf 0 is f32[3]; its leading dimension 3 differs from 4 (ScanLength)"},
		{"scalar xs", func() { autodiff.Scan(id, tensor.Scalar(0), tensor.Scalar(1)) },
			"autodiff.Scan: xs leaf 0 is a scalar f32[]; every leaf needs a leading axis to scan over"},
		{"carry shape", func() {
			autodiff.Scan(func(c, x *tensor.Tensor) (*tensor.Tensor, struct{}) {
				return tensor.Concat(0, c, x), struct{}{}
			}, tensor.Zeros(tensor.Float32, 1), tensor.Zeros(tensor.Float32, 3, 1))
		}, "autodiff.Scan: step 0: carry leaf 0 is f32[2]; init has f32[1]"},
		{"carry dtype", func() {
			autodiff.Scan(func(c pair, x *tensor.Tensor) (pair, struct{}) {
				return pair{c.A, tensor.AsType(c.B, tensor.Int32)}, struct{}{}
			}, pair{tensor.Scalar(0), tensor.Scalar(0)}, tensor.Zeros(tensor.Float32, 3), autodiff.ScanRemat(2))
		}, "autodiff.Scan: step 0: carry leaf B is i32[]; init has f32[]"},
		{"ys shape", func() {
			autodiff.Scan(func(c, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
				if x.Item() == 2 {
					return c, tensor.Reshape(c, 1)
				}
				return c, c
			}, tensor.Scalar(0), tensor.FromFloat32([]float32{1, 1, 2}))
		}, "autodiff.Scan: step 2: ys leaf 0 is f32[1]; earlier steps returned f32[]"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.PanicsWithValue(t, c.want, c.run)
		})
	}
}

// lcell is one step of a small cell whose memory use the tests measure.
func lcell(w *tensor.Tensor) func(h, x *tensor.Tensor) (*tensor.Tensor, struct{}) {
	return func(h, x *tensor.Tensor) (*tensor.Tensor, struct{}) {
		return tensor.Tanh(tensor.Add(tensor.MatMul(h, w), x)), struct{}{}
	}
}

// With remat, what the backward pass keeps after the forward pass of a
// 10 000-step scan grows as √T: about 2√T carries (the segments' first
// carries, and the outputs of the segment before), against T steps of
// intermediate values without it. Residuals counts the kept tensors.
func TestScanRematMemoryGrowsAsSqrtT(t *testing.T) {
	const hidden = 32
	r := rand.New(rand.NewPCG(7, 8))
	w := tensor.MulScalar(randT(r, hidden, hidden), 0.1)
	carry := int64(hidden * 4)
	for _, n := range []int{100, 2500, 10000} {
		xs := tensor.MulScalar(randT(r, n, hidden), 0.1) // data: not traced
		loss := func(opts ...autodiff.ScanOption) func(*tensor.Tensor) *tensor.Tensor {
			return func(h *tensor.Tensor) *tensor.Tensor {
				h, _ = autodiff.Scan(lcell(w), h, xs, opts...)
				return tensor.Sum(h)
			}
		}
		h0 := tensor.Zeros(tensor.Float32, hidden)
		remat := autodiff.Residuals(loss(autodiff.ScanRemat(0)), h0).Activations()
		sq := int64(math.Ceil(math.Sqrt(float64(n))))
		assert.LessOrEqual(t, int64(remat.Bytes), 2*sq*carry, "T=%d", n)
		if n <= 2500 {
			plain := autodiff.Residuals(loss(), h0).Activations()
			assert.GreaterOrEqual(t, int64(plain.Bytes), int64(n)*carry, "T=%d", n)
		}
	}
	// And the gradient of the long scan is the plain scan's.
	n := 10000
	xs := tensor.MulScalar(randT(r, n, hidden), 0.1)
	f := func(opts ...autodiff.ScanOption) func(*tensor.Tensor) *tensor.Tensor {
		return func(h *tensor.Tensor) *tensor.Tensor {
			h, _ = autodiff.Scan(lcell(w), h, xs, opts...)
			return tensor.Sum(h)
		}
	}
	h0 := randT(r, hidden)
	want := autodiff.Grad(f())(h0)
	got := autodiff.Grad(f(autodiff.ScanRemat(0)))(h0)
	requireClose(t, want, got, 1e-6)
}

// What the forward pass of a 4096-step scan leaves alive for backward, as
// the collector sees it (Residuals counts the values the nodes save; this
// counts everything reachable: node records, compiled programs, values a
// placeholder might pin): with remat a small fraction of the plain scan's,
// which holds every step. heapProbe (bench_scan_test.go) does the
// measuring; BenchmarkScanRemat reports the whole gradient's peak.
func TestScanRematLiveHeap(t *testing.T) {
	const n, hidden = 4096, 32
	r := rand.New(rand.NewPCG(9, 10))
	w := tensor.MulScalar(randT(r, hidden, hidden), 0.1)
	xs := tensor.MulScalar(randT(r, n, 4, hidden), 0.1)
	live := func(opts ...autodiff.ScanOption) uint64 {
		f := func(p struct{ W, H *tensor.Tensor }) *tensor.Tensor {
			h, _ := autodiff.Scan(lcell(p.W), p.H, xs, opts...)
			return tensor.Sum(h)
		}
		hp := newHeapProbe(1)
		y, pull := autodiff.VJP(f, struct{ W, H *tensor.Tensor }{w, tensor.Zeros(tensor.Float32, 4, hidden)})
		hp.sample()
		g := pull(tensor.OnesLike(y))
		require.Equal(t, []int{hidden, hidden}, g.W.Shape())
		return hp.peak
	}
	plain, remat := live(), live(autodiff.ScanRemat(0))
	step := uint64(4 * hidden * 4) // one carry
	assert.Greater(t, plain, n*step, "the plain scan keeps every step")
	assert.Less(t, remat, plain/20, "remat keeps %d bytes, the plain scan %d", remat, plain)
}
