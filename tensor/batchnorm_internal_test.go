package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// bn applies BatchNorm to x, weight, bias (and a residual) with act.
func bn(act Activation) func([]*Tensor) []*Tensor {
	return func(x []*Tensor) []*Tensor {
		var r *Tensor
		if len(x) == 4 {
			r = x[3]
		}
		y, m, v := BatchNorm(x[0], x[1], x[2], r, 1e-5, act)
		return []*Tensor{y, m, v}
	}
}

// The rule cases of batch_norm and of its input gradient's sweep
// (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "batchNormOp", op: &batchNormOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4), rF(r, 3), rF(r, 3)) },
		f:  bn(ActIdentity), vmapTol: 1e-5, fdTol: 1e-2, tTol: 1e-4},
	ruleCase{name: "batchNormOp", op: &batchNormOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4), rF(r, 3), rF(r, 3), rF(r, 2, 3, 4)) },
		f:  bn(ActTanh), vmapTol: 1e-5, fdTol: 1e-2, tTol: 1e-4},
	// Relu has a kink: no finite differences.
	ruleCase{name: "batchNormOp", op: &batchNormOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 4, 3), rF(r, 3), rF(r, 3), rF(r, 4, 3)) },
		f:  bn(ActRelu), vmapTol: 1e-5, noFD: true, tTol: 1e-4},
	ruleCase{name: "batchNormOp", op: &batchNormOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4), rF(r, 3), rF(r, 3)) },
		f:  bn(ActRelu), vmapTol: 1e-5, noFD: true, tTol: 1e-4},
	// The relu mask is piecewise constant in y: no finite differences.
	ruleCase{name: "channelAffine2Op", op: &channelAffine2Op,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 3, 5), rF(r, 2, 3, 5), rF(r, 1, 3, 1), rF(r, 1, 3, 1), rF(r, 1, 3, 1), rAway(r, 2, 3, 5))
		},
		f: ap(&channelAffine2Op, nil), noFD: true},
	ruleCase{name: "channelAffineGradOp", op: &channelAffineGradOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 5), rF(r, 2, 3, 5), rAway(r, 2, 3, 5)) },
		f:  ap(&channelAffineGradOp, nil), vmapTol: 1e-5, noFD: true},
	ruleCase{name: "channelAffine2Op", op: &channelAffine2Op,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 3, 5), rF(r, 2, 3, 5), rF(r, 1, 3, 1), rF(r, 1, 3, 1), rF(r, 1, 3, 1))
		},
		f: ap(&channelAffine2Op, nil)},
)

// The sweeps split over goroutines give the serial results bit for bit,
// forward and backward.
func TestBatchNormParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(81, 1))
	x, g, r := randTensor(rng, 3, 8, 5, 7), randTensor(rng, 3, 8, 5, 7), randTensor(rng, 3, 8, 5, 7)
	w, b := randTensor(rng, 8), randTensor(rng, 8)
	run := func() []*Tensor {
		var out []*Tensor
		// The residual's gradient wanted (the mask materialised) or not
		// (applied by the sweeps).
		for _, resGrad := range []bool{true, false} {
			tr := NewTrace()
			l := []*Tensor{tr.Leaf(x), tr.Leaf(w), tr.Leaf(b)}
			lr := r
			if resGrad {
				lr = tr.Leaf(r)
				l = append(l, lr)
			}
			y, _, _ := BatchNorm(l[0], l[1], l[2], lr, 1e-5, ActRelu)
			out = append(append(out, y), Backward(tr, []*Tensor{y}, []*Tensor{g}, l, false)...)
		}
		return out
	}
	want := run()
	withParallel(t, 16)
	spawned := parallelSpawned.Load()
	got := run()
	require.Greater(t, parallelSpawned.Load(), spawned, "no goroutine started")
	for i := range want {
		require.Equal(t, want[i].f32(), got[i].f32(), "result %d", i)
	}
}
