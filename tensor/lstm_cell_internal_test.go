package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule cases of lstm_cell and its backward op (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "lstmCellOp", op: &lstmCellOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 12), rF(r, 2, 3)) },
		f:  ap(&lstmCellOp, 1)},
	ruleCase{name: "lstmCellOp", op: &lstmCellOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 12), rF(r, 2, 12), rF(r, 2, 3)) },
		f:  ap(&lstmCellOp, 2)},
	ruleCase{name: "lstmCellBwdOp", op: &lstmCellBwdOp,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 3), rF(r, 2, 3), rF(r, 2, 3), rF(r, 2, 3), rU(r, 0.1, 0.9, 2, 12))
		},
		f: ap(&lstmCellBwdOp, nil)},
)

// The rule cases of gru_cell and its backward op (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "gruCellOp", op: &gruCellOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 9), rF(r, 2, 9), rF(r, 2, 3)) },
		f:  ap(&gruCellOp, nil)},
	ruleCase{name: "gruCellBwdOp", op: &gruCellBwdOp,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 3), rF(r, 2, 9), rF(r, 2, 3), rU(r, 0.1, 0.9, 2, 9))
		},
		f: ap(&gruCellBwdOp, nil)},
)

// The cells' kernels split over goroutines give the serial results bit
// for bit, float32 and float64.
func TestCellKernelsParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(151, 1))
	for _, dt := range []DType{Float32, Float64} {
		t.Run(dt.String(), func(t *testing.T) { cellKernelsParallel(t, rng, dt) })
	}
}

func cellKernelsParallel(t *testing.T, rng *rand.Rand, dt DType) {
	{
		xp, hh, c := Convert(randTensor(rng, 70, 64), dt), Convert(randTensor(rng, 70, 64), dt), Convert(randTensor(rng, 70, 16), dt)
		gx, gh, h := Convert(randTensor(rng, 70, 48), dt), Convert(randTensor(rng, 70, 48), dt), Convert(randTensor(rng, 70, 16), dt)
		d := Convert(randTensor(rng, 70, 16), dt)
		run := func() []*Tensor {
			out := ApplyN(lstmCellOp, 2, xp, hh, c)
			out = append(out, ApplyN(lstmCellBwdOp, nil, d, c, c, out[1], out[2])...)
			g := ApplyN(gruCellOp, nil, gx, gh, h)
			out = append(out, g...)
			return append(out, ApplyN(gruCellBwdOp, nil, d, gh, h, g[1])...)
		}
		want := run()
		withParallel(t, 16)
		spawned := parallelSpawned.Load()
		got := run()
		require.Greater(t, parallelSpawned.Load(), spawned, "no goroutine started")
		for i := range want {
			require.Equal(t, want[i].Float64s(), got[i].Float64s(), "%v result %d", dt, i)
		}
	}
}
