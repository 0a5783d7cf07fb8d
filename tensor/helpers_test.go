package tensor_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// newRNG returns a deterministic generator for test data.
func newRNG(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 0x5eed)) }

// randF32 returns a float32 tensor with elements uniform in [-2, 2).
func randF32(rng *rand.Rand, shape ...int) *tensor.Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		d[i] = float32(rng.Float64()*4 - 2)
	}
	return tensor.FromFloat32(d, shape...)
}

// randPos returns a float32 tensor with elements uniform in [lo, hi).
func randRange(rng *rand.Rand, lo, hi float64, shape ...int) *tensor.Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		d[i] = float32(lo + rng.Float64()*(hi-lo))
	}
	return tensor.FromFloat32(d, shape...)
}

// randI32 returns an int32 tensor with elements in [lo, hi).
func randI32(rng *rand.Rand, lo, hi int, shape ...int) *tensor.Tensor {
	d := make([]int32, numel(shape))
	for i := range d {
		d[i] = int32(lo + rng.IntN(hi-lo))
	}
	return tensor.FromInt32(d, shape...)
}

// randBool returns a bool tensor.
func randBool(rng *rand.Rand, shape ...int) *tensor.Tensor {
	d := make([]bool, numel(shape))
	for i := range d {
		d[i] = rng.IntN(2) == 1
	}
	return tensor.FromBool(d, shape...)
}

// distinct returns a float32 tensor whose elements are distinct (a shuffled
// ramp), so that max/min/argmax have no ties and finite differences don't
// cross kinks.
func distinct(rng *rand.Rand, shape ...int) *tensor.Tensor {
	n := numel(shape)
	d := make([]float32, n)
	for i := range d {
		d[i] = float32(i)*0.37 - float32(n)*0.15
	}
	rng.Shuffle(n, func(i, j int) { d[i], d[j] = d[j], d[i] })
	return tensor.FromFloat32(d, shape...)
}

// withDType builds a tensor of dtype dt from float64 values.
func withDType(dt tensor.DType, vals []float64, shape ...int) *tensor.Tensor {
	switch dt {
	case tensor.Float32:
		return tensor.FromFloat64(vals, shape...)
	case tensor.Int32:
		d := make([]int, len(vals))
		for i, v := range vals {
			d[i] = int(v)
		}
		return tensor.FromInts(d, shape...)
	case tensor.Bool:
		d := make([]bool, len(vals))
		for i, v := range vals {
			d[i] = v != 0
		}
		return tensor.FromBool(d, shape...)
	}
	panic("bad dtype")
}

func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// unravel turns a flat row-major offset into an index.
func unravel(off int, shape []int) []int {
	idx := make([]int, len(shape))
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] > 0 {
			idx[i] = off % shape[i]
			off /= shape[i]
		}
	}
	return idx
}

// ravel turns an index into a flat row-major offset.
func ravel(idx, shape []int) int {
	off := 0
	for i, ix := range idx {
		off = off*shape[i] + ix
	}
	return off
}

// refBroadcast computes the NumPy broadcast shape in the test's own way.
func refBroadcast(shapes ...[]int) []int {
	r := 0
	for _, s := range shapes {
		r = max(r, len(s))
	}
	out := make([]int, r)
	for i := range out {
		out[i] = -1
	}
	for _, s := range shapes {
		for j := range s {
			k := r - len(s) + j
			switch {
			case out[k] == -1 || out[k] == 1:
				out[k] = s[j]
			case s[j] == 1 || s[j] == out[k]:
			default:
				panic(fmt.Sprintf("refBroadcast: %v", shapes))
			}
		}
	}
	for i := range out {
		if out[i] == -1 {
			out[i] = 1
		}
	}
	return out
}

// bcastIndex maps an index into the broadcast result to the flat offset of
// the operand of shape s.
func bcastIndex(idx, s []int) int {
	lead := len(idx) - len(s)
	off := 0
	for j, d := range s {
		i := idx[lead+j]
		if d == 1 {
			i = 0
		}
		off = off*d + i
	}
	return off
}

// refBinary applies f elementwise with broadcasting by index arithmetic.
func refBinary(a, b *tensor.Tensor, f func(x, y float64) float64) ([]float64, []int) {
	shape := refBroadcast(a.Shape(), b.Shape())
	av, bv := a.Float64s(), b.Float64s()
	out := make([]float64, numel(shape))
	for o := range out {
		idx := unravel(o, shape)
		out[o] = f(av[bcastIndex(idx, a.Shape())], bv[bcastIndex(idx, b.Shape())])
	}
	return out, shape
}

// msgText renders testify-style msgAndArgs (a format and its arguments).
func msgText(msgAndArgs []any) string {
	if len(msgAndArgs) == 0 {
		return ""
	}
	if f, ok := msgAndArgs[0].(string); ok {
		return fmt.Sprintf(f, msgAndArgs[1:]...)
	}
	return fmt.Sprint(msgAndArgs...)
}

// f32 rounds to float32 precision.
func f32(v float64) float64 { return float64(float32(v)) }

// requireClose checks got against want elementwise with |got-want| <=
// atol + rtol*|want|; NaNs must match NaNs and infinities must be equal.
func requireClose(t testing.TB, want []float64, got *tensor.Tensor, atol, rtol float64, msgAndArgs ...any) {
	t.Helper()
	g := got.Float64s()
	require.Equal(t, len(want), len(g), msgAndArgs...)
	for i := range want {
		w, v := want[i], g[i]
		switch {
		case math.IsNaN(w) || math.IsNaN(v):
			if math.IsNaN(w) != math.IsNaN(v) {
				require.Failf(t, "NaN mismatch", "element %d: want %v, got %v %s", i, w, v, msgText(msgAndArgs))
			}
		case math.IsInf(w, 0) || math.IsInf(v, 0):
			if w != v {
				require.Failf(t, "Inf mismatch", "element %d: want %v, got %v %s", i, w, v, msgText(msgAndArgs))
			}
		default:
			if math.Abs(w-v) > atol+rtol*math.Abs(w) {
				require.Failf(t, "value mismatch", "element %d: want %.9g, got %.9g %s", i, w, v, msgText(msgAndArgs))
			}
		}
	}
}

// requireExact checks dtype, shape and values exactly (NaN == NaN).
func requireExact(t testing.TB, dt tensor.DType, shape []int, want []float64, got *tensor.Tensor, msgAndArgs ...any) {
	t.Helper()
	require.Equal(t, dt, got.DType(), msgAndArgs...)
	require.Equal(t, normShape(shape), normShape(got.Shape()), msgAndArgs...)
	requireClose(t, want, got, 0, 0, msgAndArgs...)
}

// normShape makes nil and empty shapes compare equal.
func normShape(s []int) []int {
	if s == nil {
		return []int{}
	}
	return s
}

// snapshot records the dtype, shape and values of tensors so a test can
// check that an op left its inputs alone.
type snap struct {
	t     *tensor.Tensor
	dt    tensor.DType
	shape []int
	vals  []float64
}

func snapshot(ts ...*tensor.Tensor) []snap {
	s := make([]snap, len(ts))
	for i, t := range ts {
		s[i] = snap{t, t.DType(), t.Shape(), t.Float64s()}
	}
	return s
}

func requireUnchanged(t testing.TB, ss []snap) {
	t.Helper()
	for i, s := range ss {
		require.Equal(t, s.dt, s.t.DType(), "input %d dtype changed", i)
		require.Equal(t, s.shape, s.t.Shape(), "input %d shape changed", i)
		got := s.t.Float64s()
		for j := range got {
			if !(got[j] == s.vals[j] || math.IsNaN(got[j]) && math.IsNaN(s.vals[j])) {
				require.Failf(t, "input modified", "input %d element %d changed from %v to %v", i, j, s.vals[j], got[j])
			}
		}
	}
}

// sharesStorage reports whether two non-empty tensors of the same dtype use
// the same backing array.
func sharesStorage(a, b *tensor.Tensor) bool {
	if a.DType() != b.DType() || a.Size() == 0 || b.Size() == 0 {
		return false
	}
	switch a.DType() {
	case tensor.Float32:
		return &a.RawFloat32()[0] == &b.RawFloat32()[0]
	case tensor.Int32:
		return &a.RawInt32()[0] == &b.RawInt32()[0]
	default:
		return &a.RawBool()[0] == &b.RawBool()[0]
	}
}

// checkGrad runs autodiff.CheckGrad and fails the test on a mismatch.
func checkGrad(t testing.TB, f func(xs []*tensor.Tensor) *tensor.Tensor, xs []*tensor.Tensor, opts ...autodiff.CheckOptions) {
	t.Helper()
	var o autodiff.CheckOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	require.NoError(t, autodiff.CheckGrad(f, xs, o))
}

// grad returns the gradient of sum(f(x)·c) (c = ones) at the inputs, using a
// fresh trace; inputs that are traced by an outer trace stay traced by it,
// so the result can itself be differentiated.
func grad(f func(xs []*tensor.Tensor) *tensor.Tensor, xs []*tensor.Tensor) []*tensor.Tensor {
	tr := tensor.NewTrace()
	leaves := make([]*tensor.Tensor, len(xs))
	for i, x := range xs {
		leaves[i] = tr.Leaf(x)
	}
	y := f(leaves)
	return tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.OnesLike(y)}, leaves, false)
}

// gradOf returns a function computing the i-th gradient of sum(f), for
// checking second derivatives with CheckGrad.
func gradOf(f func(xs []*tensor.Tensor) *tensor.Tensor, i int) func(xs []*tensor.Tensor) *tensor.Tensor {
	return func(xs []*tensor.Tensor) *tensor.Tensor { return grad(f, xs)[i] }
}

// panicMessage runs f and returns the panic value as a string ("" if f did
// not panic).
func panicMessage(f func()) (msg string) {
	defer func() {
		if r := recover(); r != nil {
			msg = fmt.Sprint(r)
		}
	}()
	f()
	return ""
}

// allSubsets returns every subset of {0..n-1}, in a fixed order.
func allSubsets(n int) [][]int {
	var out [][]int
	for m := 0; m < 1<<n; m++ {
		var s []int
		for i := 0; i < n; i++ {
			if m&(1<<i) != 0 {
				s = append(s, i)
			}
		}
		out = append(out, s)
	}
	return out
}

// permutations returns every permutation of {0..n-1}.
func permutations(n int) [][]int {
	var out [][]int
	var rec func(p []int, used []bool)
	rec = func(p []int, used []bool) {
		if len(p) == n {
			out = append(out, slices.Clone(p))
			return
		}
		for i := 0; i < n; i++ {
			if !used[i] {
				used[i] = true
				rec(append(p, i), used)
				used[i] = false
			}
		}
	}
	rec(nil, make([]bool, n))
	return out
}

// ts is shorthand for a slice of tensors.
func ts(xs ...*tensor.Tensor) []*tensor.Tensor { return xs }

// requirePanic checks that f panics with exactly the message want.
func requirePanic(t testing.TB, want string, f func(), msgAndArgs ...any) {
	t.Helper()
	got, panicked := func() (msg string, panicked bool) {
		defer func() {
			if r := recover(); r != nil {
				msg, panicked = fmt.Sprint(r), true
			}
		}()
		f()
		return "", false
	}()
	if !panicked {
		require.Failf(t, "no panic", "want panic %q %s", want, msgText(msgAndArgs))
	}
	require.Equal(t, want, got, msgAndArgs...)
}

// autodiffOpts returns CheckGrad options.
func autodiffOpts(eps, atol, rtol float64) autodiff.CheckOptions {
	return autodiff.CheckOptions{Eps: eps, Atol: atol, Rtol: rtol}
}
