package shard_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// requireClose asserts that got (placed or host) equals want within rel
// relative error (measured against the largest magnitude of want).
func requireClose(t *testing.T, want, got *tensor.Tensor, rel float64, msg string) {
	t.Helper()
	requireCloseFloor(t, want, got, rel, 1e-6, msg)
}

// requireCloseFloor is requireClose with the scale at least floor (for a
// gradient that is zero analytically, floor is the scale of the others).
func requireCloseFloor(t *testing.T, want, got *tensor.Tensor, rel, floor float64, msg string) {
	t.Helper()
	require.Equal(t, want.Shape(), got.Shape(), msg)
	w, g := want.Float64s(), got.Float64s()
	scale := floor
	for _, v := range w {
		scale = math.Max(scale, math.Abs(v))
	}
	for i := range w {
		if math.Abs(w[i]-g[i]) > rel*scale {
			require.Failf(t, "values differ", "%s: element %d: want %g, got %g (scale %g)", msg, i, w[i], g[i], scale)
		}
	}
}

// propCase is a scalar function of several tensors; it is evaluated on
// host tensors and on the same tensors placed by specs, and the value and
// every gradient must agree.
type propCase struct {
	name  string
	in    []*tensor.Tensor
	specs []shard.Spec
	f     func(xs []*tensor.Tensor) *tensor.Tensor
}

func propCases(r *rand.Rand) []propCase {
	f32 := func(shape ...int) *tensor.Tensor { return randT(r, shape...) }
	return []propCase{
		{"matmul dp x replicated", []*tensor.Tensor{f32(8, 4), f32(4, 6)}, []shard.Spec{shard.P("dp", nil), shard.P()},
			func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Tanh(tensor.MatMul(xs[0], xs[1]))) }},
		{"matmul dp x tp", []*tensor.Tensor{f32(8, 4), f32(4, 6)}, []shard.Spec{shard.P("dp", nil), shard.P(nil, "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(tensor.MatMul(xs[0], xs[1])))
			}},
		{"matmul contracting sharded both sides", []*tensor.Tensor{f32(8, 4), f32(4, 6)}, []shard.Spec{shard.P(nil, "tp"), shard.P("tp", nil)},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(tensor.MatMul(xs[0], xs[1])))
			}},
		{"matmul fsdp weight", []*tensor.Tensor{f32(8, 4), f32(4, 6)}, []shard.Spec{shard.P("dp", nil), shard.P("dp", nil)},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(tensor.MatMul(xs[0], xs[1])))
			}},
		{"bias broadcast", []*tensor.Tensor{f32(8, 6), f32(6)}, []shard.Spec{shard.P("dp", "tp"), shard.P()},
			func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Relu(tensor.Add(xs[0], xs[1]))) }},
		{"conflicting elementwise", []*tensor.Tensor{f32(8, 8), f32(8, 8)}, []shard.Spec{shard.P("dp", nil), shard.P(nil, "dp")},
			func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Mul(xs[0], xs[1])) }},
		{"host operand", []*tensor.Tensor{f32(8, 6), f32(8, 6)}, []shard.Spec{shard.P("dp", nil), nil},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Div(xs[0], tensor.AddScalar(tensor.Square(xs[1]), 1)))
			}},
		{"reductions", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Add(tensor.Sum(tensor.Square(tensor.Sum(xs[0], 0))), tensor.Sum(tensor.Exp(tensor.Max(xs[0], 1))))
			}},
		{"mean", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Mean(tensor.Square(xs[0])) }},
		{"softmax over sharded axis", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(tensor.Softmax(xs[0], -1))) }},
		{"log_softmax", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", nil)},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(tensor.LogSoftmax(xs[0], -1)))
			}},
		{"log_sum_exp over a sharded axis", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Add(tensor.Sum(tensor.Square(tensor.LogSumExp(xs[0], -1))), tensor.Sum(tensor.LogSumExpKeep(xs[0], 0)))
			}},
		{"reshape and transpose", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				y := tensor.Reshape(xs[0], 4, 2, 3, 2)
				y = tensor.Transpose(y, 1, 0, 3, 2)
				return tensor.Sum(tensor.Mul(y, y))
			}},
		{"reshape merge", []*tensor.Tensor{f32(8, 2, 3)}, []shard.Spec{shard.P("dp", nil, nil)},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(tensor.Reshape(xs[0], 8, 6)))
			}},
		{"reshape of a minor sharded dim gathers it", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				flat := tensor.Reshape(xs[0], 48)
				split := tensor.Reshape(flat, 2, 4, 3, 2)
				return tensor.Sum(tensor.Mul(split, tensor.Reshape(tensor.Exp(flat), 2, 4, 3, 2)))
			}},
		{"slice concat pad", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				a := tensor.SliceAxis(xs[0], 1, 1, 5)
				b := tensor.Concat(0, a, tensor.Square(a))
				return tensor.Sum(tensor.Tanh(tensor.Pad(b, [][2]int{{1, 0}, {0, 2}}, 0)))
			}},
		{"no rule: gather", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Square(tensor.DynamicUpdateSlice(xs[0], tensor.Ones(tensor.Float32, 2, 2), []int{1, 3})))
			}},
		{"roll flip scatter mse", []*tensor.Tensor{f32(8, 6), f32(8, 6)}, []shard.Spec{shard.P("dp", "tp"), shard.P(nil, "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				a := tensor.Flip(tensor.Roll(xs[0], 2, 1), 0)
				idx := tensor.FromInt32([]int32{1, 0, 1}, 3)
				s := tensor.ScatterAdd(xs[1], idx, tensor.Take(xs[0], tensor.FromInt32([]int32{2, 5, 7}, 3), 0), 0)
				return tensor.Add(tensor.MSE(a, xs[1]), tensor.Sum(tensor.Square(s)))
			}},
		{"along an axis", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				v, _ := tensor.TopK(xs[0], 3)
				s := tensor.Sort(xs[0], 0, true)
				c := tensor.Cumsum(xs[0], 1)
				oh := tensor.AsType(tensor.OneHot(tensor.ArgMax(xs[0], 1), 6), tensor.Float32)
				parts := tensor.Split(xs[0], 1, 3)
				return tensor.Add(tensor.Add(tensor.Sum(tensor.Square(v)), tensor.Sum(tensor.Mul(s, c))),
					tensor.Add(tensor.Sum(tensor.Mul(oh, xs[0])), tensor.Sum(tensor.Square(parts[1]))))
			}},
		{"counts and segments", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				ids := shard.Put(tensor.FromInt32([]int32{2, 0, 1, 2, 2, 0, 1, 1}, 8), shard.NewSharding(guideMesh(), shard.P("dp")))
				counts := tensor.Add(tensor.AsType(tensor.Bincount(ids, nil, 4), tensor.Float32), tensor.Bincount(ids, tensor.Sum(xs[0], 1), 4))
				seg := tensor.SegmentSum(tensor.Square(xs[0]), ids, 3)
				wseg := tensor.SegmentWeightedSum(xs[0], tensor.Sum(xs[0], 1), ids, 3)
				seg = tensor.Add(seg, wseg)
				return tensor.Add(tensor.Sum(tensor.Mul(seg, seg)), tensor.Sum(tensor.Square(counts)))
			}},
		{"where and compare", []*tensor.Tensor{f32(8, 6)}, []shard.Spec{shard.P("dp", nil)},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				return tensor.Sum(tensor.Where(tensor.Greater(xs[0], tensor.Scalar(0)), xs[0], tensor.Square(xs[0])))
			}},
	}
}

func TestPropagationMatchesHost(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(7, 7))
	for _, tc := range propCases(r) {
		t.Run(tc.name, func(t *testing.T) {
			want, wantG := autodiff.ValueAndGrad(tc.f)(tc.in)
			placed := make([]*tensor.Tensor, len(tc.in))
			for i, x := range tc.in {
				if tc.specs[i] == nil {
					placed[i] = x
					continue
				}
				placed[i] = shard.Put(x, shard.NewSharding(m, tc.specs[i]))
			}
			if tc.name != "no rule: gather" {
				// every op of these cases has a rule: no gather fallback
				defer shard.Strict(m)()
			}
			got, gotG := autodiff.ValueAndGrad(tc.f)(placed)
			require.NotNil(t, got.Layout(), "result of %s is not placed: %v", tc.name, got)
			requireClose(t, want, got, 1e-5, "value")
			for i := range wantG {
				requireClose(t, wantG[i], gotG[i], 1e-5, fmt.Sprintf("grad %d", i))
				if tc.specs[i] == nil {
					require.Nil(t, gotG[i].Layout(), "grad %d of a host input", i)
					continue
				}
				s, ok := shard.ShardingOf(gotG[i])
				require.True(t, ok, "grad %d %v is not placed", i, gotG[i])
				require.True(t, s.Equal(shard.NewSharding(m, tc.specs[i])), "grad %d is %v, want like its input %v", i, s, tc.specs[i])
			}
		})
	}
}

// requireGradsLike asserts that every leaf of got (a gradient tree) equals
// the leaf of want within rel (of floor at least) and is laid out like the
// leaf of params, the parameters it belongs to.
func requireGradsLike(t *testing.T, want, got, params any, rel, floor float64) {
	t.Helper()
	wl, gl, pl := pytree.Leaves(want), pytree.Leaves(got), pytree.Leaves(params)
	require.Len(t, gl, len(wl))
	for i := range wl {
		requireCloseFloor(t, wl[i], gl[i], rel, floor, fmt.Sprintf("grad %d of %v", i, pl[i]))
		ps, _ := shard.ShardingOf(pl[i])
		gs, ok := shard.ShardingOf(gl[i])
		require.True(t, ok, "grad %d %v is not placed", i, gl[i])
		require.True(t, ps.Equal(gs), "grad %d is %v, param %v", i, gs, ps)
	}
}

// TestReshapeLayouts checks where reshape keeps axes: a sharded dimension
// keeps them while its blocks stay contiguous runs of the result.
func TestReshapeLayouts(t *testing.T) {
	m := guideMesh()
	x := shard.Put(tensor.Ones(tensor.Float32, 8, 6), shard.NewSharding(m, shard.P("dp", "tp")))
	for _, tc := range []struct {
		shape []int
		want  string
	}{
		{[]int{48}, "float32[48@dp]"},            // merged: dp major stays, tp (minor) gathered
		{[]int{4, 2, 6}, "float32[4@dp,2,6@tp]"}, // split: dp on the leading part
		{[]int{2, 4, 6}, "float32[2,4,6@tp]"},    // the leading part (2) does not divide by dp=4
		{[]int{8, 3, 2}, "float32[8@dp,3,2]"},    // 6 split into 3x2: tp=2 does not divide 3
		{[]int{8, 2, 3}, "float32[8@dp,2@tp,3]"}, // 6 split into 2x3: tp on the 2
		{[]int{1, 8, 6}, "float32[1,8@dp,6@tp]"}, // a new leading 1
	} {
		require.Equal(t, tc.want, tensor.Reshape(x, tc.shape...).Type(), "reshape to %v", tc.shape)
	}
}
