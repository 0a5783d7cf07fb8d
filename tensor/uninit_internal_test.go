package tensor

import (
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// Ops whose results start uninitialised (newOutUninit) and that clear
// only what they do not overwrite (the rows past RaggedDot's groups, the
// blocks of empty groups of its weight gradient, attention's gradients per
// head, the scatter kernels' row chunks) give the same values when the
// allocator serves them storage poisoned with NaN, split across goroutines
// or not.
func TestUninitialisedResultsPoisoned(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	rnd := func(shape ...int) *Tensor { return normalTensor(r, shape...) }
	// grad returns the gradients of sum(f(xs)·w) in xs, w fixed.
	grad := func(f func(xs []*Tensor) *Tensor, xs ...*Tensor) []*Tensor {
		tr := NewTrace()
		ls := make([]*Tensor, len(xs))
		for i, x := range xs {
			ls[i] = tr.Leaf(x)
		}
		y := f(ls)
		w := Cos(AsType(Reshape(Arange(y.Size()), y.Shape()...), Float32))
		s := Sum(Mul(y, w))
		return Backward(tr, []*Tensor{s}, []*Tensor{OnesLike(tr.Primal(s))}, ls, false)
	}
	x, w, w2 := rnd(40, 24), rnd(3, 24, 20), rnd(24, 20)
	gs := FromInt32([]int32{10, 0, 20}, 3) // rows 30..39 past the groups, group 1 empty
	q, k, v := rnd(2, 9, 3, 8), rnd(2, 7, 3, 8), rnd(2, 7, 3, 8)
	tab := rnd(12, 32)
	idx := FromInt32([]int32{3, 0, 11, 3, -1, 7}, 6)
	seg := FromInt32([]int32{2, 0, 5, 2, 9, -1}, 6) // 9 and -1 outside [0, 6)
	cases := map[string]func() []*Tensor{
		"RaggedDot": func() []*Tensor {
			return append([]*Tensor{RaggedDot(x, w, gs)}, grad(func(a []*Tensor) *Tensor { return RaggedDot(a[0], a[1], gs) }, x, w)...)
		},
		"DotProductAttention": func() []*Tensor {
			return grad(func(a []*Tensor) *Tensor { return DotProductAttention(a[0], a[1], a[2], nil, 0, false) }, q, k, v)
		},
		"Take": func() []*Tensor {
			return append(grad(func(a []*Tensor) *Tensor { return Take(a[0], idx, 0) }, tab),
				Take(Reshape(tab, 4, 3, 32), FromInt32([]int32{2, 0, -1, 2}, 4), 1), Take(Reshape(tab, 32, 12), FromInt32([]int32{1, 1, 0}, 3), 1))
		},
		"BroadcastTo": func() []*Tensor { return []*Tensor{BroadcastTo(Reshape(tab, 12, 1, 32), 12, 5, 32)} },
		"Softmax": func() []*Tensor {
			return append(grad(func(a []*Tensor) *Tensor { return Softmax(a[0], 1) }, tab),
				grad(func(a []*Tensor) *Tensor { return LogSoftmax(a[0], 0) }, tab)...)
		},
		"SegmentSum": func() []*Tensor {
			return append(grad(func(a []*Tensor) *Tensor { return SegmentSum(a[0], seg, 6) }, Reshape(tab, 6, 64)), SegmentSum(Reshape(tab, 6, 64), seg, 6))
		},
		// Storage of the other dtypes is recycled too.
		"half": func() []*Tensor {
			b, h := Convert(tab, BFloat16), Convert(tab, Float16)
			return []*Tensor{b, h, Transpose(b, 1, 0), Take(h, idx, 0), Concat(1, b, b),
				MatMulAs(x, w2, false, false, BFloat16, BFloat16)}
		},
		"int64 uint8 bool": func() []*Tensor {
			i := AsType(Mul(tab, Scalar(float32(7))), Int64)
			u := AsType(Abs(tab), Uint8)
			return []*Tensor{i, Add(i, i), Transpose(i, 1, 0), u, Take(u, idx, 0), Greater(tab, Scalar(float32(0))),
				Where(Greater(tab, Scalar(float32(0))), i, Neg(i))}
		},
	}
	for name, f := range cases {
		t.Run(name, func(t *testing.T) {
			oldOn, oldPoison, oldMin := cacheEnabled, poisonRecycled, parallelMinWork
			defer func() { cacheEnabled, poisonRecycled, parallelMinWork = oldOn, oldPoison, oldMin }()
			for _, minWork := range []int{oldMin, 64} {
				// The reference at the same split: some kernel sets' gemm
				// rounds differently when the rows are split.
				parallelMinWork = minWork
				cacheEnabled, poisonRecycled = false, false
				want := f()
				cacheEnabled, poisonRecycled = true, true
				for round := range 3 { // the second and third rounds reuse the first's storage
					got := f()
					require.Equal(t, len(want), len(got))
					for i := range want {
						require.Equal(t, want[i].DType(), got[i].DType())
						require.Equal(t, want[i].Float64s(), got[i].Float64s(), "minWork %d round %d result %d", minWork, round, i)
					}
					Donate(got...)
				}
			}
		})
	}
}
