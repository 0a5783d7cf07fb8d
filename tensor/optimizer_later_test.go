package tensor

import (
	"math/rand/v2"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// pieces calls step for every element of a parameter of n elements
// exactly once, in pieces of random lengths taken in a random order.
func pieces(r *rand.Rand, g []float32, step PieceStep) {
	var cuts []int
	for at := 0; at < len(g); {
		cuts = append(cuts, at)
		at += 1 + r.IntN(200)
	}
	cuts = append(cuts, len(g))
	for _, i := range r.Perm(len(cuts) - 1) {
		step(cuts[i], g[cuts[i]:min(cuts[i+1], len(g))])
	}
}

// AdamStepIntoOverMomentsLater, its gradient given in pieces in any
// order, gives the bits of AdamSteps, the parameter in its destination
// and the moments over the old ones (all fresh without a destination); a
// piece outside
// the parameter and a destination over a moment panic.
func TestAdamStepIntoOverMomentsLater(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func(shape ...int) *Tensor { return normalTensor(r, shape...) }
	c := AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1 / 0.19, B: 0.5, C2: 1 / 0.001999, Eps: 1e-8, Post: -0.003}
	for _, wd := range []float32{0, 0.02} {
		for _, into := range []bool{true, false} {
			c.WD = wd
			p, g, mu, nu := rnd(37, 70), rnd(37, 70), rnd(37, 70), Abs(rnd(37, 70))
			wp, wm, wv := AdamSteps([]*Tensor{p}, []*Tensor{g}, []*Tensor{mu}, []*Tensor{nu}, []AdamCoeffs{c})
			var dst *Tensor
			if into {
				dst = Zeros(Float32, 37, 70)
			}
			p2, m2, v2, step := AdamStepIntoOverMomentsLater(dst, p, mu, nu, c)
			pieces(r, g.Float32s(), step)
			require.True(t, sameBits(wp[0].Float32s(), p2.Float32s()), "p, wd %v, into %v", wd, into)
			require.True(t, sameBits(wm[0].Float32s(), m2.Float32s()), "mu")
			require.True(t, sameBits(wv[0].Float32s(), v2.Float32s()), "nu")
			if into {
				assert.Same(t, &dst.f32()[0], &p2.f32()[0], "p in its destination")
				assert.Same(t, &mu.f32()[0], &m2.f32()[0], "mu over the old")
				assert.Same(t, &nu.f32()[0], &v2.f32()[0], "nu over the old")
			} else {
				assert.NotSame(t, &p.f32()[0], &p2.f32()[0], "p fresh")
				assert.NotSame(t, &mu.f32()[0], &m2.f32()[0], "mu fresh without a destination")
				assert.NotSame(t, &nu.f32()[0], &v2.f32()[0], "nu fresh without a destination")
			}
		}
	}
	p, mu, nu := rnd(4, 4), rnd(4, 4), Abs(rnd(4, 4))
	_, _, _, step := AdamStepIntoOverMomentsLater(nil, p, mu, nu, c)
	require.PanicsWithValue(t, "tensor.AdamStepIntoOverMomentsLater: step of elements [10, 18) of a parameter of 16", func() { step(10, make([]float32, 8)) })
	require.Panics(t, func() { AdamStepIntoOverMomentsLater(mu, p, mu, nu, c) }, "destination over a moment")
	require.PanicsWithValue(t, "tensor.AdamStepIntoOverMomentsLater: f32[4,4], f32[16], f32[4,4]: want float32 tensors of one shape",
		func() { AdamStepIntoOverMomentsLater(nil, p, rnd(16), nu, c) })
}

// SGDStepIntoLater, its gradient given in pieces, gives the bits of
// SGDStep, with and without momentum and Nesterov, the trace over the
// old one.
func TestSGDStepIntoLater(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	for _, mom := range []float32{0, 0.9} {
		for _, nesterov := range []bool{false, true} {
			p, g := normalTensor(r, 33, 65), normalTensor(r, 33, 65)
			var tr *Tensor
			if mom != 0 {
				tr = normalTensor(r, 33, 65)
			}
			wp, wt := SGDStep(p, g, tr, mom, -0.05, nesterov)
			dst := Zeros(Float32, 33, 65)
			p2, t2, step := SGDStepIntoLater(dst, p, tr, mom, -0.05, nesterov)
			pieces(r, g.Float32s(), step)
			require.True(t, sameBits(wp.Float32s(), p2.Float32s()), "p, momentum %v, nesterov %v", mom, nesterov)
			assert.Same(t, &dst.f32()[0], &p2.f32()[0])
			if mom == 0 {
				require.Nil(t, t2)
				continue
			}
			require.True(t, sameBits(wt.Float32s(), t2.Float32s()), "trace")
			assert.Same(t, &tr.f32()[0], &t2.f32()[0], "trace over the old")
		}
	}
	p := normalTensor(r, 4, 4)
	require.PanicsWithValue(t, "tensor.SGDStepIntoLater: f32[4,4], f32[16]: want float32 tensors of one shape",
		func() { SGDStepIntoLater(nil, p, normalTensor(r, 16), 0.9, -0.05, false) })
	require.PanicsWithValue(t, "tensor.SGDStepIntoLater: f64[4,4]: want float32 tensors of one shape",
		func() { SGDStepIntoLater(nil, AsType(p, Float64), nil, 0, -0.05, false) })
}

// SumProductsPartThen hands over every element of the part exactly once,
// in order, block by block, with the bits of SumProductsPart, which is
// within float32 rounding of the sum computed in float64: parts along
// either dimension, of more rows than a block (256 and 512: several
// blocks), several terms, one gathered term, a term without rows.
func TestSumProductsPartThen(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	cases := []struct {
		name        string
		rows        []int // of each term
		m, n        int
		dim, lo, hi int
	}{
		{"dim 0, 2 terms", []int{128, 128}, 512, 1024, 0, 128, 384},
		{"dim 1, 2 terms", []int{64, 64}, 512, 1024, 1, 256, 768},
		{"gathered", []int{256}, 784, 1024, 0, 98, 196},
		{"empty term", []int{0, 40, 24}, 200, 96, 0, 0, 100},
		{"small", []int{3}, 5, 7, 1, 2, 5},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var ps, qs []*Tensor
			for _, k := range tc.rows {
				ps, qs = append(ps, normalTensor(r, k, tc.m)), append(qs, normalTensor(r, k, tc.n))
			}
			want := SumProductsPart(ps, qs, tc.dim, tc.lo, tc.hi)
			got := make([]float32, want.Size())
			next, blocks := 0, 0
			SumProductsPartThen(ps, qs, tc.dim, tc.lo, tc.hi, func(at int, g []float32) {
				require.Equal(t, next, at, "blocks in order")
				require.Zero(t, len(g)%want.Dim(1), "whole rows")
				copy(got[at:], g)
				next += len(g)
				blocks++
			})
			require.Equal(t, want.Size(), next, "every element")
			require.True(t, sameBits(want.Float32s(), got))
			require.Equal(t, (want.Dim(0)+partBlockRows-1)/partBlockRows, blocks)
			// Against float64.
			wf := want.Float32s()
			for _, e := range []int{0, len(wf) / 3, len(wf) - 1} {
				i, j := e/want.Dim(1), e%want.Dim(1)
				if tc.dim == 0 {
					i += tc.lo
				} else {
					j += tc.lo
				}
				var s float64
				for k, p := range ps {
					pd, qd := p.Float32s(), qs[k].Float32s()
					for row := range tc.rows[k] {
						s += float64(pd[row*tc.m+i]) * float64(qd[row*tc.n+j])
					}
				}
				require.InDelta(t, s, float64(wf[e]), 1e-4*(1+abs64(s)), "element %d", e)
			}
		})
	}
	require.Panics(t, func() { SumProductsPartThen(nil, nil, 0, 0, 1, func(int, []float32) {}) })
}

// abs64 returns |x|.
func abs64(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

// StepFrom hands a PieceStep every element of a whole gradient exactly
// once, split over the cores where the gradient is large enough (and
// gathered first where it is a view): the bits of AdamSteps; a gradient
// that is not float32 panics.
func TestStepFrom(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	c := AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1 / 0.19, C2: 1 / 0.001999, Eps: 1e-8, Post: -0.003}
	for _, shape := range [][]int{{37, 70}, {512, 1024}} {
		for _, view := range []bool{false, true} {
			p, mu, nu := normalTensor(r, shape...), normalTensor(r, shape...), Abs(normalTensor(r, shape...))
			g := normalTensor(r, shape...)
			if view {
				g = Transpose(normalTensor(r, shape[1], shape[0]), 1, 0)
			}
			wp, wm, wv := AdamSteps([]*Tensor{p}, []*Tensor{g}, []*Tensor{mu}, []*Tensor{nu}, []AdamCoeffs{c})
			p2, m2, v2, step := AdamStepIntoOverMomentsLater(nil, p, mu, nu, c)
			var mu2 sync.Mutex
			seen := make([]int, p.Size())
			StepFrom(func(at int, g []float32) {
				mu2.Lock()
				for i := range g {
					seen[at+i]++
				}
				mu2.Unlock()
				step(at, g)
			}, g)
			for i, n := range seen {
				require.Equal(t, 1, n, "element %d of %v, view %v", i, shape, view)
			}
			require.True(t, sameBits(wp[0].Float32s(), p2.Float32s()), "p of %v, view %v", shape, view)
			require.True(t, sameBits(wm[0].Float32s(), m2.Float32s()), "mu")
			require.True(t, sameBits(wv[0].Float32s(), v2.Float32s()), "nu")
		}
	}
	_, _, _, step := AdamStepIntoOverMomentsLater(nil, normalTensor(r, 4), normalTensor(r, 4), Abs(normalTensor(r, 4)), c)
	require.Panics(t, func() { StepFrom(step, Zeros(Int32, 4)) }, "an int32 gradient")
}
