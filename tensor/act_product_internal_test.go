package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// The rule cases of act_product, on both products (ad_rules_test.go).
var _ = addRuleCases(
	ruleCase{name: "actProductOp", op: &actProductOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4), rF(r, 4, 5)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ActMatMul(ActGelu, x[0], x[1]), ActMatMul(ActTanh, x[0], x[1])}
		}, vmapTol: 1e-6}, // the batch's rows in one product: another gemm path (avx2, go)
	ruleCase{name: "actProductOp", op: &actProductOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 6, 3), rF(r, 2, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ActRaggedDot(ActGelu, x[0], x[1], FromInt32([]int32{2, 3}, 2))}
		}},
	// The products in bfloat16 (rounding: no finite differences).
	ruleCase{name: "actProductOp/As", op: &actProductOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 2, 3, 4), rF(r, 4, 5), rF(r, 6, 3), rF(r, 2, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return []*Tensor{ActMatMulAs(ActGelu, x[0], x[1], BFloat16),
				ActRaggedDotAs(ActGelu, x[2], x[3], FromInt32([]int32{2, 3}, 2), BFloat16)}
		}, vmapTol: 1e-6, noFD: true, tTol: 1e-2},
)

var _ = addRuleCases(
	ruleCase{name: "actPartsOp", op: &actPartsOp,
		in: func(r *rand.Rand) []*Tensor { return args(rF(r, 3, 4)) },
		f: func(x []*Tensor) []*Tensor {
			return append(ApplyN(actPartsOp, ActGelu, x[0]), ApplyN(actPartsOp, ActSilu, x[0])...)
		}},
)

// act_product equals the composition bit for bit, values and gradients,
// on both products, and keeps no activation-sized residual but x.
func TestActProductMatchesComposition(t *testing.T) {
	rng := rand.New(rand.NewPCG(85, 1))
	gs := FromInt32([]int32{40, 0, 70, 50}, 4)
	cases := []struct {
		name       string
		fused, ref func([]*Tensor) *Tensor
		in         []*Tensor
	}{
		{"matmul", func(x []*Tensor) *Tensor { return ActMatMul(ActGelu, x[0], x[1]) },
			func(x []*Tensor) *Tensor { return MatMul(Gelu(x[0]), x[1]) },
			[]*Tensor{randTensor(rng, 3, 50, 64), randTensor(rng, 64, 24)}},
		// Large enough for the workers: dx = dh·gelu'(x) over dh in chunks.
		{"matmul large", func(x []*Tensor) *Tensor { return ActMatMul(ActGelu, x[0], x[1]) },
			func(x []*Tensor) *Tensor { return MatMul(Gelu(x[0]), x[1]) },
			[]*Tensor{randTensor(rng, 1024, 256), randTensor(rng, 256, 16)}},
		{"matmul silu", func(x []*Tensor) *Tensor { return ActMatMul(ActSilu, x[0], x[1]) },
			func(x []*Tensor) *Tensor { return MatMul(Silu(x[0]), x[1]) },
			[]*Tensor{randTensor(rng, 70, 64), randTensor(rng, 64, 24)}},
		{"matmul relu", func(x []*Tensor) *Tensor { return ActMatMul(ActRelu, x[0], x[1]) },
			func(x []*Tensor) *Tensor { return MatMul(Relu(x[0]), x[1]) },
			[]*Tensor{randTensor(rng, 70, 64), randTensor(rng, 64, 24)}},
		{"ragged", func(x []*Tensor) *Tensor { return ActRaggedDot(ActGelu, x[0], x[1], gs) },
			func(x []*Tensor) *Tensor { return RaggedDot(Gelu(x[0]), x[1], gs) },
			[]*Tensor{randTensor(rng, 170, 64), randTensor(rng, 4, 64, 24)}},
	}
	for _, c := range cases {
		want, got := c.ref(c.in), c.fused(c.in)
		require.Equal(t, want.f32(), got.f32(), "%s: value", c.name)
		g := randTensor(rng, want.shape...)
		gw, gg := vjpAll(c.ref, g, c.in...), vjpAll(c.fused, g, c.in...)
		for i := range gw {
			require.Equal(t, gw[i].f32(), gg[i].f32(), "%s: gradient %d", c.name, i)
		}
		tr := NewTrace()
		y := c.fused([]*Tensor{tr.Leaf(c.in[0]), tr.Leaf(c.in[1])})
		rep := Residuals(y)
		require.LessOrEqual(t, rep.Bytes, c.in[0].Bytes()+c.in[1].Bytes()+gs.Bytes(), "%s: residuals %+v", c.name, rep.ResidualStat)
	}
}
