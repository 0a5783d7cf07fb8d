package shard

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestSumFloat32(t *testing.T) {
	for _, g := range []int{1, 2, 3, 4, 5, 7, 8, 9, 11, 16, 19} {
		r := rand.New(rand.NewPCG(uint64(g), 9))
		ins := make([][]float32, g)
		for k := range ins {
			ins[k] = make([]float32, 41)
			for i := range ins[k] {
				ins[k][i] = float32(r.NormFloat64())
			}
		}
		for _, span := range [][2]int{{0, 41}, {3, 29}, {7, 7}} {
			lo, hi := span[0], span[1]
			want := make([]float64, hi-lo)
			for _, in := range ins {
				for i := lo; i < hi; i++ {
					want[i-lo] += float64(in[i])
				}
			}
			dst := make([]float32, hi-lo)
			for i := range dst {
				dst[i] = 999 // must be overwritten
			}
			sumFloat32(dst, ins, lo, hi)
			got := make([]float64, len(dst))
			for i, v := range dst {
				got[i] = float64(v)
			}
			assert.InDeltaSlice(t, want, got, 1e-5, "g=%d span=%v", g, span)
		}
	}
}
