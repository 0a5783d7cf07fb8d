package nn_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	gmat "gonum.org/v1/gonum/mat"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// gram returns MᵀM (or MMᵀ with rows) of an r×c row-major matrix.
func gram(v []float64, r, c int, rows bool) *gmat.Dense {
	m := gmat.NewDense(r, c, v)
	var g gmat.Dense
	if rows {
		g.Mul(m, m.T())
	} else {
		g.Mul(m.T(), m)
	}
	return &g
}

func requireIdentity(t *testing.T, g *gmat.Dense, scale2 float64) {
	t.Helper()
	n, _ := g.Dims()
	for i := range n {
		for j := range n {
			want := 0.0
			if i == j {
				want = scale2
			}
			require.InDelta(t, want, g.At(i, j), 1e-5*max(1, scale2), "(%d,%d)", i, j)
		}
	}
}

func TestOrthogonal(t *testing.T) {
	key := tensor.NewKey(42)
	cases := []struct {
		name        string
		init        nn.Initializer
		shape       []int
		r, c        int  // the matrix: rows (other axes), columns (column axis)
		rows        bool // orthonormal rows (r < c) rather than columns
		transposeTo []int
	}{
		{"tall", nn.Orthogonal(1), []int{5, 3}, 5, 3, false, nil},
		{"wide", nn.Orthogonal(2), []int{2, 4}, 2, 4, true, nil},
		{"square", nn.Orthogonal(1), []int{4, 4}, 4, 4, false, nil},
		{"conv [3,3,2,4]", nn.Orthogonal(1), []int{3, 3, 2, 4}, 18, 4, false, nil},
		{"column axis 0", nn.OrthogonalAxis(1, 0), []int{3, 6}, 6, 3, false, []int{1, 0}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w := c.init(key, c.shape...)
			require.Equal(t, c.shape, w.Shape())
			m := w
			if c.transposeTo != nil {
				m = tensor.Transpose(w, c.transposeTo...)
			}
			scale := 1.0
			if c.name == "wide" {
				scale = 2
			}
			requireIdentity(t, gram(m.Float64s(), c.r, c.c, c.rows), scale*scale)
		})
	}
	// JAX's construction: Q of the QR of Normal(key, (max, min)) with
	// column signs fixed so that R has a positive diagonal.
	w := nn.Orthogonal(1)(key, 5, 3)
	a := gmat.NewDense(5, 3, tensor.Normal(key, 5, 3).Float64s())
	// Q = A R⁻¹ with R upper triangular of positive diagonal: check that
	// QᵀA is upper triangular with a positive diagonal.
	var r gmat.Dense
	r.Mul(gmat.NewDense(5, 3, w.Float64s()).T(), a)
	for i := range 3 {
		assert.Greater(t, r.At(i, i), 0.0)
		for j := range i {
			assert.InDelta(t, 0, r.At(i, j), 1e-5)
		}
	}
	// The wide case is the transpose of the tall one of the same key.
	tall := nn.Orthogonal(1)(key, 4, 2).Float32s()
	wide := nn.Orthogonal(1)(key, 2, 4)
	assert.Equal(t, tall, tensor.T(wide).Float32s())
	assert.Equal(t, []int{0, 4}, nn.Orthogonal(1)(key, 0, 4).Shape(), "empty")
	requirePanicContains(t, func() { nn.Orthogonal(1)(key, 3) }, "nn.Orthogonal: shape [3]: an orthogonal initializer needs at least 2 dimensions")
	requirePanicContains(t, func() { nn.Orthogonal(math.NaN()) }, "nn.Orthogonal: scale must be finite and >= 0, got NaN")
}

func TestDeltaOrthogonal(t *testing.T) {
	key := tensor.NewKey(1)
	w := nn.DeltaOrthogonal(1)(key, 3, 3, 2, 4)
	require.Equal(t, []int{3, 3, 2, 4}, w.Shape())
	v := w.Float32s()
	centre := nn.Orthogonal(1)(key, 2, 4).Float32s()
	for i := range 9 {
		block := v[i*8 : (i+1)*8]
		if i == 4 { // (1, 1)
			assert.Equal(t, centre, block)
		} else {
			assert.Equal(t, make([]float32, 8), block)
		}
	}
	w = nn.DeltaOrthogonal(1)(key, 4, 3, 3) // centre (4-1)/2 = 1
	assert.Equal(t, nn.Orthogonal(1)(key, 3, 3).Float32s(), w.Float32s()[9:18])
	requirePanicContains(t, func() { nn.DeltaOrthogonal(1)(key, 3, 4) }, "nn.DeltaOrthogonal: shape [3 4]: want a kernel [k..., in, out] with 1 to 3 spatial dimensions")
	requirePanicContains(t, func() { nn.DeltaOrthogonal(1)(key, 3, 4, 2) }, "nn.DeltaOrthogonal: shape [3 4 2]: in 4 must be at most out 2")
}
