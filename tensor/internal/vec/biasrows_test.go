package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestAddBiasRowsMatchesAddVVRelu: AddBiasRows gives the bits of AddVV
// then Relu row by row (NaN, -0 and the masked last columns included), in
// place too; without AVX-512 it does nothing and says so.
func TestAddBiasRowsMatchesAddVVRelu(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, c := range []struct{ rows, n int }{{16, 128}, {16, 10}, {3, 16}, {5, 33}, {1, 1}, {4, 7}} {
		for _, relu := range []bool{false, true} {
			t.Run(fmt.Sprintf("%dx%d/relu=%v", c.rows, c.n, relu), func(t *testing.T) {
				x := make([]float32, c.rows*c.n)
				for i := range x {
					x[i] = float32(r.NormFloat64())
				}
				b := make([]float32, c.n)
				for i := range b {
					b[i] = float32(r.NormFloat64())
				}
				x[0], b[0] = float32(math.NaN()), 1
				if len(x) > 2 {
					x[1], b[1%c.n] = float32(math.Copysign(0, -1)), float32(math.Copysign(0, -1))
				}
				want := make([]float32, len(x))
				for i := 0; i < len(x); i += c.n {
					AddVV(want[i:i+c.n], x[i:i+c.n], b)
					if relu {
						Relu(want[i:i+c.n], want[i:i+c.n])
					}
				}
				got := make([]float32, len(x))
				ok := AddBiasRows(got, x, b, relu)
				require.Equal(t, useAVX512, ok)
				if !ok {
					return
				}
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "element %d", i)
				}
				AddBiasRows(x, x, b, relu) // in place
				for i := range want {
					require.Equal(t, math.Float32bits(want[i]), math.Float32bits(x[i]), "in place, element %d", i)
				}
			})
		}
	}
	require.Panics(t, func() { AddBiasRows(make([]float32, 10), make([]float32, 10), make([]float32, 3), false) })
}
