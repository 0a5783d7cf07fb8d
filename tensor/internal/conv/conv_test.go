package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/testlong"
)

// The reference: float64 loops over the definition in Params' doc,
// written without the package's index tables.

// refTap reports the input index output position t reads through tap k
// in one dimension, or false.
func refTap(t, k, s, dr, lo, dl, in int) (int, bool) {
	q := t*s + k*dr - lo
	if q < 0 || q%dl != 0 || q/dl >= in {
		return 0, false
	}
	return q / dl, true
}

// refEach calls f(n, o, c, yi, xi, wi) for every term of the convolution:
// y[yi] += w[wi]·x[xi].
func refEach(p *Params, f func(yi, xi, wi int)) {
	nd := len(p.In)
	out := p.Out()
	cg, og := p.C/p.Groups, p.O/p.Groups
	size := func(v []int) int {
		s := 1
		for _, x := range v {
			s *= x
		}
		return s
	}
	inS, outS, kS := size(p.In), size(out), size(p.Kernel)
	pos := make([]int, nd)
	kk := make([]int, nd)
	for n := 0; n < p.N; n++ {
		for o := 0; o < p.O; o++ {
			gi := o / og
			for t := 0; t < outS; t++ {
				unflat(pos, t, out)
				for c := 0; c < cg; c++ {
					for k := 0; k < kS; k++ {
						unflat(kk, k, p.Kernel)
						xi, ok := 0, true
						for d := 0; d < nd && ok; d++ {
							var i int
							i, ok = refTap(pos[d], kk[d], at(p.Stride, d, 1), at(p.RhsDil, d, 1), at(p.PadLo, d, 0), at(p.LhsDil, d, 1), p.In[d])
							xi = xi*p.In[d] + i
						}
						if ok {
							f((n*p.O+o)*outS+t, (n*p.C+gi*cg+c)*inS+xi, (o*cg+c)*kS+k)
						}
					}
				}
			}
		}
	}
}

func unflat(pos []int, t int, dims []int) {
	for d := len(dims) - 1; d >= 0; d-- {
		pos[d] = t % dims[d]
		t /= dims[d]
	}
}

// ref holds float64 results with, per element, the sum of the absolute
// values of its terms and their count (for the rounding bound).
type ref struct {
	v, abs []float64
	terms  []int
}

func newRef(n int) ref {
	return ref{make([]float64, n), make([]float64, n), make([]int, n)}
}

func (r *ref) add(i int, a, b float32) {
	t := float64(a) * float64(b)
	r.v[i] += t
	r.abs[i] += math.Abs(t)
	r.terms[i]++
}

// check requires got to equal r within the rounding of a float32 sum of
// its terms in any order: (terms+2)·2⁻²⁴·Σ|terms|.
func (r *ref) check(t *testing.T, what string, got []float32) {
	t.Helper()
	require.Len(t, got, len(r.v))
	for i, g := range got {
		tol := float64(r.terms[i]+2) * 0x1p-24 * r.abs[i]
		if d := math.Abs(float64(g) - r.v[i]); !(d <= tol) {
			require.Failf(t, what, "element %d: got %g, want %g (±%g)", i, g, r.v[i], tol)
		}
	}
}

func randSlice(rng *rand.Rand, n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = rng.Float32()*2 - 1
	}
	return x
}

// nanSlice returns n NaNs: an output that must be overwritten.
func nanSlice(n int) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(math.NaN())
	}
	return x
}

func sizes(p *Params) (nx, nw, ny int) {
	nx, nw, ny = p.N*p.C, p.O*(p.C/max(p.Groups, 1)), p.N*p.O
	for d := range p.In {
		nx *= p.In[d]
		nw *= p.Kernel[d]
	}
	for _, o := range p.Out() {
		ny *= o
	}
	return
}

func (p *Params) String() string {
	return fmt.Sprintf("N=%d C=%d O=%d G=%d in=%v k=%v s=%v pad=%v/%v ldil=%v rdil=%v",
		p.N, p.C, p.O, p.Groups, p.In, p.Kernel, p.Stride, p.PadLo, p.PadHi, p.LhsDil, p.RhsDil)
}

// checkConv runs Forward, BackwardInput and BackwardKernel on random
// operands against the reference, with 1 and 2 threads (same bits).
func checkConv(t *testing.T, rng *rand.Rand, p *Params) {
	t.Helper()
	require.NoError(t, p.Check())
	nx, nw, ny := sizes(p)
	x, w, dy := randSlice(rng, nx), randSlice(rng, nw), randSlice(rng, ny)
	ry, rdx, rdw := newRef(ny), newRef(nx), newRef(nw)
	refEach(p, func(yi, xi, wi int) {
		ry.add(yi, w[wi], x[xi])
		rdx.add(xi, w[wi], dy[yi])
		rdw.add(wi, x[xi], dy[yi])
	})
	for _, m := range []method{methodIm2col, methodDirect, methodRows} {
		forceMethod = m
		checkThreads(t, p, x, w, dy, ry, rdx, rdw)
	}
	forceMethod = methodAuto
	for _, s := range kernelSets() {
		restore, _ := useKernels(s.name)
		checkThreads(t, p, x, w, dy, ry, rdx, rdw)
		restore()
	}
}

// checkThreads checks the three passes against the reference, with 1 and
// 2 threads (same bits).
func checkThreads(t *testing.T, p *Params, x, w, dy []float32, ry, rdx, rdw ref) {
	t.Helper()
	nx, nw, ny := len(x), len(w), len(dy)
	var prev [3][]float32
	defer func(m float64) { parMinFlops = m }(parMinFlops)
	for _, threads := range []int{1, 2, 3} {
		parMinFlops = 0 // split even small problems
		y, dx, dw := nanSlice(ny), nanSlice(nx), nanSlice(nw)
		Forward(p, y, x, w, threads)
		ry.check(t, "Forward "+p.String(), y)
		BackwardInput(p, dx, dy, w, threads)
		rdx.check(t, "BackwardInput "+p.String(), dx)
		BackwardKernel(p, dw, x, dy, threads)
		rdw.check(t, "BackwardKernel "+p.String(), dw)
		if prev[0] != nil {
			require.Equal(t, prev, [3][]float32{y, dx, dw}, "threads=%d gives other bits than 1: %v", threads, p)
		}
		prev = [3][]float32{y, dx, dw}
	}
}

// withBudget runs f with column tiles of at most budget floats (0: the
// default), so that small problems exercise tiling and channel chunks.
func withBudget(budget int, f func()) {
	if budget == 0 {
		f()
		return
	}
	prev := colBudget
	colBudget = budget
	defer func() { colBudget = prev }()
	f()
}

func TestConvTable(t *testing.T) {
	two := []int{2, 2}
	one := []int{1, 1}
	cases := []struct {
		name string
		p    Params
	}{
		{"lenet1", Params{N: 2, C: 1, O: 6, Groups: 1, In: []int{28, 28}, Kernel: []int{5, 5}, PadLo: two, PadHi: two}},
		{"lenet2", Params{N: 2, C: 6, O: 16, Groups: 1, In: []int{14, 14}, Kernel: []int{5, 5}}},
		{"resnet3x3", Params{N: 1, C: 16, O: 8, Groups: 1, In: []int{12, 12}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}},
		{"strided", Params{N: 2, C: 3, O: 4, Groups: 1, In: []int{11, 9}, Kernel: []int{3, 3}, Stride: two, PadLo: one, PadHi: one}},
		{"1x1", Params{N: 2, C: 8, O: 5, Groups: 1, In: []int{7, 6}, Kernel: one}},
		{"1x1 strided", Params{N: 2, C: 8, O: 5, Groups: 1, In: []int{7, 6}, Kernel: one, Stride: two}},
		{"depthwise", Params{N: 2, C: 6, O: 6, Groups: 6, In: []int{9, 9}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}},
		{"depthwise x2", Params{N: 2, C: 4, O: 8, Groups: 4, In: []int{8, 7}, Kernel: []int{3, 3}, Stride: two}},
		{"groups", Params{N: 2, C: 6, O: 9, Groups: 3, In: []int{6, 7}, Kernel: []int{2, 3}}},
		{"kernel dilation", Params{N: 1, C: 3, O: 2, Groups: 1, In: []int{10, 9}, Kernel: []int{3, 2}, RhsDil: []int{2, 3}, PadLo: []int{2, 1}, PadHi: []int{0, 3}}},
		{"input dilation", Params{N: 1, C: 2, O: 3, Groups: 1, In: []int{5, 4}, Kernel: []int{3, 3}, LhsDil: []int{2, 3}, PadLo: two, PadHi: two}},
		{"input dilation strided", Params{N: 2, C: 2, O: 3, Groups: 1, In: []int{5, 6}, Kernel: []int{3, 2}, LhsDil: []int{2, 3}, Stride: []int{3, 2}, PadLo: one, PadHi: two}},
		{"negative padding", Params{N: 1, C: 2, O: 2, Groups: 1, In: []int{9, 8}, Kernel: []int{2, 3}, PadLo: []int{-2, 1}, PadHi: []int{-1, -2}}},
		{"1-D", Params{N: 3, C: 4, O: 5, Groups: 1, In: []int{37}, Kernel: []int{5}, Stride: []int{2}, PadLo: []int{2}, PadHi: []int{1}}},
		{"1-D dilated", Params{N: 2, C: 3, O: 2, Groups: 1, In: []int{20}, Kernel: []int{3}, RhsDil: []int{4}}},
		{"3-D", Params{N: 2, C: 3, O: 4, Groups: 1, In: []int{5, 6, 7}, Kernel: []int{3, 2, 3}, PadLo: []int{1, 0, 1}, PadHi: []int{1, 1, 1}}},
		{"3-D strided dilated groups", Params{N: 1, C: 4, O: 6, Groups: 2, In: []int{7, 6, 8}, Kernel: []int{2, 3, 2}, Stride: []int{2, 1, 3}, RhsDil: []int{2, 1, 2}, PadLo: []int{1, 1, 0}, PadHi: []int{0, 1, 2}}},
		{"3-D 1x1x1", Params{N: 2, C: 5, O: 3, Groups: 1, In: []int{3, 4, 5}, Kernel: []int{1, 1, 1}}},
		// Rows wide enough for the rows layout of the direct form, with
		// channel counts and widths that are not whole tiles.
		{"rows", Params{N: 2, C: 9, O: 10, Groups: 1, In: []int{5, 37}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}},
		{"rows 1-D dilated", Params{N: 2, C: 8, O: 12, Groups: 1, In: []int{70}, Kernel: []int{3}, RhsDil: []int{2}, PadLo: []int{3}, PadHi: []int{1}}},
		{"rows 3-D groups", Params{N: 1, C: 18, O: 16, Groups: 2, In: []int{3, 4, 40}, Kernel: []int{2, 2, 3}, PadLo: []int{1, 0, 2}, PadHi: []int{0, 1, 0}}},
		{"kernel larger than input", Params{N: 1, C: 2, O: 3, Groups: 1, In: []int{3, 2}, Kernel: []int{5, 4}, PadLo: []int{2, 2}, PadHi: []int{2, 2}}},
		{"empty output", Params{N: 2, C: 2, O: 3, Groups: 1, In: []int{3, 2}, Kernel: []int{5, 4}}},
		{"empty batch", Params{N: 0, C: 2, O: 3, Groups: 1, In: []int{6, 5}, Kernel: []int{3, 3}}},
		{"no input channels", Params{N: 2, C: 0, O: 3, Groups: 1, In: []int{6, 5}, Kernel: []int{3, 3}}},
		{"no output channels", Params{N: 2, C: 3, O: 0, Groups: 1, In: []int{6, 5}, Kernel: []int{3, 3}}},
	}
	for _, c := range cases {
		for _, budget := range []int{0, 200, 1000} {
			t.Run(fmt.Sprintf("%s/budget=%d", c.name, budget), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(1, uint64(budget)))
				withBudget(budget, func() { checkConv(t, rng, &c.p) })
			})
		}
	}
}

// randParams draws a convolution covering every option.
func randParams(rng *rand.Rand) *Params {
	nd := 1 + rng.IntN(MaxDims)
	g := 1 + rng.IntN(3)
	p := &Params{N: 1 + rng.IntN(3), Groups: g, C: g * (1 + rng.IntN(4)), O: g * (1 + rng.IntN(4))}
	maybe := func(f func() int) []int {
		if rng.IntN(2) == 0 {
			return nil
		}
		v := make([]int, nd)
		for d := range v {
			v[d] = f()
		}
		return v
	}
	maxIn := []int{0, 24, 11, 6}[nd]
	p.In = make([]int, nd)
	p.Kernel = make([]int, nd)
	for d := 0; d < nd; d++ {
		p.In[d] = 1 + rng.IntN(maxIn)
		p.Kernel[d] = 1 + rng.IntN(4)
	}
	p.Stride = maybe(func() int { return 1 + rng.IntN(3) })
	p.LhsDil = maybe(func() int { return 1 + rng.IntN(2) })
	p.RhsDil = maybe(func() int { return 1 + rng.IntN(3) })
	p.PadLo = maybe(func() int { return rng.IntN(5) - 1 })
	p.PadHi = maybe(func() int { return rng.IntN(5) - 1 })
	return p
}

func TestConvRandom(t *testing.T) {
	n := 150
	if testlong.Enabled() {
		n = 3000
	}
	rng := rand.New(rand.NewPCG(2, 3))
	for i := 0; i < n; i++ {
		p := randParams(rng)
		budget := []int{0, 64, 500}[rng.IntN(3)]
		withBudget(budget, func() { checkConv(t, rng, p) })
	}
}

func TestCheck(t *testing.T) {
	cases := []struct {
		p    Params
		want string
	}{
		{Params{N: 1, C: 1, O: 1, Groups: 1}, "0 spatial dimensions"},
		{Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{1, 1, 1, 1}, Kernel: []int{1, 1, 1, 1}}, "4 spatial dimensions"},
		{Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{3}, Kernel: []int{1, 1}}, "kernel has 2 spatial dimensions, input 1"},
		{Params{N: 1, C: 4, O: 6, Groups: 4, In: []int{3}, Kernel: []int{1}}, "4 feature groups do not divide 4 input and 6 output channels"},
		{Params{N: 1, C: 1, O: 1, Groups: 0, In: []int{3}, Kernel: []int{1}}, "feature groups 0 < 1"},
		{Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{3}, Kernel: []int{0}}, "kernel size 0 in dimension 0"},
		{Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{3}, Kernel: []int{1}, Stride: []int{0}}, "stride 0 in dimension 0"},
		{Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{3, 3}, Kernel: []int{1, 1}, PadLo: []int{1}}, "1 low paddings for 2 spatial dimensions"},
		{Params{N: -1, C: 1, O: 1, Groups: 1, In: []int{3}, Kernel: []int{1}}, "negative size"},
	}
	for _, c := range cases {
		err := c.p.Check()
		require.Error(t, err, "%v", &c.p)
		require.Contains(t, err.Error(), c.want)
	}
	p := Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{3}, Kernel: []int{2}}
	require.PanicsWithValue(t, "conv.Forward: output of 3 elements, want 2", func() {
		Forward(&p, make([]float32, 3), make([]float32, 3), make([]float32, 2), 1)
	})
}

func TestOut(t *testing.T) {
	// PyTorch's formula: ⌊(in + 2·pad - dil·(k-1) - 1)/stride⌋ + 1.
	p := Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{28, 14, 7}, Kernel: []int{5, 3, 3},
		Stride: []int{1, 2, 3}, PadLo: []int{2, 1, 0}, PadHi: []int{2, 1, 0}, RhsDil: []int{1, 2, 1}}
	require.Equal(t, []int{28, 6, 2}, p.Out())
	// Input dilation: (in-1)·dl+1 positions.
	p = Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{4}, Kernel: []int{3}, LhsDil: []int{2}, PadLo: []int{2}, PadHi: []int{2}}
	require.Equal(t, []int{9}, p.Out())
	p = Params{N: 1, C: 1, O: 1, Groups: 1, In: []int{2}, Kernel: []int{3}}
	require.Equal(t, []int{0}, p.Out())
}
