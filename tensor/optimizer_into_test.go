package tensor

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AdamStepsInto gives the bits of AdamSteps, its new parameters in their
// destinations' storage (a destination may be the parameter itself),
// fresh moments, the parameters without a destination as AdamSteps
// returns them (float64 among them), and the logical axes of the
// operands; it leaves its operands alone and refuses destinations that
// share storage with an operand or another destination.
func TestAdamStepsInto(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	rnd := func(shape ...int) *Tensor { return normalTensor(r, shape...) }
	shapes := [][]int{{3, 4}, {17}, {64, 130}, {5000}, {8, 64, 128}}
	ps, gs, mus, nus, cs := adamOperands(rnd, shapes)
	var dst []*Tensor
	for i, sh := range shapes {
		if i%2 == 1 {
			cs[i].WD = 0.02
		}
		dst = append(dst, Zeros(Float32, sh...))
	}
	ps[0] = WithLogicalAxes(ps[0], "rows", "cols")
	dst[1] = nil                            // parameter 1 to fresh storage
	ps[3] = Add(ps[3], ZerosLike(ps[3]))    // a parameter of its own, updated in place:
	dst[3] = ps[3]                          // its destination is itself
	p64 := FromFloat64s([]float64{1, 2}, 2) // float64, without a destination
	ps, gs, mus, nus, dst = append(ps, p64), append(gs, p64), append(mus, p64), append(nus, Abs(p64)), append(dst, nil)
	cs = append(cs, cs[0])
	wp, wm, wv := AdamSteps(ps, gs, mus, nus, cs)
	before := make([][]float32, len(ps))
	for i, x := range gs[:len(shapes)] {
		before[i] = x.Float32s()
	}
	p2, m2, v2 := AdamStepsInto(dst, ps, gs, mus, nus, cs)
	for i := range ps {
		if ps[i].DType() == Float64 {
			require.Equal(t, wp[i].Float64s(), p2[i].Float64s())
			continue
		}
		require.True(t, sameBits(wp[i].Float32s(), p2[i].Float32s()), "p %d", i)
		require.True(t, sameBits(wm[i].Float32s(), m2[i].Float32s()), "mu %d", i)
		require.True(t, sameBits(wv[i].Float32s(), v2[i].Float32s()), "nu %d", i)
		require.True(t, sameBits(before[i], gs[i].Float32s()), "gradient %d unchanged", i)
		if dst[i] != nil {
			assert.Same(t, &dst[i].f32()[0], &p2[i].f32()[0], "p %d in its destination", i)
			require.True(t, sameBits(wp[i].Float32s(), dst[i].Float32s()), "destination %d", i)
		} else {
			assert.NotSame(t, &ps[i].f32()[0], &p2[i].f32()[0], "p %d", i)
		}
		assert.NotSame(t, &mus[i].f32()[0], &m2[i].f32()[0], "mu %d fresh", i)
	}
	require.Equal(t, []string{"rows", "cols"}, p2[0].LogicalAxes())
	// Without destinations: AdamSteps.
	q2, _, _ := AdamStepsInto(nil, ps[:1], gs[:1], mus[:1], nus[:1], cs[:1])
	require.True(t, sameBits(wp[0].Float32s(), q2[0].Float32s()))

	one := func(d, p, g, m, v *Tensor) func() {
		return func() { AdamStepsInto([]*Tensor{d}, []*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}, cs[:1]) }
	}
	p, g, m, v := rnd(4, 4), rnd(4, 4), rnd(4, 4), Abs(rnd(4, 4))
	tests := []struct {
		name string
		f    func()
		want string
	}{
		{"gradient", one(g, p, g, m, v), "tensor.AdamStepsInto: destination 0 f32[4,4] shares storage with operand f32[4,4]"},
		{"view of a moment", one(Reshape(m, 16), p, g, m, v), ""},
		{"shape", one(rnd(16), p, g, m, v), ""},
		{"float64", one(Zeros(Float64, 4, 4), p, g, m, v), ""},
		{"length", func() { AdamStepsInto(dst[:1], ps, gs, mus, nus, cs) }, "tensor.AdamStepsInto: 1 destinations for 6 parameters"},
		{"float64 operands", func() {
			AdamStepsInto([]*Tensor{Zeros(Float32, 2)}, ps[5:], gs[5:], mus[5:], nus[5:], cs[5:])
		}, ""},
		{"two destinations", func() {
			d := rnd(4, 4)
			AdamStepsInto([]*Tensor{d, d}, []*Tensor{p, rnd(4, 4)}, []*Tensor{g, g}, []*Tensor{m, m}, []*Tensor{v, v}, cs[:2])
		}, "tensor.AdamStepsInto: destinations 0 and 1 share storage"},
		{"first and third destinations", func() {
			d := rnd(4, 4)
			AdamStepsInto([]*Tensor{d, rnd(4, 4), Reshape(d, 16)}, []*Tensor{p, rnd(4, 4), rnd(16)},
				[]*Tensor{g, g, rnd(16)}, []*Tensor{m, m, rnd(16)}, []*Tensor{v, v, Abs(rnd(16))}, cs[:3])
		}, "tensor.AdamStepsInto: destinations 0 and 2 share storage"},
		{"another parameter's moment", func() {
			AdamStepsInto([]*Tensor{rnd(4, 4), m}, []*Tensor{p, rnd(4, 4)}, []*Tensor{g, g}, []*Tensor{m, rnd(4, 4)}, []*Tensor{v, v}, cs[:2])
		}, "tensor.AdamStepsInto: destination 1 f32[4,4] shares storage with operand f32[4,4]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.want != "" {
				assert.PanicsWithValue(t, tt.want, tt.f)
			} else {
				assert.Panics(t, tt.f)
			}
		})
	}
}

// AdamStepsIntoOverMoments gives the bits of AdamSteps, each new
// parameter in its destination and its new moments over the old moments'
// storage, with their logical axes; a moment whose storage is shared with
// another operand (a moment at two positions, the first moment a view of
// the second's storage) goes to fresh storage, as does every moment of a
// parameter without a destination.
func TestAdamStepsIntoOverMoments(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	rnd := func(shape ...int) *Tensor { return normalTensor(r, shape...) }
	shapes := [][]int{{3, 4}, {5000}, {64, 130}, {16}, {16}}
	ps, gs, mus, nus, cs := adamOperands(rnd, shapes)
	var dst []*Tensor
	for _, sh := range shapes {
		dst = append(dst, Zeros(Float32, sh...))
	}
	mus[0] = WithLogicalAxes(mus[0], "rows", "cols")
	dst[1] = nil // parameter 1 to fresh storage
	// Parameter 3's first moment is parameter 4's second: both fresh.
	nus[4] = Abs(mus[3])
	mus[3] = nus[4]
	wp, wm, wv := AdamSteps(ps, gs, mus, nus, cs)
	old := func(xs []*Tensor) []*float32 {
		out := make([]*float32, len(xs))
		for i, x := range xs {
			out[i] = &x.f32()[0]
		}
		return out
	}
	om, ov := old(mus), old(nus)
	p2, m2, v2 := AdamStepsIntoOverMoments(dst, ps, gs, mus, nus, cs)
	for i := range ps {
		require.True(t, sameBits(wp[i].Float32s(), p2[i].Float32s()), "p %d", i)
		require.True(t, sameBits(wm[i].Float32s(), m2[i].Float32s()), "mu %d", i)
		require.True(t, sameBits(wv[i].Float32s(), v2[i].Float32s()), "nu %d", i)
		over := dst[i] != nil && i != 3
		assert.Equal(t, over, om[i] == &m2[i].f32()[0], "mu %d over the old one", i)
		assert.Equal(t, dst[i] != nil && i != 4, ov[i] == &v2[i].f32()[0], "nu %d over the old one", i)
	}
	require.Equal(t, []string{"rows", "cols"}, m2[0].LogicalAxes())
}

// SGDStepInto gives the bits of SGDStep (plain, momentum, Nesterov), its
// new parameter in its destination (which may be the parameter itself)
// and a fresh trace; nil writes nowhere; a destination over the gradient
// panics.
func TestSGDStepInto(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	rnd := func(shape ...int) *Tensor { return normalTensor(r, shape...) }
	for _, n := range []int{7, 300_000} {
		p, g, tr := WithLogicalAxes(rnd(n), "x"), rnd(n), rnd(n)
		for _, c := range []struct {
			t        *Tensor
			mu       float32
			nesterov bool
		}{{nil, 0, false}, {tr, 0.9, false}, {tr, 0.9, true}} {
			wp, wt := SGDStep(p, g, c.t, c.mu, -0.1, c.nesterov)
			for k, d := range []*Tensor{Zeros(Float32, n), Add(p, ZerosLike(p))} {
				q := p
				if k == 1 { // the parameter's own copy, updated in place
					q = d
				}
				p2, t2 := SGDStepInto(d, q, g, c.t, c.mu, -0.1, c.nesterov)
				require.True(t, sameBits(wp.Float32s(), p2.Float32s()))
				assert.Same(t, &d.f32()[0], &p2.f32()[0])
				if c.t != nil {
					require.True(t, sameBits(wt.Float32s(), t2.Float32s()))
					assert.NotSame(t, &c.t.f32()[0], &t2.f32()[0])
				} else {
					assert.Nil(t, t2)
				}
			}
			require.Equal(t, []string{"x"}, wp.LogicalAxes())
		}
		q2, _ := SGDStepInto(nil, p, g, nil, 0, -0.1, false)
		require.True(t, sameBits(Add(p, MulScalar(g, -0.1)).Float32s(), q2.Float32s()))
		assert.PanicsWithValue(t, fmt.Sprintf("tensor.SGDStepInto: destination 0 f32[%d] shares storage with operand f32[%d]", n, n),
			func() { SGDStepInto(g, p, g, nil, 0, -0.1, false) })
	}
}

// normalTensor returns a float32 tensor of the given shape with standard
// normal elements drawn from r.
func normalTensor(r *rand.Rand, shape ...int) *Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		d[i] = float32(r.NormFloat64())
	}
	return FromFloat32(d, shape...)
}

// adamOperands draws, shape by shape, a parameter, a gradient and a first
// moment from draw, and a second moment as the absolute value of a fourth
// draw, with Adam's coefficients for the optimizer tests (bias
// corrections of the first step, no weight decay) for each.
func adamOperands(draw func(shape ...int) *Tensor, shapes [][]int) (ps, gs, mus, nus []*Tensor, cs []AdamCoeffs) {
	for _, sh := range shapes {
		ps, gs, mus = append(ps, draw(sh...)), append(gs, draw(sh...)), append(mus, draw(sh...))
		nus = append(nus, Abs(draw(sh...)))
		cs = append(cs, AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 1 / 0.19, B: 0.5, C2: 1 / 0.001999, Eps: 1e-8, EpsRoot: 1e-9, Post: -0.003})
	}
	return ps, gs, mus, nus, cs
}
