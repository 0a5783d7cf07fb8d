package shard_test

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestAttentionByPropagation: fused attention on q, k and v split over
// batch (dp) and heads (tp) computes blockwise under Strict, with no
// communication, and its value and gradients equal one device's; a mask
// split over batch and one broadcast over heads follow; lengths and
// features split are gathered first.
func TestAttentionByPropagation(t *testing.T) {
	m := guideMesh() // dp=4, tp=2
	const B, T, N, H = 4, 9, 2, 4
	r := rand.New(rand.NewPCG(3, 3))
	qh, kh, vh := randT(r, B, T, N, H), randT(r, B, T, N, H), randT(r, B, T, N, 6)
	mb := make([]bool, B*T)
	for i := range mb {
		mb[i] = i%T == 0 || r.IntN(3) > 0
	}
	maskH := tensor.FromBool(mb, B, 1, 1, T)
	for _, c := range []struct {
		name     string
		spec     shard.Spec
		mask     shard.Spec // nil: no mask
		comm     bool       // the spec splits a dim attention needs whole
		wantType string
	}{
		{"batch and heads", shard.P("dp", nil, "tp", nil), nil, false, "float32[4@dp,9,2@tp,6]"},
		{"heads only, masked", shard.P(nil, nil, "tp", nil), shard.P(), false, "float32[4,9,2@tp,6]"},
		{"batch and heads, masked", shard.P("dp", nil, "tp", nil), shard.P("dp"), false, "float32[4@dp,9,2@tp,6]"},
		{"features split", shard.P("dp", nil, nil, "tp"), nil, true, ""},
	} {
		t.Run(c.name, func(t *testing.T) {
			var mask, maskP *tensor.Tensor
			if c.mask != nil {
				mask = maskH
				maskP = shard.Put(maskH, shard.NewSharding(m, c.mask))
			}
			f := func(mk *tensor.Tensor) func(p [3]*tensor.Tensor) *tensor.Tensor {
				return func(p [3]*tensor.Tensor) *tensor.Tensor {
					o := tensor.DotProductAttention(p[0], p[1], p[2], mk, 0, true)
					return tensor.Sum(tensor.Square(o))
				}
			}
			want, wantG := autodiff.ValueAndGrad(f(mask))([3]*tensor.Tensor{qh, kh, vh})
			sh := shard.NewSharding(m, c.spec)
			placed := [3]*tensor.Tensor{shard.Put(qh, sh), shard.Put(kh, sh), shard.Put(vh, sh)}
			var comm shard.Comm
			stop := shard.Record(m, &comm)
			var got *tensor.Tensor
			var gotG [3]*tensor.Tensor
			func() {
				if !c.comm {
					defer shard.Strict(m)()
				}
				got, gotG = autodiff.ValueAndGrad(f(maskP))(placed)
			}()
			stop()
			requireClose(t, want, got, 1e-5, "value")
			requireGradsLike(t, wantG, gotG, placed, 1e-5, 1e-6)
			if !c.comm {
				out := tensor.DotProductAttention(placed[0], placed[1], placed[2], maskP, 0, true)
				require.Equal(t, c.wantType, out.Type())
				require.Zero(t, comm.Bytes(m.Devices()[0], "attention"))
				require.Zero(t, comm.Bytes(m.Devices()[0], "attention_bwd"))
			}
		})
	}
}
