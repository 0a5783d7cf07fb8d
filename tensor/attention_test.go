package tensor_test

import (
	"fmt"
	"math"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// attnCase is one attention problem: sizes, the mask's shape (nil: none)
// and the scale (0: 1/√H).
type attnCase struct {
	B, T, S, N, H, V int
	causal           bool
	mask             []int
	scale            float32
}

func (c attnCase) String() string {
	return fmt.Sprintf("B%d_T%d_S%d_N%d_H%d_V%d_causal=%v_mask=%v_scale=%g", c.B, c.T, c.S, c.N, c.H, c.V, c.causal, c.mask, c.scale)
}

// attnCases cover one block and several (the kernel's blocks are 64
// queries by 128 keys), odd sizes, T != S, and masks of every broadcast
// form.
var attnCases = []attnCase{
	{B: 1, T: 1, S: 1, N: 1, H: 1, V: 1},
	{B: 2, T: 5, S: 7, N: 3, H: 4, V: 6},
	{B: 2, T: 7, S: 7, N: 2, H: 5, V: 5, causal: true},
	{B: 2, T: 9, S: 4, N: 2, H: 3, V: 2, causal: true},
	{B: 2, T: 4, S: 9, N: 2, H: 3, V: 2, causal: true},
	{B: 1, T: 130, S: 300, N: 2, H: 7, V: 9},
	{B: 1, T: 200, S: 200, N: 2, H: 16, V: 16, causal: true},
	{B: 3, T: 70, S: 140, N: 2, H: 8, V: 4, mask: []int{3, 1, 1, 140}},
	{B: 2, T: 66, S: 129, N: 3, H: 8, V: 8, mask: []int{66, 129}, causal: true},
	{B: 2, T: 6, S: 5, N: 3, H: 4, V: 4, mask: []int{2, 3, 6, 5}, scale: 0.3},
	{B: 2, T: 6, S: 5, N: 3, H: 4, V: 4, mask: []int{1, 3, 1, 5}, scale: -1.5},
}

// attnInputs draws q, k, v and (if the case has one) a mask that leaves
// every query at least one visible key (key 0, which the causal mask
// never hides).
func attnInputs(c attnCase, seed uint64) (q, k, v, mask *tensor.Tensor) {
	rng := newRNG(seed)
	q = randF32(rng, c.B, c.T, c.N, c.H)
	k = randF32(rng, c.B, c.S, c.N, c.H)
	v = randF32(rng, c.B, c.S, c.N, c.V)
	if c.mask != nil {
		m := make([]bool, numel(c.mask))
		last := c.mask[len(c.mask)-1]
		for i := range m {
			m[i] = rng.IntN(3) > 0 || i%last == 0
		}
		mask = tensor.FromBool(m, c.mask...)
	}
	return q, k, v, mask
}

// attnRef computes attention, its log-sum-exps and, for the output
// cotangent g, the gradients of q, k and v, in float64 with naive loops.
type attnRefOut struct {
	out, dq, dk, dv []float64
}

func attnRef(c attnCase, q, k, v, mask, g *tensor.Tensor) attnRefOut {
	qs, ks, vs := q.Float64s(), k.Float64s(), v.Float64s()
	var gs []float64
	if g != nil {
		gs = g.Float64s()
	}
	scale := float64(c.scale)
	if scale == 0 {
		scale = 1 / math.Sqrt(float64(c.H))
	}
	var ms []bool
	var mshape []int
	if mask != nil {
		ms = mask.Bools()
		mshape = append(make([]int, 4-len(c.mask)), c.mask...)
		for i := range 4 - len(c.mask) {
			mshape[i] = 1
		}
	}
	visible := func(b, n, t, s int) bool {
		if c.causal && s > t {
			return false
		}
		if ms == nil {
			return true
		}
		idx := []int{b, n, t, s}
		off := 0
		for i, d := range mshape {
			x := idx[i]
			if d == 1 {
				x = 0
			}
			off = off*d + x
		}
		return ms[off]
	}
	r := attnRefOut{
		out: make([]float64, c.B*c.T*c.N*c.V),
		dq:  make([]float64, len(qs)), dk: make([]float64, len(ks)), dv: make([]float64, len(vs)),
	}
	qi := func(b, t, n, h int) int { return ((b*c.T+t)*c.N+n)*c.H + h }
	ki := func(b, s, n, h int) int { return ((b*c.S+s)*c.N+n)*c.H + h }
	vi := func(b, s, n, h int) int { return ((b*c.S+s)*c.N+n)*c.V + h }
	oi := func(b, t, n, h int) int { return ((b*c.T+t)*c.N+n)*c.V + h }
	for b := range c.B {
		for n := range c.N {
			for t := range c.T {
				p := make([]float64, c.S)
				mx := math.Inf(-1)
				for s := range c.S {
					p[s] = math.Inf(-1)
					if visible(b, n, t, s) {
						dot := 0.0
						for h := range c.H {
							dot += qs[qi(b, t, n, h)] * ks[ki(b, s, n, h)]
						}
						p[s] = scale * dot
					}
					mx = math.Max(mx, p[s])
				}
				sum := 0.0
				for s := range p {
					p[s] = math.Exp(p[s] - mx)
					sum += p[s]
				}
				for s := range p {
					p[s] /= sum
				}
				for h := range c.V {
					o := 0.0
					for s := range c.S {
						o += p[s] * vs[vi(b, s, n, h)]
					}
					r.out[oi(b, t, n, h)] = o
				}
				if gs == nil {
					continue
				}
				// dv += p g; dp = g·v; ds = p(dp - Σ p dp); dq, dk.
				dp := make([]float64, c.S)
				pdp := 0.0
				for s := range c.S {
					for h := range c.V {
						r.dv[vi(b, s, n, h)] += p[s] * gs[oi(b, t, n, h)]
						dp[s] += gs[oi(b, t, n, h)] * vs[vi(b, s, n, h)]
					}
					pdp += p[s] * dp[s]
				}
				for s := range c.S {
					ds := p[s] * (dp[s] - pdp) * scale
					for h := range c.H {
						r.dq[qi(b, t, n, h)] += ds * ks[ki(b, s, n, h)]
						r.dk[ki(b, s, n, h)] += ds * qs[qi(b, t, n, h)]
					}
				}
			}
		}
	}
	return r
}

func TestDotProductAttention(t *testing.T) {
	for i, c := range attnCases {
		t.Run(c.String(), func(t *testing.T) {
			q, k, v, mask := attnInputs(c, uint64(i))
			g := randF32(newRNG(uint64(100+i)), c.B, c.T, c.N, c.V)
			ref := attnRef(c, q, k, v, mask, g)
			before := snapshot(q, k, v)
			out := tensor.DotProductAttention(q, k, v, mask, c.scale, c.causal)
			require.Equal(t, []int{c.B, c.T, c.N, c.V}, out.Shape())
			requireClose(t, ref.out, out, 2e-6, 2e-5, "out")
			requireUnchanged(t, before)

			// The gradients of Σ out·g, traced.
			f := func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Mul(tensor.DotProductAttention(xs[0], xs[1], xs[2], mask, c.scale, c.causal), g))
			}
			gr := grad(f, ts(q, k, v))
			requireClose(t, ref.dq, gr[0], 2e-5, 1e-4, "dq")
			requireClose(t, ref.dk, gr[1], 2e-5, 1e-4, "dk")
			requireClose(t, ref.dv, gr[2], 2e-5, 1e-4, "dv")
		})
	}
}

// TestDotProductAttentionFiniteDifferences checks the gradient and, through
// the composition the VJP falls back to when traced, the second derivative.
func TestDotProductAttentionFiniteDifferences(t *testing.T) {
	for i, c := range []attnCase{
		{B: 1, T: 3, S: 4, N: 2, H: 3, V: 2, causal: true},
		{B: 2, T: 3, S: 3, N: 1, H: 2, V: 3, mask: []int{2, 1, 1, 3}},
	} {
		t.Run(c.String(), func(t *testing.T) {
			q, k, v, mask := attnInputs(c, uint64(i))
			w := randF32(newRNG(9), c.B, c.T, c.N, c.V)
			f := func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Mul(tensor.DotProductAttention(xs[0], xs[1], xs[2], mask, 0, c.causal), w))
			}
			opts := autodiffOpts(1e-2, 1e-3, 1e-2)
			checkGrad(t, f, ts(q, k, v), opts)
			for j := range 3 {
				g := gradOf(f, j)
				checkGrad(t, func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(g(xs))) }, ts(q, k, v), opts)
			}
		})
	}
}

// TestDotProductAttentionHiddenQuery: a query that sees no key gets NaN, as
// with -Inf masking in JAX; the other queries are unaffected.
func TestDotProductAttentionHiddenQuery(t *testing.T) {
	c := attnCase{B: 1, T: 3, S: 4, N: 1, H: 2, V: 2, mask: []int{3, 4}}
	q, k, v, _ := attnInputs(c, 1)
	mask := tensor.FromBool([]bool{
		true, false, true, false,
		false, false, false, false,
		true, true, true, true,
	}, 3, 4)
	out := tensor.DotProductAttention(q, k, v, mask, 0, false)
	requireClose(t, attnRef(c, q, k, v, mask, nil).out, out, 1e-6, 1e-5)
	o := out.Float64s()
	require.True(t, math.IsNaN(o[2]) && math.IsNaN(o[3]))
	require.False(t, math.IsNaN(o[0]) || math.IsNaN(o[4]))
}

// TestDotProductAttentionHalf: bfloat16 operands give the float32 result
// rounded once.
func TestDotProductAttentionHalf(t *testing.T) {
	c := attnCase{B: 2, T: 70, S: 70, N: 2, H: 8, V: 8, causal: true}
	q, k, v, _ := attnInputs(c, 3)
	bq, bk, bv := tensor.Convert(q, tensor.BFloat16), tensor.Convert(k, tensor.BFloat16), tensor.Convert(v, tensor.BFloat16)
	want := tensor.Convert(tensor.DotProductAttention(tensor.Convert(bq, tensor.Float32), tensor.Convert(bk, tensor.Float32),
		tensor.Convert(bv, tensor.Float32), nil, 0, true), tensor.BFloat16)
	got := tensor.DotProductAttention(bq, bk, bv, nil, 0, true)
	require.Equal(t, tensor.BFloat16, got.DType())
	require.Equal(t, want.Float64s(), got.Float64s())
}

// TestDotProductAttentionLinearMemory: at context 4096 (batch 1, 4 heads
// of 32) the forward keeps O(T) residuals, and forward and backward
// together allocate less than 4x the size of q, k, v and the output; the
// T×T weights alone would be 64x that.
func TestDotProductAttentionLinearMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("context 4096")
	}
	if raceEnabled {
		t.Skip("sync.Pool drops what it is given at random under -race, so recycled storage is allocated again")
	}
	const B, T, N, H = 1, 4096, 4, 32
	rng := newRNG(4)
	q, k, v := randF32(rng, B, T, N, H), randF32(rng, B, T, N, H), randF32(rng, B, T, N, H)
	qkvo := 4 * q.Bytes()
	loss := func(xs []*tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.DotProductAttention(xs[0], xs[1], xs[2], nil, 0, true))
	}
	r := autodiff.Residuals(func(xs []*tensor.Tensor) *tensor.Tensor { return loss(xs) }, ts(q, k, v))
	// q, k, v (the inputs), the output and one float per query and head.
	require.LessOrEqual(t, r.Bytes, qkvo+B*N*T*4, "%v", r)

	runtime.GC()
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	gr := grad(loss, ts(q, k, v))
	runtime.ReadMemStats(&m1)
	require.Len(t, gr, 3)
	t.Logf("residuals %v; forward and backward allocated %d bytes, q, k, v and out %d", r.Activations(), int(m1.TotalAlloc-m0.TotalAlloc), qkvo)
	alloc := int(m1.TotalAlloc - m0.TotalAlloc)
	require.Less(t, alloc, 4*qkvo, "forward and backward allocated %d bytes; q, k, v and out are %d", alloc, qkvo)
}

func TestDotProductAttentionPanics(t *testing.T) {
	f := func(shape ...int) *tensor.Tensor { return tensor.Zeros(tensor.Float32, shape...) }
	q := f(2, 3, 4, 5)
	for _, c := range []struct {
		name    string
		q, k, v *tensor.Tensor
		mask    *tensor.Tensor
		scale   float32
		want    string
	}{
		{"rank", f(3, 4, 5), q, q, nil, 0, "tensor.DotProductAttention: f32[3,4,5], f32[2,3,4,5], f32[2,3,4,5]: want q [batch, T, heads, H], k [batch, S, heads, H], v [batch, S, heads, V] of one float dtype"},
		{"dtype", q, tensor.Zeros(tensor.Int32, 2, 3, 4, 5), q, nil, 0, "tensor.DotProductAttention: f32[2,3,4,5], i32[2,3,4,5], f32[2,3,4,5]: want q [batch, T, heads, H], k [batch, S, heads, H], v [batch, S, heads, V] of one float dtype"},
		{"heads", q, f(2, 3, 3, 5), f(2, 3, 3, 5), nil, 0, "tensor.DotProductAttention: f32[2,3,4,5], f32[2,3,3,5], f32[2,3,3,5]: k must be [2, S, 4, 5] and v [2, S, 4, V] with the same S"},
		{"length", q, f(2, 6, 4, 5), f(2, 7, 4, 5), nil, 0, "tensor.DotProductAttention: f32[2,3,4,5], f32[2,6,4,5], f32[2,7,4,5]: k must be [2, S, 4, 5] and v [2, S, 4, V] with the same S"},
		{"mask", q, q, q, tensor.Zeros(tensor.Bool, 3, 4), 0, "tensor.DotProductAttention: mask bool[3,4]: want bool broadcastable to [2,4,3,3] (batch, heads, queries, keys)"},
		{"mask dtype", q, q, q, f(3, 3), 0, "tensor.DotProductAttention: mask f32[3,3]: want bool broadcastable to [2,4,3,3] (batch, heads, queries, keys)"},
		{"scale", q, q, q, nil, float32(math.Inf(1)), "tensor.DotProductAttention: f32[2,3,4,5], f32[2,3,4,5], f32[2,3,4,5]: scale +Inf is not finite"},
		{"nil", q, nil, q, nil, 0, "tensor.DotProductAttention: operand k is nil"},
	} {
		t.Run(c.name, func(t *testing.T) {
			requirePanic(t, c.want, func() { tensor.DotProductAttention(c.q, c.k, c.v, c.mask, c.scale, false) })
		})
	}
}
