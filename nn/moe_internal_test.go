package nn

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// DropOverCapacity gives DropTokenMask's mask (a sort of all the choices
// by expert and priority, as tensor ops) on choices with tied, zero,
// negative-zero and NaN priorities, at capacities from none to all.
func TestDropOverCapacityMatchesDropTokenMask(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	const n, experts = 600, 6
	ids := make([]int, n)
	ids32 := make([]int32, n)
	probs := make([]float32, n)
	nan := float32(math.NaN())
	negZero := float32(math.Copysign(0, -1))
	for i := range ids {
		e := r.IntN(experts)
		if r.IntN(3) == 0 {
			e = 0 // a crowded expert
		}
		ids[i], ids32[i] = e, int32(e)
		switch r.IntN(8) {
		case 0:
			probs[i] = 0.25 // ties
		case 1:
			probs[i] = 0
		case 2:
			probs[i] = negZero
		case 3:
			probs[i] = nan
		default:
			probs[i] = r.Float32()
		}
	}
	for capacity := 0; capacity <= n; capacity += 1 + capacity/16 { // boundaries in every band
		want, _ := DropTokenMask(tensor.FromInt32(ids32), tensor.FromFloat32(probs), experts, capacity)
		got := DropOverCapacity(ids, probs, experts, capacity)
		require.Equal(t, want.Bools(), got, "capacity %d", capacity)
	}
}

// DropOverCapacity panics on arguments DropTokenMask would reject, naming
// itself.
func TestDropOverCapacityPanics(t *testing.T) {
	for _, c := range []struct {
		name     string
		ids      []int
		probs    []float32
		capacity int
		want     string
	}{
		{"expert out of range", []int{0, 4}, []float32{1, 1}, 1, "expert id 4 at index 1 is outside [0, 4)"},
		{"negative expert", []int{-1}, []float32{1}, 1, "expert id -1 at index 0"},
		{"lengths differ", []int{0, 1}, []float32{1}, 1, "2 expert ids, 1 priorities"},
		{"negative capacity", []int{0}, []float32{1}, -1, "capacity -1"},
	} {
		t.Run(c.name, func(t *testing.T) {
			defer func() {
				msg, _ := recover().(string)
				require.Contains(t, msg, "nn.DropOverCapacity: ")
				require.Contains(t, msg, c.want)
			}()
			DropOverCapacity(c.ids, c.probs, 4, c.capacity)
		})
	}
}

// nthSmallest returns the element a sort puts at k, with repeated values
// and at every k.
func TestNthSmallest(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 10, 257} {
		x := make([]uint64, n)
		for i := range x {
			x[i] = uint64(r.IntN(n/2 + 1)) // repeats
		}
		sorted := slices.Clone(x)
		slices.Sort(sorted)
		for k := range n {
			require.Equal(t, sorted[k], nthSmallest(slices.Clone(x), k), "n=%d k=%d", n, k)
		}
	}
}

// BenchmarkDropOverCapacity: a MoE layer's 2048 tokens × top-2 choices
// over 8 experts with capacity 640, half the choices on two experts.
func BenchmarkDropOverCapacity(b *testing.B) {
	r := rand.New(rand.NewPCG(3, 4))
	ids := make([]int, 4096)
	probs := make([]float32, 4096)
	for i := range ids {
		ids[i] = r.IntN(8)
		if r.IntN(2) == 0 {
			ids[i] = r.IntN(2)
		}
		probs[i] = r.Float32()
	}
	for b.Loop() {
		DropOverCapacity(ids, probs, 8, 640)
	}
}
