package conv

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// winoSlack widens ref.check's rounding bound for the Winograd form: its
// transforms add up to 16 inputs (and 9 kernel taps) before the products
// and 16 products after them, so its error could exceed a direct sum's
// bound; measured, it stays under 0.35 of that bound on these cases.
const winoSlack = 2

// checkWino requires got to equal r within winoSlack times ref.check's
// bound, and returns the largest ratio of the error to that bound.
func checkWino(t *testing.T, what string, r ref, got []float32) float64 {
	t.Helper()
	require.Len(t, got, len(r.v))
	worst := 0.0
	for i, g := range got {
		tol := float64(r.terms[i]+2) * 0x1p-24 * r.abs[i]
		d := math.Abs(float64(g) - r.v[i])
		require.False(t, !(d <= winoSlack*tol), "%s: element %d: got %g, want %g (±%g)", what, i, g, r.v[i], winoSlack*tol)
		worst = max(worst, d/tol)
	}
	return worst
}

// The Winograd form computes Forward and BackwardInput on the classes it
// applies to (wherever the AVX-512 set runs), within winoSlack times a
// direct sum's rounding bound of the float64 reference, with the same bits
// on 1 to 3 threads; where it applies to one pass only, the other runs the
// direct form.
func TestWinograd(t *testing.T) {
	one := []int{1, 1}
	cases := []struct {
		name     string
		p        Params
		fwd, bwd bool // the Winograd form applies to the forward pass, the input gradient
		kgrad    bool // and to the kernel gradient
	}{
		{"one partial block", Params{N: 2, C: 5, O: 8, Groups: 1, In: []int{6, 32}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}, true, false, true},
		{"two groups of tiles, three blocks", Params{N: 1, C: 3, O: 16, Groups: 1, In: []int{20, 64}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}, true, false, true},
		{"resnet", Params{N: 2, C: 16, O: 16, Groups: 1, In: []int{32, 32}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}, true, true, true},
		{"input gradient only", Params{N: 2, C: 8, O: 5, Groups: 1, In: []int{4, 32}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}, false, true, true},
		{"padding on one side", Params{N: 1, C: 8, O: 8, Groups: 1, In: []int{8, 32}, Kernel: []int{3, 3}, PadLo: []int{0, 2}, PadHi: []int{2, 0}}, true, true, true},
		{"odd rows", Params{N: 1, C: 8, O: 8, Groups: 1, In: []int{7, 32}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}, false, false, false},
		{"narrow rows", Params{N: 1, C: 8, O: 8, Groups: 1, In: []int{8, 16}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}, false, false, false},
		{"dilated", Params{N: 1, C: 8, O: 8, Groups: 1, In: []int{8, 32}, Kernel: []int{3, 3}, RhsDil: []int{1, 2}, PadLo: []int{1, 2}, PadHi: []int{1, 2}}, false, false, false},
		{"groups", Params{N: 1, C: 16, O: 16, Groups: 2, In: []int{8, 32}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}, false, false, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g := c.p.geom()
			for _, s := range kernelSets() {
				w := make([]float32, c.p.O*c.p.C/c.p.Groups*9)
				fwd := s.winograd(&g, g.forwardShift(), w, g.og, g.cg) != nil
				bwd := s.winograd(&g, g.backwardShift(), w, g.cg, g.og) != nil
				has := s.winoIn != nil
				require.Equal(t, c.fwd && has, fwd, "%s: forward in Winograd form", s.name)
				require.Equal(t, c.bwd && has, bwd, "%s: input gradient in Winograd form", s.name)
				require.Equal(t, c.kgrad && has, s.winoGrad != nil && s.winoFits(&g, g.forwardShift()), "%s: kernel gradient in Winograd form", s.name)
			}
			rng := rand.New(rand.NewPCG(4, 5))
			nx, nw, ny := sizes(&c.p)
			x, w, dy := randSlice(rng, nx), randSlice(rng, nw), randSlice(rng, ny)
			ry, rdx, rdw := newRef(ny), newRef(nx), newRef(nw)
			refEach(&c.p, func(yi, xi, wi int) {
				ry.add(yi, w[wi], x[xi])
				rdx.add(xi, w[wi], dy[yi])
				rdw.add(wi, x[xi], dy[yi])
			})
			defer func(m float64) { parMinFlops = m }(parMinFlops)
			parMinFlops = 0
			for _, s := range kernelSets() {
				restore, _ := useKernels(s.name)
				var prev [3][]float32
				for _, threads := range []int{1, 2, 3} {
					y, dx, dw := nanSlice(ny), nanSlice(nx), nanSlice(nw)
					Forward(&c.p, y, x, w, threads)
					wf := checkWino(t, s.name+" Forward "+c.p.String(), ry, y)
					BackwardInput(&c.p, dx, dy, w, threads)
					wb := checkWino(t, s.name+" BackwardInput "+c.p.String(), rdx, dx)
					BackwardKernel(&c.p, dw, x, dy, threads)
					wk := checkWino(t, s.name+" BackwardKernel "+c.p.String(), rdw, dw)
					if threads == 1 {
						t.Logf("%s: worst error / direct bound: forward %.2f, input gradient %.2f, kernel gradient %.2f", s.name, wf, wb, wk)
					}
					if prev[0] != nil {
						require.Equal(t, prev, [3][]float32{y, dx, dw}, "threads=%d gives other bits than 1", threads)
					}
					prev = [3][]float32{y, dx, dw}
				}
				restore()
			}
		})
	}
}
