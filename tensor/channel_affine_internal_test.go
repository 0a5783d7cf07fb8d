package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule cases of channel_affine and its backward sums (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "channelAffineOp", op: &channelAffineOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4), rF(r, 3), rF(r, 3)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ChannelAffine(x[0], x[1], x[2], ActIdentity), ChannelAffine(x[0], x[1], x[2], ActTanh)}
		}},
	// Relu has a kink where x·s + b = 0: no finite differences.
	ruleCase{name: "channelAffineOp", op: &channelAffineOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 4, 3), rF(r, 3), rF(r, 3)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ChannelAffine(x[0], x[1], x[2], ActRelu)}
		}, noFD: true},
	// With a residual (ChannelAffineAdd).
	ruleCase{name: "channelAffineOp", op: &channelAffineOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4), rF(r, 3), rF(r, 3), rF(r, 2, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ChannelAffineAdd(x[0], x[1], x[2], x[3], ActIdentity), ChannelAffineAdd(x[0], x[1], x[2], x[3], ActTanh)}
		}},
	ruleCase{name: "channelAffineOp", op: &channelAffineOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 4, 3), rF(r, 3), rF(r, 3), rF(r, 4, 3)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ChannelAffineAdd(x[0], x[1], x[2], x[3], ActRelu)}
		}, noFD: true},
	ruleCase{name: "channelAffineGradOp", op: &channelAffineGradOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 5), rF(r, 2, 3, 5)) },
		f:  ap(&channelAffineGradOp, nil), vmapTol: 1e-5},
	ruleCase{name: "channelAffineBwdOp", op: &channelAffineBwdOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 5), rF(r, 2, 3, 5), rF(r, 1, 3, 1)) },
		f:  ap(&channelAffineBwdOp, ActIdentity), vmapTol: 1e-5},
	// The relu mask is piecewise constant in y: no finite differences.
	ruleCase{name: "channelAffineBwdOp", op: &channelAffineBwdOp,
		in: func(r *rand.Rand) []*Tensor {
			return args(rF(r, 2, 3, 5), rF(r, 2, 3, 5), rF(r, 1, 3, 1), rAway(r, 2, 3, 5))
		},
		f: ap(&channelAffineBwdOp, ActRelu), vmapTol: 1e-5, noFD: true},
	ruleCase{name: "channelMomentsOp", op: &channelMomentsOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 5)) },
		f: func(x []*Tensor) []*Tensor {
			s, q := ChannelMoments(x[0])
			return []*Tensor{s, q}
		}, vmapTol: 1e-5},
)

// The kernels split over goroutines (rows forward, channels for the sums)
// give the serial results bit for bit.
func TestChannelKernelsParallel(t *testing.T) {
	rng := rand.New(rand.NewPCG(80, 1))
	x, g := randTensor(rng, 3, 8, 5, 7), randTensor(rng, 3, 8, 5, 7)
	s, b := randTensor(rng, 1, 8, 1, 1), randTensor(rng, 1, 8, 1, 1)
	run := func() []*Tensor {
		out := []*Tensor{Apply(channelAffineOp, ActRelu, x, s, b)}
		out = append(out, ApplyN(channelAffineGradOp, nil, g, x)...)
		out = append(out, ApplyN(channelAffineBwdOp, ActRelu, g, x, s, out[0])...)
		return append(out, ApplyN(channelMomentsOp, nil, x)...)
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
