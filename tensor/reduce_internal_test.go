package tensor

import (
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule cases of log_sum_exp: along the last axis and along a middle
// one (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "logSumExpOp", op: &logSumExpOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 5)) },
		f:  fn1(func(x *Tensor) *Tensor { return LogSumExpKeep(x, -1) })},
	ruleCase{name: "logSumExpOp", op: &logSumExpOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 4, 3)) },
		f:  fn1(func(x *Tensor) *Tensor { return LogSumExp(x, 1) })},
)

// lseRef is log Σ exp over one axis of x (shape outer×n×inner) in float64.
func lseRef(x []float32, outer, n, inner int) []float64 {
	out := make([]float64, outer*inner)
	for o := range outer {
		for i := range inner {
			m := math.Inf(-1)
			for j := range n { // NaN wins, as in Max
				if v := float64(x[(o*n+j)*inner+i]); v > m || math.IsNaN(v) {
					m = v
					if math.IsNaN(v) {
						break
					}
				}
			}
			if math.IsInf(m, 0) || math.IsNaN(m) {
				out[o*inner+i] = m
				continue
			}
			s := 0.0
			for j := range n {
				s += math.Exp(float64(x[(o*n+j)*inner+i]) - m)
			}
			out[o*inner+i] = m + math.Log(s)
		}
	}
	return out
}

// log_sum_exp against a float64 loop, on lanes of every length around the
// vector kernels' widths, contiguous and strided, with special values; the
// same bits on one goroutine and on four (the MoE router's [2048, 8]).
func TestLogSumExpOp(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 1))
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, shape := range [][]int{{1, 1}, {3, 7}, {5, 16}, {4, 17}, {2, 33}, {2048, 8}, {3, 70, 2}, {6, 9, 5}} {
		for axis := range shape {
			x := randTensor(rng, shape...)
			d := x.f32()
			if len(d) > 8 { // a lane with -Inf, one with +Inf, one with NaN
				d[0], d[len(d)-1], d[len(d)/2] = -inf, inf, nan
			}
			outer, n, inner := srtLanes(shape, axis)
			want := lseRef(d, outer, n, inner)
			got := LogSumExp(x, axis).Float32s()
			require.Len(t, got, len(want))
			for i, w := range want {
				if math.IsNaN(w) {
					require.True(t, math.IsNaN(float64(got[i])), "%v axis %d lane %d: %v", shape, axis, i, got[i])
					continue
				}
				require.InDelta(t, w, float64(got[i]), 1e-6*math.Max(1, math.Abs(w)), "%v axis %d lane %d", shape, axis, i)
			}
			old := runtime.GOMAXPROCS(1)
			serial := LogSumExp(x, axis).Float32s()
			runtime.GOMAXPROCS(4)
			split := LogSumExp(x, axis).Float32s()
			runtime.GOMAXPROCS(old)
			for i := range serial {
				require.Equal(t, math.Float32bits(serial[i]), math.Float32bits(split[i]), "%v axis %d lane %d", shape, axis, i)
			}
		}
	}
	// Lanes made only of -Inf give -Inf (the composition's answer), a
	// lane holding -Inf among finite values ignores it.
	x := FromFloat32([]float32{-inf, -inf, -inf, 0, float32(math.Log(3)), 0}, 2, 3)
	require.Equal(t, []float32{-inf, float32(math.Log(5))}, LogSumExp(x, 1).Float32s())
	x = FromFloat32([]float32{-inf, 0, -inf, 0, -inf, 0}, 3, 2)
	require.Equal(t, []float32{-inf, float32(math.Log(3))}, LogSumExp(x, 0).Float32s())
}

// LogSumExp's VJP along the last axis scales the fresh softmax in place
// by the cotangent (scaleRowsInPlace) with the bits of Mul(g, softmax),
// split over the workers or not, and falls back to Mul where the softmax
// is shared or the cotangent is traced.
func TestLogSumExpGradInPlace(t *testing.T) {
	rng := rand.New(rand.NewPCG(32, 1))
	for _, shape := range [][]int{{1, 1}, {3, 7}, {2048, 8}, {4, 5, 16}, {5, 40}} {
		for _, procs := range []int{1, 4} {
			x := randTensor(rng, shape...)
			gshape := append([]int(nil), shape...)
			gshape[len(gshape)-1] = 1
			g := randTensor(rng, gshape...)
			want := Mul(g, Softmax(x, -1)).Float32s()
			old := runtime.GOMAXPROCS(procs)
			s := Softmax(x, -1)
			ok := scaleRowsInPlace(s, g, x)
			// Through the op's VJP (the backward pass of a trace).
			tr := NewTrace()
			xt := tr.Leaf(x)
			y := LogSumExpKeep(xt, -1)
			vjp := Backward(tr, []*Tensor{y}, []*Tensor{g}, []*Tensor{xt}, false)[0]
			runtime.GOMAXPROCS(old)
			require.True(t, ok, "%v: the in-place path must run on a fresh softmax", shape)
			for i, w := range want {
				require.Equal(t, math.Float32bits(w), math.Float32bits(s.f32()[i]), "%v procs %d element %d", shape, procs, i)
				require.Equal(t, math.Float32bits(w), math.Float32bits(vjp.f32()[i]), "%v procs %d element %d (VJP)", shape, procs, i)
			}
		}
	}
	x, g := randTensor(rng, 3, 4), randTensor(rng, 3, 1)
	s := Softmax(x, -1)
	view := Reshape(s, 4, 3) // a second holder of s's storage
	require.False(t, scaleRowsInPlace(s, g, x), "a shared softmax must not be written")
	require.Equal(t, Softmax(x, -1).Float32s(), view.Float32s())
	tr := NewTrace()
	require.False(t, scaleRowsInPlace(Softmax(x, -1), tr.Leaf(g), x), "a traced cotangent needs Mul's VJP")
	require.False(t, scaleRowsInPlace(Softmax(x, -1), randTensor(rng, 3, 4), x), "one cotangent element a row")
}
