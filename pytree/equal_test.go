package pytree_test

import (
	"errors"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestEqualTolerances(t *testing.T) {
	a := t32([]float32{1, 2, 3})
	b := t32([]float32{1, 2, 3.001})
	inf, nan := float32(math.Inf(1)), float32(math.NaN())
	tests := []struct {
		name       string
		x, y       *tensor.Tensor
		rtol, atol float64
		want       bool
	}{
		{"same tensor", a, a, 0, 0, true},
		{"equal values", a, t32([]float32{1, 2, 3}), 0, 0, true},
		{"exact", a, b, 0, 0, false},
		{"rtol", a, b, 1e-3, 0, true},
		{"rtol too small", a, b, 1e-4, 0, false},
		{"atol", a, b, 0, 1e-2, true},
		{"atol too small", a, b, 0, 1e-4, false},
		{"rtol is relative to the second", t32([]float32{0}), t32([]float32{1}), 1, 0, true},
		{"rtol is not symmetric", t32([]float32{1}), t32([]float32{0}), 1, 0, false},
		{"nan", t32([]float32{nan}), t32([]float32{nan}), 1, 1, false},
		{"nan vs number", t32([]float32{nan}), t32([]float32{1}), 1, 1e9, false},
		{"inf", t32([]float32{inf}), t32([]float32{inf}), 0, 0, true},
		{"inf vs -inf", t32([]float32{inf}), t32([]float32{-inf}), 1, 1, false},
		{"inf vs large", t32([]float32{inf}), t32([]float32{1e38}), 1, 1, false},
		{"int32", tensor.FromInt32([]int32{1, 2}), tensor.FromInt32([]int32{1, 2}), 0, 0, true},
		{"int32 differ", tensor.FromInt32([]int32{1, 2}), tensor.FromInt32([]int32{1, 3}), 0, 0, false},
		{"int32 atol", tensor.FromInt32([]int32{1, 2}), tensor.FromInt32([]int32{1, 3}), 0, 1, true},
		{"bool", tensor.FromBool([]bool{true}), tensor.FromBool([]bool{false}), 0, 0, false},
		{"dtype", tensor.FromInt32([]int32{1}), t32([]float32{1}), 1, 1, false},
		{"shape", seqTensor(0, 2, 3), seqTensor(0, 3, 2), 1, 1, false},
		{"scalar vs 1-element", tensor.Scalar(1), t32([]float32{1}), 0, 0, false},
		{"nil vs tensor", nil, a, 1, 1, false},
		{"nil vs nil", nil, nil, 0, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, pytree.Equal(tc.x, tc.y, tc.rtol, tc.atol))
			assert.Equal(t, tc.want, pytree.Diff(tc.x, tc.y, tc.rtol, tc.atol) == nil)
			assert.Equal(t, tc.want, pytree.Equal([]any{tc.x}, []any{tc.y}, tc.rtol, tc.atol), "inside a tree")
		})
	}
}

func TestEqualTrees(t *testing.T) {
	m := newMLP(2, 3, 1)
	same := pytree.Map(m, func(x *tensor.Tensor) *tensor.Tensor { return tensor.AddScalar(x, 0) })
	require.True(t, pytree.Equal(m, same, 0, 0))
	require.True(t, pytree.Equal(m, m, 0, 0))

	other := func(f func(*MLP)) *MLP { o := newMLP(2, 3, 1); f(o); return o }
	tests := []struct {
		name string
		b    any
		msg  string // "" if equal
	}{
		{"unexported static ignored", other(func(o *MLP) { o.calls = 9 }), ""},
		{"funcs ignored", other(func(o *MLP) { o.Act = tensor.Tanh }), ""},
		{"static string", other(func(o *MLP) { o.Name = "other" }), `pytree: MLP.Name: static value "mlp" vs "other"`},
		{"tagged static", other(func(o *MLP) { o.Dropout = 0.2 }), `pytree: MLP.Dropout: static value 0.1 vs 0.2`},
		{"static int", other(func(o *MLP) { o.Layers[1].In = 7 }), `pytree: MLP.Layers[1].In: static value 3 vs 7`},
		{"value", other(func(o *MLP) { o.Layers[1].B = t32([]float32{0.5}) }),
			"pytree: MLP.Layers[1].B: values differ at [0]: -1 vs 0.5 (1 of 1 elements of f32[1]; rtol=0, atol=0)"},
		{"value in 2-D", other(func(o *MLP) { o.Layers[0].W = t32([]float32{0, 1, 2, 3, 9, 9}, 2, 3) }),
			"pytree: MLP.Layers[0].W: values differ at [1,1]: 4 vs 9 (2 of 6 elements of f32[2,3]; rtol=0, atol=0)"},
		{"shape", other(func(o *MLP) { o.Layers[0].B = seqTensor(0, 4) }), "pytree: MLP.Layers[0].B: f32[3] vs f32[4]"},
		{"nil leaf", other(func(o *MLP) { o.Layers[0].B = nil }), "pytree: MLP.Layers[0].B: f32[3] vs nil"},
		{"length", other(func(o *MLP) { o.Layers = o.Layers[:1] }), "pytree: MLP.Layers: length 2 vs 1"},
		{"type", *newMLP(2, 3, 1), "pytree: MLP: *MLP vs MLP"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := pytree.Diff(m, tc.b, 0, 0)
			if tc.msg == "" {
				assert.NoError(t, err)
				assert.True(t, pytree.Equal(m, tc.b, 0, 0))
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.msg, err.Error())
			assert.False(t, pytree.Equal(m, tc.b, 0, 0))
		})
	}

	// The error says where, structurally.
	err := pytree.Diff(m, other(func(o *MLP) { o.Layers[1].B = t32([]float32{0.5}) }), 0, 0)
	var de *pytree.DiffError
	require.True(t, errors.As(err, &de))
	assert.Equal(t, "Layers[1].B", de.Path.String())
	assert.Equal(t, "MLP", de.Root)
}

func TestEqualStructures(t *testing.T) {
	x := seqTensor(0, 1)
	tests := []struct {
		name string
		a, b any
		msg  string
	}{
		{"map keys", map[string]*tensor.Tensor{"a": x}, map[string]*tensor.Tensor{"b": x},
			`pytree: map[string]*tensor.Tensor: keys ["a"] vs ["b"]`},
		{"interface types", []any{x, 1}, []any{x, "1"}, "pytree: []any[1]: int vs string"},
		{"interface static values", []any{x, 1}, []any{x, 2}, "pytree: []any[1]: static value 1 vs 2"},
		{"nil interface", []any{nil}, []any{x}, "pytree: []any[0]: nil vs *tensor.Tensor"},
		{"nil pointer", struct{ L *Linear }{}, struct{ L *Linear }{&Linear{}}, "pytree: struct { L *Linear }.L: nil vs *Linear"},
		{"custom names", &Custom{}, &Custom{}, ""},
		{"custom children", Seq{items: []any{x}}, Seq{items: []any{x, x}}, "pytree: Seq: 1 children vs 2"},
		{"static struct", struct{ C struct{ N int } }{}, struct{ C struct{ N int } }{struct{ N int }{1}},
			"pytree: struct { C struct { N int } }.C.N: static value 0 vs 1"},
		{"static array", struct{ A [2]string }{[2]string{"x", "y"}}, struct{ A [2]string }{[2]string{"x", "z"}},
			`pytree: struct { A [2]string }.A[1]: static value "y" vs "z"`},
		{"sharded vs host", tensor.NewSharded(tensor.Float32, []int{2}, fakeLayout{[]string{"dp"}}), tensor.Zeros(tensor.Float32, 2), ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := pytree.Diff(tc.a, tc.b, 0, 0)
			if tc.msg == "" {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.Equal(t, tc.msg, err.Error())
		})
	}
}

// Float64 leaves compare in float64 and int64 leaves exactly (2^53 and
// 2^53+1 are one float64).
func TestDiffWideDTypes(t *testing.T) {
	a := map[string]*tensor.Tensor{"i": tensor.FromInt64([]int64{1 << 53}), "f": tensor.FromFloat64s([]float64{1})}
	b := map[string]*tensor.Tensor{"i": tensor.FromInt64([]int64{1<<53 + 1}), "f": a["f"]}
	err := pytree.Diff(a, b, 0, 0)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "9007199254740992 vs 9007199254740993")
	b["i"], b["f"] = a["i"], tensor.FromFloat64s([]float64{1 + 1e-12})
	assert.Error(t, pytree.Diff(a, b, 0, 0), "1 vs 1+1e-12 in float64")
	assert.NoError(t, pytree.Diff(a, b, 1e-11, 0))
}
