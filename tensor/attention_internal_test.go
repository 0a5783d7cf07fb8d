package tensor

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Rule cases of attention and its backward op (ad_rules_test.go): Vmap
// over each operand equals the loop over examples, the forward-mode rule
// equals finite differences and the transpose of the VJP. The batch
// changes the order of nothing (each head computes alone), but the Vmap
// of the mask or of the examples of a batch still merges blocks
// differently: compared to rounding.
var _ = addRuleCases(
	ruleCase{name: "attentionOp", op: &attentionOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4), attnRuleMask(r))
	}, f: func(x []*Tensor) []*Tensor {
		return []*Tensor{
			DotProductAttention(x[0], x[1], x[2], nil, 0, true),
			DotProductAttention(x[0], x[1], x[2], x[3], 0.7, false),
			ApplyN(attentionOp, &attnParams{scale: 0.5, causal: true}, x[0], x[1], x[2])[1], // the log-sum-exps
		}
	}, vmapTol: 1e-6},
	ruleCase{name: "attentionBwdOp", op: &attentionBwdOp, in: func(r *rand.Rand) []*Tensor {
		q, k, v := rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4)
		o := ApplyN(attentionOp, &attnParams{scale: 0.5, causal: true}, q, k, v)
		return args(q, k, v, o[0], o[1], rF(r, 2, 5, 2, 4), rF(r, 2, 2, 5))
	}, f: func(x []*Tensor) []*Tensor {
		return ApplyN(attentionBwdOp, &attnParams{scale: 0.5, causal: true, glse: true}, x...)
	}, vmapTol: 1e-6},
	// The products in bfloat16: rounding makes the op piecewise constant
	// (no finite differences); its rules pass cotangents and tangents
	// straight through the rounding, computed in bfloat16 too.
	ruleCase{name: "attentionOp/bf16", op: &attentionOp, in: func(r *rand.Rand) []*Tensor {
		return args(rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4), attnRuleMask(r))
	}, f: func(x []*Tensor) []*Tensor {
		return []*Tensor{
			DotProductAttentionAs(x[0], x[1], x[2], nil, 0, true, BFloat16),
			DotProductAttentionAs(x[0], x[1], x[2], x[3], 0.7, false, BFloat16),
		}
	}, vmapTol: 1e-6, noFD: true, tTol: 2e-2},
	ruleCase{name: "attentionBwdOp/bf16", op: &attentionBwdOp, in: func(r *rand.Rand) []*Tensor {
		q, k, v := rF(r, 2, 5, 2, 3), rF(r, 2, 6, 2, 3), rF(r, 2, 6, 2, 4)
		o := ApplyN(attentionOp, &attnParams{scale: 0.5, causal: true, bf16: true}, q, k, v)
		return args(q, k, v, o[0], o[1], rF(r, 2, 5, 2, 4), rF(r, 2, 2, 5))
	}, f: func(x []*Tensor) []*Tensor {
		return ApplyN(attentionBwdOp, &attnParams{scale: 0.5, causal: true, glse: true, bf16: true}, x...)
	}, vmapTol: 1e-6, noFD: true},
)

// attnRuleMask is a mask [2,1,5,6] leaving every query key 0.
func attnRuleMask(r *rand.Rand) *Tensor {
	m := make([]bool, 2*5*6)
	for i := range m {
		m[i] = i%6 == 0 || r.IntN(3) > 0
	}
	return FromBool(m, 2, 1, 5, 6)
}

// The attention kernels read no scratch they have not written: forward
// and backward give the same bits with the pooled scratch (and the
// bfloat16 path's pairs) full of NaNs, split over goroutines or not.
func TestAttentionScratchPoisoned(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	// T = 70: a full and a partial block of queries; S = 150: of keys.
	q, k, v := rF(r, 3, 70, 2, 8), rF(r, 3, 150, 2, 8), rF(r, 3, 150, 2, 5)
	g := rF(r, 3, 70, 2, 5)
	run := func() [][]float32 {
		var res [][]float32
		for _, c := range [][2]bool{{false, false}, {true, false}, {false, true}, {true, true}} {
			p := &attnParams{scale: 0.4, causal: c[0], bf16: c[1]}
			o := ApplyN(attentionOp, p, q, k, v)
			grads := ApplyN(attentionBwdOp, p, q, k, v, o[0], o[1], g)
			for _, x := range append(o, grads...) {
				res = append(res, x.Float32s())
			}
		}
		return res
	}
	want := run()
	poison := func() {
		for range 16 {
			b := make([]float32, 1<<15)
			for i := range b {
				b[i] = float32(math.NaN())
			}
			attnPool.Put(&b)
			p := make([]uint32, 1<<15)
			for i := range p {
				p[i] = 0x7fc07fc0 // bfloat16 NaN pairs
			}
			attnBlockPool.Put(&p)
			p2 := append([]uint32(nil), p...)
			attnPairPool.Put(&p2)
		}
	}
	poison()
	require.Equal(t, want, run())
	withParallel(t, 64)
	poison()
	require.Equal(t, want, run())
}
