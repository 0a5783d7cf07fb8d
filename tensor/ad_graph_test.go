package tensor_test

import (
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// fakeEnv is a device environment for testing Local marks: PsumMask
// multiplies by the product of the sizes of the summed axes (the sum over
// that many devices holding the same value) and records its calls.
type fakeEnv struct {
	names []string
	sizes []float32

	mu     sync.Mutex
	locals map[uint64]*tensor.Local
	psums  []uint64
}

func newFakeEnv(names []string, sizes []float32) *fakeEnv {
	return &fakeEnv{names: names, sizes: sizes, locals: map[uint64]*tensor.Local{}}
}

func (e *fakeEnv) AxisNames() []string { return e.names }

func (e *fakeEnv) Local(mask uint64) *tensor.Local {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.locals[mask]; ok {
		return l
	}
	l := &tensor.Local{Env: e, Mask: mask}
	e.locals[mask] = l
	return l
}

func (e *fakeEnv) PsumMask(x *tensor.Tensor, mask uint64) *tensor.Tensor {
	e.mu.Lock()
	e.psums = append(e.psums, mask)
	e.mu.Unlock()
	f := float32(1)
	for i := range e.names {
		if mask&(1<<i) != 0 {
			f *= e.sizes[i]
		}
	}
	y := tensor.MulScalar(x, f)
	if y.IsTraced() { // a real psum would also narrow the mark
		return y
	}
	var m uint64
	if x.Local() != nil {
		m = x.Local().Mask
	}
	return tensor.WithLocal(y, e.Local(m&^mask))
}

// traceLeaves returns a new trace and leaves for xs.
func traceLeaves(xs ...*tensor.Tensor) (*tensor.Trace, []*tensor.Tensor) {
	tr := tensor.NewTrace()
	out := make([]*tensor.Tensor, len(xs))
	for i, x := range xs {
		out[i] = tr.Leaf(x)
	}
	return tr, out
}

// backward1 runs Backward from a single output with a ones cotangent.
func backward1(tr *tensor.Trace, y *tensor.Tensor, wrt []*tensor.Tensor, retain bool) []*tensor.Tensor {
	return tensor.Backward(tr, ts(y), ts(tensor.OnesLike(y)), wrt, retain)
}

func TestBackwardAccumulatesMultipleUses(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, -2, 3})
	tr, l := traceLeaves(x)
	// y = x·x + x + x·x·x: dy/dx = 2x + 1 + 3x²
	y := tensor.Add(tensor.Add(tensor.Mul(l[0], l[0]), l[0]), tensor.Mul(tensor.Mul(l[0], l[0]), l[0]))
	g := backward1(tr, y, l, false)
	requireExact(t, tensor.Float32, []int{3}, []float64{6, 9, 34}, g[0])
	// The same value used through two branches that rejoin.
	tr, l = traceLeaves(x)
	a := tensor.Exp(l[0])
	y = tensor.Sum(tensor.Mul(a, tensor.Add(a, l[0])))
	g = backward1(tr, y, l, false)
	// d/dx e^x(e^x + x) = 2e^{2x} + e^x(1+x)
	want := make([]float64, 3)
	for i, v := range x.Float64s() {
		want[i] = 2*math.Exp(2*v) + math.Exp(v)*(1+v)
	}
	requireClose(t, want, g[0], 1e-6, 1e-6)
	// The output itself in wrt, and several outputs with their own seeds.
	tr, l = traceLeaves(x)
	y1 := tensor.MulScalar(l[0], 2)
	y2 := tensor.MulScalar(l[0], 3)
	g = tensor.Backward(tr, ts(y1, y2, y1), ts(tensor.OnesLike(y1), tensor.FullLike(y2, 2), tensor.FullLike(y1, 10)), ts(l[0], y1), true)
	requireExact(t, tensor.Float32, []int{3}, []float64{28, 28, 28}, g[0])
	requireExact(t, tensor.Float32, []int{3}, []float64{11, 11, 11}, g[1])
}

func TestBackwardUnusedAndUntraced(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2})
	z := tensor.FromFloat32([]float32{5, 6, 7}, 3, 1)
	tr, l := traceLeaves(x, z)
	y := tensor.Square(l[0])
	free := tensor.Zeros(tensor.Int32, 2)
	g := tensor.Backward(tr, ts(y), ts(tensor.OnesLike(y)), ts(l[0], l[1], z, free), false)
	requireExact(t, tensor.Float32, []int{2}, []float64{2, 4}, g[0])
	requireExact(t, tensor.Float32, []int{3, 1}, []float64{0, 0, 0}, g[1])
	requireExact(t, tensor.Float32, []int{3, 1}, []float64{0, 0, 0}, g[2])
	requireExact(t, tensor.Int32, []int{2}, []float64{0, 0}, g[3])
	// An output not traced by the trace, or a nil cotangent: zero gradients.
	tr2, l2 := traceLeaves(x)
	g = tensor.Backward(tr2, ts(tensor.Square(x)), ts(tensor.OnesLike(x)), l2, false)
	requireExact(t, tensor.Float32, []int{2}, []float64{0, 0}, g[0])
	g = tensor.Backward(tr2, ts(tensor.Square(l2[0])), []*tensor.Tensor{nil}, l2, false)
	requireExact(t, tensor.Float32, []int{2}, []float64{0, 0}, g[0])
	// A leaf as its own output.
	tr3, l3 := traceLeaves(x)
	g = tensor.Backward(tr3, l3, ts(tensor.FromFloat32([]float32{3, 4})), l3, false)
	requireExact(t, tensor.Float32, []int{2}, []float64{3, 4}, g[0])
}

func TestBackwardRetain(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2, 3})
	tr, l := traceLeaves(x)
	y := tensor.Sum(tensor.Mul(tensor.Exp(l[0]), l[0]))
	g1 := backward1(tr, y, l, true)
	g2 := backward1(tr, y, l, true)
	assert.Equal(t, g1[0].Float32s(), g2[0].Float32s())
	g3 := backward1(tr, y, l, false)
	assert.Equal(t, g1[0].Float32s(), g3[0].Float32s())
	requirePanic(t, `tensor.Backward: the graph through op "reduce_sum" was already used by a backward pass that did not retain it`,
		func() { backward1(tr, y, l, false) })
	requirePanic(t, `tensor.Backward: the graph through op "reduce_sum" was already used by a backward pass that did not retain it`,
		func() { backward1(tr, y, l, true) })

	tr, l = traceLeaves(x)
	m := tensor.Mul(l[0], l[0])
	backward1(tr, m, l, false)
	// A new op on top of a freed graph can't be differentiated through it.
	y = tensor.Neg(m)
	requirePanic(t, `tensor.Backward: the graph through op "mul" was already used by a backward pass that did not retain it`,
		func() { backward1(tr, y, l, false) })
}

func TestStopGradient(t *testing.T) {
	x := tensor.FromFloat32([]float32{2, 3})
	tr, l := traceLeaves(x)
	// y = x · sg(x): dy/dx = sg(x) = x, not 2x.
	y := tensor.Mul(l[0], tensor.StopGradient(l[0]))
	g := backward1(tr, y, l, false)
	requireExact(t, tensor.Float32, []int{2}, []float64{2, 3}, g[0])
	// StopGradient of an untraced tensor is that tensor; of a traced one,
	// the same value with no node, under every trace.
	assert.Same(t, x, tensor.StopGradient(x))
	tr1, l1 := traceLeaves(x)
	tr2 := tensor.NewTrace()
	l2 := tr2.Leaf(tensor.Exp(l1[0]))
	s := tensor.StopGradient(l2)
	assert.False(t, s.IsTraced())
	assert.False(t, s.TracedBy(tr1))
	assert.False(t, s.TracedBy(tr2))
	requireClose(t, tensor.Exp(x).Float64s(), s, 0, 0)
	// A gradient that only flows through StopGradient is zero.
	g = backward1(tr1, tensor.StopGradient(tensor.Exp(l1[0])), l1, false)
	requireExact(t, tensor.Float32, []int{2}, []float64{0, 0}, g[0])
}

func TestNamedAndProducer(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	tr, l := traceLeaves(x, tensor.FromFloat32([]float32{1, 0, 0, 1}, 2, 2))
	h := tensor.Named(tensor.MatMul(l[0], l[1]), "hidden")
	assert.Equal(t, x.Float32s(), h.Float32s())
	info, ok := h.Producer()
	require.True(t, ok)
	assert.Equal(t, "hidden", info.Label)
	assert.Equal(t, "name", info.Op.Name)
	assert.Equal(t, "hidden", info.Params)
	g := backward1(tr, tensor.Square(h), l, false)
	requireExact(t, tensor.Float32, []int{2, 2}, []float64{2, 4, 6, 8}, g[0])

	_, ok = l[0].Producer()
	assert.False(t, ok, "a leaf has no producer")
	_, ok = x.Producer()
	assert.False(t, ok, "an untraced tensor has no producer")
	// Untraced Named is the identity and shares storage.
	n := tensor.Named(x, "n")
	assert.True(t, sharesStorage(x, n))
	assert.False(t, n.IsTraced())

	tr, l = traceLeaves(x, x)
	labels := map[string]*tensor.Tensor{
		"add":         tensor.Add(l[0], l[1]),
		"mul":         tensor.Mul(l[0], l[1]),
		"div":         tensor.Div(l[0], l[1]),
		"maximum":     tensor.Maximum(l[0], l[1]),
		"pow":         tensor.Pow(l[0], l[1]),
		"exp":         tensor.Exp(l[0]),
		"neg":         tensor.Neg(l[0]),
		"gelu":        tensor.Gelu(l[0]),
		"gelu_exact":  tensor.GeluExact(l[0]),
		"clamp":       tensor.Clamp(l[0], 0, 1),
		"matmul":      tensor.MatMul(l[0], l[1]),
		"reduce_sum":  tensor.Sum(l[0], 0),
		"reduce_max":  tensor.Max(l[0]),
		"reduce_min":  tensor.MinKeep(l[0], 1),
		"reshape":     tensor.Reshape(l[0], 4),
		"broadcast":   tensor.BroadcastTo(l[0], 3, 2, 2),
		"transpose":   tensor.T(l[0]),
		"where":       tensor.Where(tensor.Greater(x, tensor.Scalar(2)), l[0], l[1]),
		"my-activity": tensor.Named(l[0], "my-activity"),
	}
	for want, y := range labels {
		info, ok := y.Producer()
		require.True(t, ok, want)
		assert.Equal(t, want, info.Label)
		assert.True(t, y.TracedBy(tr), want)
	}
	info, _ = labels["transpose"].Producer()
	assert.Equal(t, []int{1, 0}, info.Params)
}

// d²/dx² x³ = 6x, d²/dx² e^x·x = e^x(2+x), with explicitly nested traces.
func TestGradOfGrad(t *testing.T) {
	x := tensor.FromFloat32([]float32{-1.5, 0.5, 2})
	cases := []struct {
		name   string
		f      func(x *tensor.Tensor) *tensor.Tensor
		d1, d2 func(v float64) float64
	}{
		{"x^3", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(tensor.Mul(x, x), x) },
			func(v float64) float64 { return 3 * v * v }, func(v float64) float64 { return 6 * v }},
		{"exp(x)*x", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(tensor.Exp(x), x) },
			func(v float64) float64 { return math.Exp(v) * (1 + v) }, func(v float64) float64 { return math.Exp(v) * (2 + v) }},
		{"1/x", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Div(tensor.Scalar(1), x) },
			func(v float64) float64 { return -1 / (v * v) }, func(v float64) float64 { return 2 / (v * v * v) }},
		{"tanh", tensor.Tanh,
			func(v float64) float64 { return 1 - math.Tanh(v)*math.Tanh(v) },
			func(v float64) float64 { return -2 * math.Tanh(v) * (1 - math.Tanh(v)*math.Tanh(v)) }},
		{"sqrt(x^2+1)", func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sqrt(tensor.AddScalar(tensor.Square(x), 1)) },
			func(v float64) float64 { return v / math.Sqrt(v*v+1) }, func(v float64) float64 { return math.Pow(v*v+1, -1.5) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			outer := tensor.NewTrace()
			x1 := outer.Leaf(x)
			inner := tensor.NewTrace()
			x2 := inner.Leaf(x1)
			require.True(t, x2.TracedBy(inner))
			require.True(t, x2.TracedBy(outer))
			y := c.f(x2)
			g := backward1(inner, y, ts(x2), false)[0]
			require.True(t, g.TracedBy(outer), "the first derivative is traced by the outer trace")
			require.False(t, g.TracedBy(inner))
			gg := backward1(outer, g, ts(x1), false)[0]
			w1, w2 := make([]float64, 3), make([]float64, 3)
			for i, v := range x.Float64s() {
				w1[i], w2[i] = c.d1(v), c.d2(v)
			}
			requireClose(t, w1, g, 1e-6, 1e-5)
			requireClose(t, w2, gg, 1e-6, 1e-5)
		})
	}
	// Third derivative of x^4 through three traces: 24x.
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Square(tensor.Square(xs[0])) }
	g3 := grad(gradOf(gradOf(f, 0), 0), ts(x))[0]
	requireClose(t, []float64{-36, 12, 48}, g3, 1e-5, 1e-5)
}

func TestLeafPanics(t *testing.T) {
	x := tensor.FromFloat32([]float32{1})
	outer := tensor.NewTrace()
	inner := tensor.NewTrace()
	li := inner.Leaf(x)
	lo := outer.Leaf(x)
	requirePanic(t, "Trace.Leaf: f32[1] is already traced by this trace", func() { outer.Leaf(lo) })
	requirePanic(t, "Trace.Leaf: f32[1] is traced by an inner trace", func() { outer.Leaf(li) })
	// Leaf of a value traced by an outer trace is fine.
	assert.True(t, inner.Leaf(lo).TracedBy(outer))
}

// Leaves traces each value as Leaf does: independent leaves (the same
// value used twice is two variables), each with its own gradient, and the
// panics of Leaf.
func TestLeaves(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2}, 2)
	y := tensor.FromFloat32([]float32{3}, 1)
	tr := tensor.NewTrace()
	ls := tr.Leaves(x, y, x)
	require.Len(t, ls, 3)
	for i, want := range []*tensor.Tensor{x, y, x} {
		require.True(t, ls[i].TracedBy(tr))
		assert.Same(t, want, tr.Primal(ls[i]))
	}
	// f = 2·Σx₀ + 3·Σy·Σx₀ + 5·Σx₂: df/dx₀ = 2 + 3·Σy, df/dy = 3·Σx₀, df/dx₂ = 5.
	sx0, sy := tensor.Sum(ls[0]), tensor.Sum(ls[1])
	f := tensor.Add(tensor.Add(tensor.MulScalar(sx0, 2), tensor.MulScalar(tensor.Mul(sy, sx0), 3)), tensor.MulScalar(tensor.Sum(ls[2]), 5))
	g := tensor.Backward(tr, []*tensor.Tensor{f}, []*tensor.Tensor{tensor.OnesLike(f)}, ls, false)
	assert.Equal(t, []float32{11, 11}, g[0].Float32s())
	assert.Equal(t, []float32{9}, g[1].Float32s())
	assert.Equal(t, []float32{5, 5}, g[2].Float32s())
	requirePanic(t, "Trace.Leaf: f32[2] is already traced by this trace", func() { tr.Leaves(y, ls[0]) })
}

// logOp is an identity primitive whose VJP records its name, to observe the
// order of the backward pass.
func logOp(name string, mu *sync.Mutex, log *[]string) *tensor.Op {
	return &tensor.Op{
		Name: name,
		Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor { return tensor.MulScalar(in[0], 1) },
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			mu.Lock()
			*log = append(*log, name)
			mu.Unlock()
			return []*tensor.Tensor{g}
		},
	}
}

func TestBackwardDeterministicOrder(t *testing.T) {
	var mu sync.Mutex
	for rep := 0; rep < 20; rep++ {
		var log []string
		op := func(name string, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Apply(logOp(name, &mu, &log), nil, x)
		}
		tr, l := traceLeaves(tensor.FromFloat32([]float32{1, 2}))
		// Branches interleaved so that graph order differs from record
		// order: a1 b1 a2 c1 b2 a3, then add, d1, add, add.
		a1 := op("a1", l[0])
		b1 := op("b1", l[0])
		a2 := op("a2", a1)
		c1 := op("c1", l[0])
		b2 := op("b2", b1)
		a3 := op("a3", a2)
		y := tensor.Add(tensor.Add(b2, c1), tensor.Add(a3, op("d1", c1)))
		g := backward1(tr, y, l, false)
		requireExact(t, tensor.Float32, []int{2}, []float64{4, 4}, g[0])
		require.Equal(t, []string{"d1", "a3", "b2", "c1", "a2", "b1", "a1"}, log, "VJPs run in the reverse of record order")
	}
}

func TestBackwardPanics(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2})
	tr, l := traceLeaves(x)
	y := tensor.Square(l[0])
	requirePanic(t, "tensor.Backward: 1 outputs but 2 cotangents", func() { tensor.Backward(tr, ts(y), ts(x, x), l, false) })
	requirePanic(t, "tensor.Backward: the seed produced cotangent f32[3] for f32[2]", func() {
		tensor.Backward(tr, ts(y), ts(tensor.Zeros(tensor.Float32, 3)), l, true)
	})
	requirePanic(t, "tensor.Backward: the seed produced cotangent i32[2] for f32[2]", func() {
		tensor.Backward(tr, ts(y), ts(tensor.Zeros(tensor.Int32, 2)), l, true)
	})
	badShape := &tensor.Op{Name: "bad_shape",
		Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor { return tensor.MulScalar(in[0], 1) },
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			return ts(tensor.Zeros(tensor.Float32, 3))
		}}
	requirePanic(t, "tensor.Backward: VJP of bad_shape produced cotangent f32[3] for f32[2]", func() {
		backward1(tr, tensor.Apply(badShape, nil, l[0]), l, true)
	})
	badCount := &tensor.Op{Name: "bad_count",
		Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor { return tensor.MulScalar(in[0], 1) },
		VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			return ts(g, g)
		}}
	requirePanic(t, `tensor.Backward: VJP of "bad_count" returned 2 cotangents for 1 inputs`, func() {
		backward1(tr, tensor.Apply(badCount, nil, l[0]), l, true)
	})
	requirePanic(t, `tensor.Apply: op "bad_count" has no Impl (use ApplyN)`, func() {
		tensor.Apply(&tensor.Op{Name: "bad_count"}, nil, x)
	})
	requirePanic(t, `tensor.ApplyN: op "bad_count" has no ImplN`, func() { tensor.ApplyN(badCount, nil, x) })
	requirePanic(t, `tensor: op "bad_count": nil *Tensor operand`, func() { tensor.Apply(badCount, nil, nil) })
	requirePanic(t, `tensor: op "nil_out" returned nil`, func() {
		tensor.Apply(&tensor.Op{Name: "nil_out", Impl: func([]*tensor.Tensor, any) *tensor.Tensor { return nil }}, nil, x)
	})
}

// A VJP may read only the residuals its Save mask keeps; the others are
// shape-only placeholders whose data cannot be read.
func TestSaveMaskPlaceholders(t *testing.T) {
	var inShape, outShape []int
	var readIn, readOut string
	mk := func(save tensor.SaveMask) *tensor.Op {
		return &tensor.Op{Name: "probe",
			Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor { return tensor.Mul(in[0], in[1]) },
			VJP: func(g *tensor.Tensor, in []*tensor.Tensor, out *tensor.Tensor, _ any) []*tensor.Tensor {
				inShape, outShape = in[0].Shape(), out.Shape()
				readIn = panicMessage(func() { in[0].Float32s() })
				readOut = panicMessage(func() { out.Float64s() })
				return ts(tensor.Mul(g, in[1]), nil)
			},
			Save: save,
		}
	}
	x, w := tensor.FromFloat32([]float32{1, 2, 3}), tensor.FromFloat32([]float32{4, 5, 6})
	tr, l := traceLeaves(x)
	g := backward1(tr, tensor.Apply(mk(tensor.SaveInputs(1)), nil, l[0], w), l, false)
	requireExact(t, tensor.Float32, []int{3}, []float64{4, 5, 6}, g[0])
	assert.Equal(t, []int{3}, inShape)
	assert.Equal(t, []int{3}, outShape)
	assert.Equal(t, "Tensor.Float32s: f32[3] is a shape-only placeholder with no data (an op's VJP may only read the inputs and outputs its Save mask keeps)", readIn)
	assert.Equal(t, "Tensor.Float64s: f32[3] is a shape-only placeholder with no data (an op's VJP may only read the inputs and outputs its Save mask keeps)", readOut)

	tr, l = traceLeaves(x)
	backward1(tr, tensor.Apply(mk(tensor.SaveAllInputs|tensor.SaveOutput), nil, l[0], w), l, false)
	assert.Empty(t, readIn)
	assert.Empty(t, readOut)

	// Every accessor refuses a placeholder.
	tr, l = traceLeaves(x)
	var ph *tensor.Tensor
	grabber := &tensor.Op{Name: "grab",
		Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor { return tensor.MulScalar(in[0], 1) },
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			ph = in[0]
			return ts(g)
		}}
	backward1(tr, tensor.Apply(grabber, nil, l[0]), l, false)
	for name, f := range map[string]func(){
		"Tensor.Float32s":   func() { ph.Float32s() },
		"Tensor.Float64s":   func() { ph.Float64s() },
		"Tensor.RawFloat32": func() { ph.RawFloat32() },
		"Tensor.At":         func() { ph.At(0) },
		"Tensor.Format":     func() { ph.Values() },
	} {
		assert.Contains(t, panicMessage(f), name+": f32[3] is a shape-only placeholder", name)
	}
	assert.Equal(t, []int{3}, ph.Shape())
	assert.Equal(t, "f32[3]", ph.String())
}

// An op with two outputs (ApplyN/VJPN): cotangents for only some outputs.
func TestApplyN(t *testing.T) {
	split := &tensor.Op{Name: "scale2",
		ImplN: func(in []*tensor.Tensor, _ any) ([]*tensor.Tensor, any) {
			return ts(tensor.MulScalar(in[0], 2), tensor.MulScalar(in[0], 3)), "state"
		},
		VJPN: func(gs []*tensor.Tensor, in []*tensor.Tensor, outs []*tensor.Tensor, _ any, state any) []*tensor.Tensor {
			if state != "state" {
				panic("state not passed to VJPN")
			}
			g := tensor.ZerosLike(in[0])
			if gs[0] != nil {
				g = tensor.Add(g, tensor.MulScalar(gs[0], 2))
			}
			if gs[1] != nil {
				g = tensor.Add(g, tensor.MulScalar(gs[1], 3))
			}
			return ts(g)
		},
	}
	x := tensor.FromFloat32([]float32{1, 2})
	outs := tensor.ApplyN(split, nil, x)
	assert.Equal(t, []float32{2, 4}, outs[0].Float32s())
	assert.Equal(t, []float32{3, 6}, outs[1].Float32s())

	tr, l := traceLeaves(x)
	outs = tensor.ApplyN(split, nil, l[0])
	require.True(t, outs[0].TracedBy(tr) && outs[1].TracedBy(tr))
	g := tensor.Backward(tr, ts(outs[1]), ts(tensor.OnesLike(outs[1])), l, true)
	requireExact(t, tensor.Float32, []int{2}, []float64{3, 3}, g[0])
	g = tensor.Backward(tr, ts(tensor.Add(outs[0], outs[1])), ts(tensor.OnesLike(x)), l, true)
	requireExact(t, tensor.Float32, []int{2}, []float64{5, 5}, g[0])
}

// Non-differentiable ops and int results are never traced.
func TestNonDifferentiableResultsUntraced(t *testing.T) {
	tr, l := traceLeaves(tensor.FromFloat32([]float32{1.5, -2}))
	for name, y := range map[string]*tensor.Tensor{
		"Sign":     tensor.Sign(l[0]),
		"Rem":      tensor.Rem(l[0], tensor.Scalar(1)),
		"FloorDiv": tensor.FloorDiv(l[0], tensor.Scalar(1)),
		"ArgMax":   tensor.ArgMax(l[0], 0),
		"Greater":  tensor.Greater(l[0], tensor.Scalar(0)),
		"AsType":   tensor.AsType(l[0], tensor.Int32),
	} {
		assert.False(t, y.IsTraced(), name)
	}
	g := backward1(tr, tensor.Add(tensor.Sign(l[0]), tensor.FloorDiv(l[0], tensor.Scalar(1))), l, false)
	requireExact(t, tensor.Float32, []int{2}, []float64{0, 0}, g[0])
}

// A capture trace replaces values of outer traces by its own leaves.
func TestCaptureTrace(t *testing.T) {
	w := tensor.FromFloat32([]float32{2, 3})
	x := tensor.FromFloat32([]float32{5, 7})
	outer, lw := traceLeaves(w)
	var inner *tensor.Trace
	var captured []*tensor.Tensor
	inner = tensor.NewCaptureTrace(func(v *tensor.Tensor) *tensor.Tensor {
		c := inner.Leaf(v)
		captured = append(captured, c)
		return c
	})
	lx := inner.Leaf(x)
	y := tensor.Mul(lx, lw[0])
	require.Len(t, captured, 1)
	require.True(t, y.TracedBy(inner) && y.TracedBy(outer))
	g := backward1(inner, y, ts(lx, captured[0]), true)
	requireExact(t, tensor.Float32, []int{2}, []float64{2, 3}, g[0])
	requireExact(t, tensor.Float32, []int{2}, []float64{5, 7}, g[1])

	bad := tensor.NewCaptureTrace(func(v *tensor.Tensor) *tensor.Tensor { return tensor.StopGradient(v) })
	lb := bad.Leaf(x)
	requirePanic(t, `tensor: capture of f32[2] for op "mul" did not return a tensor of the capturing trace`, func() { tensor.Mul(lb, lw[0]) })
}

// mlpLoss is a small network for the concurrency test and benchmarks.
func mlpLoss(params []*tensor.Tensor, x, y *tensor.Tensor) *tensor.Tensor {
	h := x
	for i := 0; i+1 < len(params); i += 2 {
		h = tensor.Add(tensor.MatMul(h, params[i]), params[i+1])
		if i+2 < len(params) {
			h = tensor.Gelu(h)
		}
	}
	return tensor.Mean(tensor.Square(tensor.Sub(h, y)))
}

func mlpParams(rng *rand.Rand, sizes ...int) []*tensor.Tensor {
	var ps []*tensor.Tensor
	for i := 0; i+1 < len(sizes); i++ {
		ps = append(ps, tensor.MulScalar(randF32(rng, sizes[i], sizes[i+1]), float32(1/math.Sqrt(float64(sizes[i])))))
		ps = append(ps, tensor.Zeros(tensor.Float32, sizes[i+1]))
	}
	return ps
}

// Several goroutines differentiate at once, each with its own trace, sharing
// the (untraced) parameters. Run with -race.
func TestConcurrentTraces(t *testing.T) {
	rng := newRNG(30)
	params := mlpParams(rng, 8, 16, 4)
	xs := make([]*tensor.Tensor, 8)
	ys := make([]*tensor.Tensor, 8)
	for i := range xs {
		xs[i], ys[i] = randF32(rng, 5, 8), randF32(rng, 5, 4)
	}
	gradsOf := func(i int) [][]float32 {
		tr, l := traceLeaves(params...)
		loss := mlpLoss(l, xs[i], ys[i])
		gs := backward1(tr, loss, l, false)
		out := make([][]float32, len(gs))
		for j, g := range gs {
			out[j] = g.Float32s()
		}
		return out
	}
	want := make([][][]float32, len(xs))
	for i := range xs {
		want[i] = gradsOf(i)
	}
	got := make([][][]float32, len(xs))
	var wg sync.WaitGroup
	for rep := 0; rep < 3; rep++ {
		for i := range xs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				got[i] = gradsOf(i)
			}()
		}
		wg.Wait()
		assert.Equal(t, want, got)
	}
}

// BUG (ad_graph.go): Backward(tr, ys, ...) only looks at the outermost node of
// each y (y.node.trace == tr) and of each wrt. A value traced by an inner
// trace AND by tr (anything computed from an inner Leaf of a tr-traced
// value) is treated as not traced by tr, so its gradient silently comes out
// as zeros. This breaks gradient penalties, where the loss mixes a value of
// the inner computation with the inner gradient: f(x) = x² + (d/dx x²)² =
// 5x², so df/dx = 10x, but Backward returns 0. Backward should walk the
// primal chain (as TracedBy does) to find tr's node for ys and wrt.
func TestBackwardThroughInnerTracedValues(t *testing.T) {
	x := tensor.FromFloat32([]float32{1, 2})
	outer := tensor.NewTrace()
	x1 := outer.Leaf(x)
	inner := tensor.NewTrace()
	x2 := inner.Leaf(x1)
	l := tensor.Square(x2)
	g := backward1(inner, l, ts(x2), true)[0]
	total := tensor.Add(l, tensor.Square(g)) // x² + (2x)² = 5x²
	require.True(t, total.TracedBy(outer))
	d := backward1(outer, total, ts(x1), false)[0]
	requireExact(t, tensor.Float32, []int{2}, []float64{10, 20}, d)

	// The same through a capture trace: the outer trace must see w through
	// the captured leaf.
	w := tensor.FromFloat32([]float32{2, 3})
	outer2, lw := traceLeaves(w)
	var inner2 *tensor.Trace
	inner2 = tensor.NewCaptureTrace(func(v *tensor.Tensor) *tensor.Tensor { return inner2.Leaf(v) })
	y := tensor.Mul(inner2.Leaf(tensor.FromFloat32([]float32{5, 7})), lw[0])
	requireExact(t, tensor.Float32, []int{2}, []float64{5, 7}, backward1(outer2, y, lw, true)[0])
}

func (e *fakeEnv) takePsums() []uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.psums
	e.psums = nil
	return p
}

func TestLocalMarksPropagate(t *testing.T) {
	env := newFakeEnv([]string{"dp", "tp"}, []float32{2, 3})
	dp, tp, both := env.Local(1), env.Local(2), env.Local(3)
	a := tensor.WithLocal(arangeF(6, 2, 3), dp)
	b := tensor.WithLocal(tensor.Ones(tensor.Float32, 2, 3), tp)
	c := arangeF(6, 2, 3) // not a block (a constant closed over)
	assert.Equal(t, "f32[2,3]{dp}", a.String())
	assert.Equal(t, []string{"dp", "tp"}, both.AxisNames())
	assert.Nil(t, (*tensor.Local)(nil).AxisNames())

	tests := []struct {
		name string
		y    *tensor.Tensor
		want *tensor.Local
		str  string
	}{
		{"union", tensor.Add(a, b), both, "f32[2,3]{dp,tp}"},
		{"with constant", tensor.Mul(a, c), dp, "f32[2,3]{dp}"},
		{"constant first", tensor.Sub(c, b), tp, "f32[2,3]{tp}"},
		{"unary", tensor.Exp(a), dp, "f32[2,3]{dp}"},
		{"clamp", tensor.Clamp(b, 0, 1), tp, "f32[2,3]{tp}"},
		{"reduce", tensor.Sum(a), dp, "f32[]{dp}"},
		{"argmax", tensor.ArgMax(a, 1), dp, "i32[2]{dp}"},
		{"reshape", tensor.Reshape(a, 3, 2), dp, "f32[3,2]{dp}"},
		{"transpose", tensor.T(a), dp, "f32[3,2]{dp}"},
		{"broadcast", tensor.BroadcastTo(a, 4, 2, 3), dp, "f32[4,2,3]{dp}"},
		{"matmul", tensor.MatMul(a, tensor.T(b)), both, "f32[2,2]{dp,tp}"},
		{"compare", tensor.Greater(a, tensor.Scalar(1)), dp, "bool[2,3]{dp}"},
		{"where", tensor.Where(tensor.Greater(a, tensor.Scalar(1)), c, b), both, "f32[2,3]{dp,tp}"},
		{"astype", tensor.AsType(b, tensor.Int32), tp, "i32[2,3]{tp}"},
		{"named", tensor.Named(a, "x"), dp, "f32[2,3]{dp}"},
		{"logsumexp", tensor.LogSumExp(tensor.Add(a, b), 1), both, "f32[2]{dp,tp}"},
	}
	for _, tt := range tests {
		assert.Same(t, tt.want, tt.y.Local(), tt.name)
		assert.Equal(t, tt.str, tt.y.String(), tt.name)
	}
	assert.Equal(t, "float32[2,3]{dp,tp}", tensor.Add(a, b).Type())
	// Marks do not change values.
	assert.Equal(t, tensor.Add(arangeF(6, 2, 3), tensor.Ones(tensor.Float32, 2, 3)).Float32s(), tensor.Add(a, b).Float32s())
	// Ops leave the marks of their inputs alone.
	assert.Same(t, dp, a.Local())
	assert.Nil(t, c.Local())

	other := newFakeEnv([]string{"dp"}, []float32{2})
	o := tensor.WithLocal(arangeF(6, 2, 3), other.Local(1))
	requirePanic(t, `tensor: op "add" mixes blocks of different devices or shard.Map calls`, func() { tensor.Add(a, o) })
	tr, l := traceLeaves(a)
	requirePanic(t, "tensor.WithLocal: f32[2,3]{dp} is traced", func() { tensor.WithLocal(l[0], tp) })
	_ = tr
	assert.Nil(t, tensor.WithLocal(a, nil).Local())
}

// An invariant (replicated) value that is traced and used together with a
// varying block gets an implicit pvary, so its cotangent is summed over the
// devices (PsumMask), as in JAX.
func TestImplicitPvary(t *testing.T) {
	env := newFakeEnv([]string{"dp", "tp"}, []float32{2, 3})
	dp, tp := env.Local(1), env.Local(2)
	xv := []float32{1, 2, 3, 4, 5, 6}
	wv := []float32{0.5, -1, 2}

	// Varying data (untraced), invariant traced parameter.
	x := tensor.WithLocal(tensor.FromFloat32(xv, 2, 3), dp)
	tr, l := traceLeaves(tensor.FromFloat32(wv, 3))
	y := tensor.Mul(x, l[0])
	assert.Equal(t, "f32[2,3]{dp}", y.String())
	g := backward1(tr, tensor.Sum(y), l, false)
	// d/dw Σ x·w = Σ_rows x, summed over the 2 dp devices by PsumMask.
	requireExact(t, tensor.Float32, []int{3}, []float64{2 * 5, 2 * 7, 2 * 9}, g[0])
	assert.Equal(t, []uint64{1}, env.takePsums())

	// Both traced, varying over different axes: each cotangent is summed
	// over the axes its operand did not vary over.
	tr, l = traceLeaves(tensor.WithLocal(tensor.FromFloat32(xv, 2, 3), dp), tensor.WithLocal(tensor.FromFloat32(wv, 3), tp))
	y = tensor.Mul(l[0], l[1])
	assert.Equal(t, "f32[2,3]{dp,tp}", y.String())
	g = backward1(tr, tensor.Sum(y), l, false)
	requireExact(t, tensor.Float32, []int{2, 3}, []float64{1.5, -3, 6, 1.5, -3, 6}, g[0]) // 3·w
	requireExact(t, tensor.Float32, []int{3}, []float64{10, 14, 18}, g[1])                // 2·Σx
	assert.ElementsMatch(t, []uint64{2, 1}, env.takePsums())
	assert.Same(t, dp, g[0].Local(), "the cotangent of a {dp} block is a {dp} block")

	// Same marks: no pvary, no psum.
	tr, l = traceLeaves(tensor.WithLocal(tensor.FromFloat32(xv, 2, 3), dp), tensor.WithLocal(tensor.FromFloat32(wv, 3), dp))
	g = backward1(tr, tensor.Sum(tensor.Mul(l[0], l[1])), l, false)
	requireExact(t, tensor.Float32, []int{3}, []float64{5, 7, 9}, g[1])
	assert.Empty(t, env.takePsums())

	// An explicitly invariant mark (mask 0) is like no mark.
	tr, l = traceLeaves(tensor.WithLocal(tensor.FromFloat32(wv, 3), env.Local(0)))
	g = backward1(tr, tensor.Sum(tensor.Mul(x, l[0])), l, false)
	requireExact(t, tensor.Float32, []int{3}, []float64{10, 14, 18}, g[0])
	assert.Equal(t, []uint64{1}, env.takePsums())

	// An untraced invariant constant needs no cotangent: no psum.
	tr, l = traceLeaves(tensor.WithLocal(tensor.FromFloat32(xv, 2, 3), dp))
	g = backward1(tr, tensor.Sum(tensor.Mul(l[0], tensor.FromFloat32(wv, 3))), l, false)
	requireExact(t, tensor.Float32, []int{2, 3}, []float64{0.5, -1, 2, 0.5, -1, 2}, g[0])
	assert.Empty(t, env.takePsums())

	// A varying bool condition makes Where's float operands vary.
	tr, l = traceLeaves(tensor.FromFloat32(wv, 3), tensor.FromFloat32([]float32{7}, 1))
	cond := tensor.WithLocal(tensor.FromBool([]bool{true, false, true}), tp)
	y = tensor.Where(cond, l[0], l[1])
	assert.Equal(t, "f32[3]{tp}", y.String())
	g = backward1(tr, tensor.Sum(y), l, false)
	requireExact(t, tensor.Float32, []int{3}, []float64{3, 0, 3}, g[0])
	requireExact(t, tensor.Float32, []int{1}, []float64{3}, g[1])
	assert.Equal(t, []uint64{2, 2}, env.takePsums())

	// A wrt the output does not depend on: zeros with its own mark.
	tr, l = traceLeaves(tensor.WithLocal(tensor.FromFloat32(wv, 3), tp), tensor.WithLocal(tensor.FromFloat32(wv, 3), dp))
	g = backward1(tr, tensor.Sum(l[0]), l, false)
	assert.Equal(t, "f32[3]{dp}", g[1].String())
}

func TestVary(t *testing.T) {
	env := newFakeEnv([]string{"dp", "tp"}, []float32{2, 3})
	dp, tp, both := env.Local(1), env.Local(2), env.Local(3)
	x := tensor.WithLocal(tensor.FromFloat32([]float32{1, 2}), dp)
	assert.Same(t, x, tensor.Vary(x, dp))
	v := tensor.Vary(x, both)
	assert.Equal(t, "f32[2]{dp,tp}", v.String())
	assert.Equal(t, x.Float32s(), v.Float32s())
	u := tensor.Vary(tensor.FromFloat32([]float32{1, 2}), env.Local(0))
	assert.Same(t, env.Local(0), u.Local())

	tr, l := traceLeaves(x)
	g := backward1(tr, tensor.Vary(l[0], both), l, false)
	requireExact(t, tensor.Float32, []int{2}, []float64{3, 3}, g[0])
	assert.Equal(t, []uint64{2}, env.takePsums())

	requirePanic(t, "tensor.Vary: f32[2]{dp} already varies over axes outside [tp]", func() { tensor.Vary(x, tp) })
	other := newFakeEnv([]string{"dp", "tp"}, []float32{2, 3})
	requirePanic(t, "tensor.Vary: f32[2]{dp} belongs to another device environment", func() { tensor.Vary(x, other.Local(3)) })
}

// One trace shared by several goroutines (as devices inside shard.Map share
// the trace of the parameters): each records its own ops on the shared
// leaves and runs its own backward pass. Run with -race.
func TestSharedTraceConcurrentBackward(t *testing.T) {
	rng := newRNG(31)
	params := mlpParams(rng, 6, 10, 3)
	xs := make([]*tensor.Tensor, 6)
	ys := make([]*tensor.Tensor, 6)
	for i := range xs {
		xs[i], ys[i] = randF32(rng, 4, 6), randF32(rng, 4, 3)
	}
	want := make([][]float32, len(xs))
	for i := range xs {
		tr, l := traceLeaves(params...)
		want[i] = backward1(tr, mlpLoss(l, xs[i], ys[i]), l, false)[0].Float32s()
	}
	tr, l := traceLeaves(params...)
	got := make([][]float32, len(xs))
	var wg sync.WaitGroup
	for i := range xs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = backward1(tr, mlpLoss(l, xs[i], ys[i]), l, false)[0].Float32s()
		}()
	}
	wg.Wait()
	assert.Equal(t, want, got)
}

// Every VJP on zero-size and rank-0 operands returns cotangents of the
// operands' shapes (Backward checks each one) with the right values.
func TestVJPEdgeShapes(t *testing.T) {
	binaries := map[string]func(a, b *tensor.Tensor) *tensor.Tensor{
		"Add": tensor.Add, "Sub": tensor.Sub, "Mul": tensor.Mul, "Div": tensor.Div,
		"Maximum": tensor.Maximum, "Minimum": tensor.Minimum, "Pow": tensor.Pow,
		"Where": func(a, b *tensor.Tensor) *tensor.Tensor {
			return tensor.Where(tensor.Greater(a, tensor.Scalar(0)), a, b)
		},
		"MatMul": func(a, b *tensor.Tensor) *tensor.Tensor {
			return tensor.MatMul(tensor.Reshape(a, append(a.Shape(), 1)...), tensor.Reshape(b, append([]int{1}, b.Shape()...)...))
		},
	}
	pairs := [][2][]int{{{0}, {1}}, {{1}, {0}}, {{2, 0}, {2, 1}}, {{}, {}}, {{}, {0, 3}}, {{3}, {}}}
	for name, f := range binaries {
		for _, p := range pairs {
			if name == "MatMul" && (len(p[0]) != 1 || len(p[1]) != 1) {
				continue
			}
			a := tensor.Full(tensor.Float32, 1.5, p[0]...)
			b := tensor.Full(tensor.Float32, 0.5, p[1]...)
			g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0], xs[1]) }, ts(a, b))
			assert.Equal(t, p[0], g[0].Shape(), "%s %v", name, p)
			assert.Equal(t, p[1], g[1].Shape(), "%s %v", name, p)
			checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0], xs[1]) }, ts(a, b))
		}
	}
	x := tensor.Zeros(tensor.Float32, 2, 0, 3)
	for _, axes := range allSubsets(3) {
		for _, r := range []func(*tensor.Tensor, ...int) *tensor.Tensor{tensor.Sum, tensor.SumKeep, tensor.Mean, tensor.MeanKeep} {
			g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return r(xs[0], axes...) }, ts(x))
			assert.Equal(t, []int{2, 0, 3}, g[0].Shape())
		}
		if len(axes) > 0 && !slices.Contains(axes, 1) {
			for _, r := range []func(*tensor.Tensor, ...int) *tensor.Tensor{tensor.Max, tensor.MinKeep, tensor.LogSumExp} {
				g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return r(xs[0], axes...) }, ts(x))
				assert.Equal(t, []int{2, 0, 3}, g[0].Shape())
			}
		}
	}
	for _, f := range []func(*tensor.Tensor) *tensor.Tensor{
		tensor.T, tensor.Flatten,
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Transpose(x, 1, 2, 0) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.BroadcastTo(x, 4, 2, 0, 3) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.ExpandDims(x, 1) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(x, 0, 1) },
	} {
		g := grad(func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0]) }, ts(x))
		assert.Equal(t, []int{2, 0, 3}, g[0].Shape())
	}
	// Scalars through every reduction and shape op.
	s := tensor.Scalar(0.7)
	for _, f := range []func(*tensor.Tensor) *tensor.Tensor{
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(x) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.MaxKeep(x) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.LogSumExp(x) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Mean(x) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.BroadcastTo(x, 2, 3) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Reshape(x, 1, 1) },
		func(x *tensor.Tensor) *tensor.Tensor { return tensor.Transpose(x) },
		func(x *tensor.Tensor) *tensor.Tensor {
			return tensor.MatMul(tensor.Reshape(x, 1), tensor.Reshape(x, 1))
		},
	} {
		checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return f(xs[0]) }, ts(s))
	}
}

// Apply: an Impl that returns its input gets a fresh header (logical axes
// dropped, storage shared); only Distributed ops accept sharded operands.
func TestApplyIdentityAndDistributed(t *testing.T) {
	x := tensor.WithLogicalAxes(tensor.FromFloat32([]float32{1, 2}), "embed")
	ident := &tensor.Op{Name: "ident", Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor { return in[0] }}
	y := tensor.Apply(ident, nil, x)
	assert.NotSame(t, x, y)
	assert.True(t, sharesStorage(x, y))
	assert.Nil(t, y.LogicalAxes())
	assert.Equal(t, []string{"embed"}, x.LogicalAxes())

	host := tensor.FromFloat32([]float32{1, 2, 3, 4})
	sh := tensor.NewSharded(tensor.Float32, []int{4}, fakeLayout{axes: []string{"dp"}, data: host})
	var got *tensor.Tensor
	dist := &tensor.Op{Name: "gather", Traits: tensor.Traits{Placement: tensor.Distributed}, Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor {
		got = in[0]
		return tensor.FromFloat32(in[0].Float32s())
	}}
	out := tensor.Apply(dist, nil, sh)
	assert.Same(t, sh, got)
	assert.Equal(t, []float32{1, 2, 3, 4}, out.Float32s())
	requirePanic(t, `shard: op "ident": operand f32[4@dp] has a layout tensor_test.fakeLayout that package shard did not make`,
		func() { tensor.Apply(ident, nil, sh) })
}
