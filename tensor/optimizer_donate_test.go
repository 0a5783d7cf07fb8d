package tensor

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// AdamStepsDonating gives the bits of AdamSteps, writes each result over
// its old value's storage when that storage is the operand's alone (else
// into new storage, the shared storage left as it was), and leaves every
// operand donated.
func TestAdamStepsDonating(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	owned := func(shape ...int) *Tensor { // allocator-made storage, as an op's result
		d := make([]float32, numel(shape))
		for i := range d {
			d[i] = float32(r.NormFloat64())
		}
		return Neg(Neg(FromFloat32(d, shape...)))
	}
	shapes := [][]int{{3, 4}, {17}, {64, 130}, {5000}, {8, 64, 128}}
	ps, gs, mus, nus, cs := adamOperands(owned, shapes)
	for i := range cs {
		if i%2 == 1 {
			cs[i].WD = 0.02
		}
	}
	named := WithLogicalAxes(ps[0], "rows", "cols")
	Donate(ps[0]) // named alone holds the storage
	ps[0] = named
	// Shared storage: a view holds parameter 1's, and parameter 2's
	// moments are one tensor, so those results need new storage.
	view := Reshape(ps[1], 1, 17)
	viewBefore := view.Float32s()
	mus[2] = Abs(mus[2])
	nus[2] = mus[2]
	wp, wm, wv := AdamSteps(ps, gs, mus, nus, cs)
	var storage []*float32
	for i := range shapes {
		storage = append(storage, &ps[i].f32()[0], &mus[i].f32()[0], &nus[i].f32()[0])
	}
	in := append(append(append(append([]*Tensor(nil), ps...), gs...), mus...), nus...)
	p2, m2, v2 := AdamStepsDonating(ps, gs, mus, nus, cs)
	for i := range shapes {
		require.True(t, sameBits(wp[i].Float32s(), p2[i].Float32s()), "p %d", i)
		require.True(t, sameBits(wm[i].Float32s(), m2[i].Float32s()), "mu %d", i)
		require.True(t, sameBits(wv[i].Float32s(), v2[i].Float32s()), "nu %d", i)
		for j, x := range []*Tensor{p2[i], m2[i], v2[i]} {
			shared := i == 1 && j == 0 || i == 2 && j > 0
			assert.Equal(t, !shared, &x.f32()[0] == storage[3*i+j], "parameter %d result %d over its operand's storage", i, j)
		}
	}
	require.Equal(t, []string{"rows", "cols"}, p2[0].LogicalAxes())
	require.Equal(t, viewBefore, view.Float32s(), "a view of a parameter keeps its values")
	for k, x := range in {
		require.True(t, x.IsDonated(), "operand %d", k)
	}
	// The results are ordinary tensors: donated, their storage is recycled.
	Donate(p2...)
	Donate(m2...)
	Donate(v2...)
	assert.PanicsWithValue(t, "tensor.AdamStepsDonating: 2 parameters, 1 gradients, 2 and 2 moments, 2 coefficients: want as many of each",
		func() { AdamStepsDonating(wp[:2], wp[:1], wm[:2], wv[:2], cs[:2]) })
	assert.Panics(t, func() { AdamStepsDonating(ps[:1], gs[:1], mus[:1], nus[:1], cs[:1]) }, "donated operands")
}

// sameBits reports whether a and b hold the same float32 bits.
func sameBits(a, b []float32) bool {
	return slices.EqualFunc(a, b, func(x, y float32) bool { return math.Float32bits(x) == math.Float32bits(y) })
}

// float64 operands go through AdamSteps: its bits, and the operands
// donated.
func TestAdamStepsDonatingFloat64(t *testing.T) {
	p := FromFloat64s([]float64{1, 2, 3}, 3)
	g := FromFloat64s([]float64{0.5, -1, 2}, 3)
	m := FromFloat64s([]float64{0, 0.1, 0.2}, 3)
	v := FromFloat64s([]float64{0, 0.01, 0.02}, 3)
	c := []AdamCoeffs{{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: 10, C2: 1000, Eps: 1e-8, Post: -0.01}}
	wp, _, _ := AdamSteps([]*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}, c)
	p2, _, _ := AdamStepsDonating([]*Tensor{p}, []*Tensor{g}, []*Tensor{m}, []*Tensor{v}, c)
	require.Equal(t, wp[0].Float64s(), p2[0].Float64s())
	for _, x := range []*Tensor{p, g, m, v} {
		require.True(t, x.IsDonated())
	}
}
