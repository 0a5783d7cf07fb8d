package pytree_test

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"weak"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestLeavesAndPathsOrder(t *testing.T) {
	m := newModel()
	block := func(i string) []string {
		return []string{
			"Blocks[" + i + "].Attn.Q", "Blocks[" + i + "].Attn.K", "Blocks[" + i + "].Attn.V",
			"Blocks[" + i + "].Norms[0]",
			`Blocks[` + i + `].Experts["down"].W`,
			`Blocks[` + i + `].Experts["up"].W`, `Blocks[` + i + `].Experts["up"].B`,
			"Blocks[" + i + "].Extra",
		}
	}
	want := []string{"Embed"}
	want = append(want, block("0")...)
	want = append(want, block("1")...)
	want = append(want, "Head.W", "Head.B")

	paths, leaves := pytree.LeavesWithPath(m)
	assert.Equal(t, want, pathStrings(paths))
	assert.Equal(t, want, pathStrings(pytree.Paths(m)))
	samePointers(t, leaves, pytree.Leaves(m))

	wantLeaves := []*tensor.Tensor{m.Embed}
	for _, b := range m.Blocks {
		wantLeaves = append(wantLeaves, b.Attn.Q, b.Attn.K, b.Attn.V, b.Norms[0],
			b.Experts["down"].W, b.Experts["up"].W, b.Experts["up"].B, b.Extra.(*tensor.Tensor))
	}
	wantLeaves = append(wantLeaves, m.Head.W, m.Head.B)
	samePointers(t, wantLeaves, leaves)

	// The same through a value, a pointer to pointer and an interface.
	samePointers(t, wantLeaves, pytree.Leaves(*m))
	samePointers(t, wantLeaves, pytree.Leaves(&m))
	samePointers(t, wantLeaves, pytree.Leaves([]any{m}))
}

func TestLeavesOfSimpleValues(t *testing.T) {
	a, b := seqTensor(0, 2), seqTensor(1, 3)
	type Name string
	tests := []struct {
		name  string
		tree  any
		want  []*tensor.Tensor
		paths []string
	}{
		{"nil", nil, nil, nil},
		{"nil tensor", (*tensor.Tensor)(nil), nil, nil},
		{"a tensor", a, []*tensor.Tensor{a}, []string{""}},
		{"int", 3, nil, nil},
		{"string", "x", nil, nil},
		{"slice", []*tensor.Tensor{a, nil, b}, []*tensor.Tensor{a, b}, []string{"[0]", "[2]"}},
		{"array", [2]*tensor.Tensor{b, a}, []*tensor.Tensor{b, a}, []string{"[0]", "[1]"}},
		{"map sorted", map[string]*tensor.Tensor{"z": a, "a": b, "m": nil}, []*tensor.Tensor{b, a}, []string{`["a"]`, `["z"]`}},
		{"named keys", map[Name]*tensor.Tensor{"y": a, "x": b}, []*tensor.Tensor{b, a}, []string{`["x"]`, `["y"]`}},
		{"any slice", []any{1, a, "s", []any{nil, b}, nil, func() {}}, []*tensor.Tensor{a, b}, []string{"[1]", "[3][1]"}},
		{"nested", map[string][]map[string]*tensor.Tensor{"k": {{"w": a}, {"w": b}}}, []*tensor.Tensor{a, b},
			[]string{`["k"][0]["w"]`, `["k"][1]["w"]`}},
		{"pointer to pointer", struct{ P **Linear }{P: func() **Linear { l := &Linear{W: a, B: b}; return &l }()},
			[]*tensor.Tensor{a, b}, []string{"P.W", "P.B"}},
		{"embedded", struct {
			Linear
			Scale *tensor.Tensor
		}{Linear{W: a}, b}, []*tensor.Tensor{a, b}, []string{"Linear.W", "Scale"}},
		// A struct held in an interface directly (one pointer) and boxed.
		{"struct of one tensor", struct{ W *tensor.Tensor }{a}, []*tensor.Tensor{a}, []string{"W"}},
		{"struct value", Linear{W: a, B: b}, []*tensor.Tensor{a, b}, []string{"W", "B"}},
		{"empty struct", struct{}{}, nil, nil},
		{"map with non-string keys and no tensors", map[int]string{1: "a"}, nil, nil},
		{"chan and func", struct {
			C chan int
			F func()
		}{make(chan int), func() {}}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			paths, leaves := pytree.LeavesWithPath(tc.tree)
			samePointers(t, tc.want, leaves)
			samePointers(t, tc.want, pytree.Leaves(tc.tree))
			if tc.paths == nil {
				assert.Empty(t, paths)
			} else {
				assert.Equal(t, tc.paths, pathStrings(paths))
			}
		})
	}
}

func TestCustomNodes(t *testing.T) {
	a, b, c, d, e := seqTensor(0, 1), seqTensor(1, 2), seqTensor(2, 3), seqTensor(3, 4), seqTensor(4, 5)
	tree := &Custom{
		P:   Pair{first: a, second: b, label: "pair"},
		S:   Seq{items: []any{c, 7, nil}},
		SP:  &Seq{items: []any{Linear{W: d}}},
		Any: Pair{first: e, label: "any"},
	}
	paths, leaves := pytree.LeavesWithPath(tree)
	samePointers(t, []*tensor.Tensor{a, b, c, d, e}, leaves)
	assert.Equal(t, []string{"P.First", `P["second one"]`, "S[0]", "SP[0].W", "Any.First"}, pathStrings(paths))

	// Rebuild through the custom nodes keeps their static data.
	out := pytree.Map(tree, func(x *tensor.Tensor) *tensor.Tensor { return tensor.MulScalar(x, 2) })
	require.Len(t, pytree.Leaves(out), 5)
	for i, x := range pytree.Leaves(out) {
		assert.Equal(t, tensor.MulScalar(leaves[i], 2).Float32s(), x.Float32s())
	}
	assert.Equal(t, "pair", out.P.label)
	assert.Equal(t, "any", out.Any.(Pair).label)
	assert.Equal(t, 7, out.S.items[1])
	assert.Nil(t, out.S.items[2])
	assert.Nil(t, out.Any.(Pair).second)
	assert.NotSame(t, tree.SP, out.SP)
	// The original is untouched.
	samePointers(t, leaves, pytree.Leaves(tree))

	// Unflatten through Node.
	ls, s := pytree.Flatten(tree)
	back := pytree.Unflatten[*Custom](s, ls)
	require.True(t, pytree.Equal(tree, back, 0, 0))
	assert.Equal(t, "&Custom{P: Pair{First: *, second one: *}, S: Seq{*, int, nil}, SP: &Seq{Linear{W: *, B: nil}}, Any: Pair{First: *, second one: nil}}", s.String())
}

type badNames struct{}

func (badNames) PytreeChildren() ([]string, []any) { return []string{"a"}, []any{1, 2} }
func (badNames) PytreeRebuild(c []any) any         { return badNames{} }

type selfNode struct{}

func (selfNode) PytreeChildren() ([]string, []any) { return nil, []any{selfNode{}} }
func (selfNode) PytreeRebuild(c []any) any         { return selfNode{} }

type wrongRebuild struct{ W *tensor.Tensor }

func (w wrongRebuild) PytreeChildren() ([]string, []any) { return nil, []any{w.W} }
func (w wrongRebuild) PytreeRebuild(c []any) any         { return 42 }

type nilRebuild struct{ W *tensor.Tensor }

func (w nilRebuild) PytreeChildren() ([]string, []any) { return nil, []any{w.W} }
func (w nilRebuild) PytreeRebuild(c []any) any         { return nil }

// fickle lists one more child each time it is asked.
type fickle struct{ n *int }

func (f fickle) PytreeChildren() ([]string, []any) {
	*f.n++
	return nil, make([]any, *f.n)
}
func (f fickle) PytreeRebuild(c []any) any { return f }

func TestCustomNodeErrors(t *testing.T) {
	requirePanicContains(t, func() {
		pytree.Map(nilRebuild{W: seqTensor(0, 1)}, func(x *tensor.Tensor) *tensor.Tensor { return x })
	}, "pytree.Map: nilRebuild.PytreeRebuild returned nil")
	assert.Equal(t, `pytree.AtPath("[0]"): wrongRebuild.PytreeRebuild returned a int, want a wrongRebuild`,
		panicMessage(t, func() { pytree.AtPath(wrongRebuild{W: seqTensor(0, 1)}, "[0]", seqTensor(1, 1)) }))
	assert.Equal(t, "pytree.Map: the tree changed while it was being traversed (a tree must not be modified while it is walked, and a Node must list the same children every time)",
		panicMessage(t, func() { pytree.Map(fickle{new(int)}, tensor.Neg) }))

	requirePanicContains(t, func() { pytree.Leaves(struct{ X badNames }{}) },
		"pytree: ", ".X: badNames.PytreeChildren returned 1 names for 2 children")
	requirePanicContains(t, func() { pytree.Leaves(selfNode{}) }, "nested deeper than 10000")
	requirePanicContains(t, func() {
		pytree.Map(wrongRebuild{W: seqTensor(0, 1)}, func(x *tensor.Tensor) *tensor.Tensor { return x })
	}, "pytree.Map: wrongRebuild.PytreeRebuild returned a int, want a wrongRebuild")
}

func TestRoundTrip(t *testing.T) {
	a, b := seqTensor(0, 2), seqTensor(1, 3)
	trees := map[string]any{
		"mlp pointer":   newMLP(3, 4, 2),
		"mlp value":     *newMLP(2, 2),
		"model":         newModel(),
		"leaf":          a,
		"nil":           nil,
		"nil pointer":   (*MLP)(nil),
		"leaf slice":    []*tensor.Tensor{a, nil, b},
		"array":         [3]*tensor.Tensor{nil, a, b},
		"map":           map[string]*tensor.Tensor{"b": b, "a": a},
		"empty map":     map[string]*tensor.Tensor{},
		"nil map":       map[string]*tensor.Tensor(nil),
		"interfaces":    []any{a, 3, "x", []any{b}, nil, Linear{W: a}},
		"custom":        &Custom{P: Pair{first: a}, S: Seq{items: []any{b}}, Any: &Seq{items: []any{a, Pair{second: b}}}},
		"map of slices": map[string][]*Linear{"x": {{W: a}, nil, {B: b}}},
		// More pointers than a copy program handles: copied with reflect.
		"wide structs": []*Wide{{A: a, T: b, S: "s", N: 3}, nil, {}},
		"big array":    &struct{ A [40]*tensor.Tensor }{A: [40]*tensor.Tensor{3: a, 39: b}},
		"wide values":  []Wide{{B: a, R: b}, {N: 1}},
	}
	for name, tree := range trees {
		t.Run(name, func(t *testing.T) {
			leaves, s := pytree.Flatten(tree)
			require.Equal(t, len(leaves), s.NumLeaves())
			paths := pytree.Paths(tree)

			// Unflatten with the same leaves gives an equal tree.
			same := pytree.Unflatten[any](s, leaves)
			require.True(t, pytree.Equal(tree, same, 0, 0), "%v", pytree.Diff(tree, same, 0, 0))
			require.Equal(t, reflect.TypeOf(tree), reflect.TypeOf(same))

			// Unflatten with new leaves puts them in place.
			fresh := make([]*tensor.Tensor, len(leaves))
			for i, x := range leaves {
				fresh[i] = tensor.FullLike(x, float64(i+100))
			}
			out := pytree.Unflatten[any](s, fresh)
			samePointers(t, fresh, pytree.Leaves(out))
			assert.Equal(t, pathStrings(paths), pathStrings(pytree.Paths(out)))
			_, s2 := pytree.Flatten(out)
			assert.True(t, s.Equal(s2), "%v vs %v", s, s2)
			assert.Equal(t, s.String(), s2.String())

			// The original still holds its own leaves.
			samePointers(t, leaves, pytree.Leaves(tree))
		})
	}
}

// Wide has more pointer words than a copy program takes.
type Wide struct {
	A, B, C, D, E, F, G, H, I, J, K, L, M, N2, O, P, Q, R, T *tensor.Tensor
	S                                                        string
	N                                                        int
}

func TestUnflattenTyped(t *testing.T) {
	m := newMLP(3, 4, 2)
	leaves, s := pytree.Flatten(m)
	out := pytree.Unflatten[*MLP](s, leaves)
	require.NotSame(t, m, out)
	require.True(t, pytree.Equal(m, out, 0, 0))

	// Through an interface type.
	var st interface{} = pytree.Unflatten[any](s, leaves)
	require.IsType(t, &MLP{}, st)

	// Of a value.
	lv, sv := pytree.Flatten(*m)
	v := pytree.Unflatten[MLP](sv, lv)
	require.True(t, pytree.Equal(*m, v, 0, 0))

	// Of nil.
	_, sn := pytree.Flatten(nil)
	assert.Nil(t, pytree.Unflatten[*MLP](sn, nil))
	assert.Equal(t, 0, sn.NumLeaves())
}

func TestUnflattenErrors(t *testing.T) {
	m := newMLP(3, 4, 2)
	leaves, s := pytree.Flatten(m)
	msg := panicMessage(t, func() { pytree.Unflatten[*MLP](s, leaves[:3]) })
	assert.Equal(t, "pytree.Unflatten: 3 leaves for a structure with 4 leaves: &MLP{Layers: [Linear{W: *, B: *}, Linear{W: *, B: *}]}", msg)
	msg = panicMessage(t, func() { pytree.Unflatten[MLP](s, leaves) })
	assert.Equal(t, "pytree.Unflatten: the structure is of a *MLP, not a MLP", msg)
	assert.Equal(t, "pytree.Unflatten: zero Structure", panicMessage(t, func() { pytree.Unflatten[*MLP](pytree.Structure{}, nil) }))
	_, sn := pytree.Flatten(nil)
	assert.Equal(t, "pytree.Unflatten: the structure is of a nil tree, not a MLP", panicMessage(t, func() { pytree.Unflatten[MLP](sn, nil) }))
	assert.Equal(t, "pytree.Unflatten: the structure is of a *MLP, not a Stringer", panicMessage(t, func() { pytree.Unflatten[fmt.Stringer](s, leaves) }))
}

func TestUnflattenCopiesSpine(t *testing.T) {
	m := newModel()
	leaves, s := pytree.Flatten(m)
	out := pytree.Unflatten[*Model](s, leaves)
	require.NotSame(t, m.Blocks[0], out.Blocks[0])
	require.NotSame(t, m.Blocks[0].Attn, out.Blocks[0].Attn)
	out.Blocks[0].Attn.Q = nil
	out.Blocks[0].Experts["up"] = nil
	out.Blocks[1].Norms[0] = nil
	out.Blocks = append(out.Blocks, nil)
	assert.NotNil(t, m.Blocks[0].Attn.Q)
	assert.NotNil(t, m.Blocks[0].Experts["up"])
	assert.NotNil(t, m.Blocks[1].Norms[0])
	assert.Len(t, m.Blocks, 2)

	// The Structure does not change when the tree it came from does.
	m.Blocks = m.Blocks[:1]
	m.Embed = nil
	again := pytree.Unflatten[*Model](s, leaves)
	samePointers(t, leaves, pytree.Leaves(again))
}

func TestNoSpareCapacityShared(t *testing.T) {
	type S struct {
		Empty []*tensor.Tensor
		Full  []*Linear
	}
	x := seqTensor(0, 1)
	tree := S{Empty: make([]*tensor.Tensor, 0, 4), Full: make([]*Linear, 1, 4)}
	tree.Full[0] = &Linear{W: x}
	out := pytree.Map(tree, tensor.Neg)
	out.Empty = append(out.Empty, x)
	out.Full = append(out.Full, &Linear{})
	assert.Nil(t, tree.Empty[:1][0], "appending to the copy wrote into the original's array")
	assert.Nil(t, tree.Full[:2][1], "appending to the copy wrote into the original's array")
	assert.NotNil(t, out.Empty, "an empty slice stays non-nil")
	leaves, s := pytree.Flatten(tree)
	u := pytree.Unflatten[S](s, leaves)
	u.Empty = append(u.Empty, x)
	assert.Nil(t, tree.Empty[:1][0])
	var nilSlices S
	assert.Nil(t, pytree.Map(nilSlices, tensor.Neg).Empty, "a nil slice stays nil")
}

func TestStructureKeepsNoTensors(t *testing.T) {
	m := newModel()
	embed := weak.Make(m.Embed)
	q := weak.Make(m.Blocks[1].Attn.Q)
	extra := weak.Make(m.Blocks[0].Extra.(*tensor.Tensor))
	_, s := pytree.Flatten(m)
	m = nil
	runtime.GC()
	runtime.GC()
	assert.Nil(t, embed.Value(), "the Structure keeps the tree's tensors alive")
	assert.Nil(t, q.Value())
	assert.Nil(t, extra.Value())

	assert.Equal(t, 19, s.NumLeaves())
	assert.Equal(t, 23, s.NumPositions())
	out := pytree.Unflatten[*Model](s, make([]*tensor.Tensor, 19))
	assert.Empty(t, pytree.Leaves(out))
	assert.Equal(t, "tiny", out.Config.Name)
}

func TestStructureStringAndEqual(t *testing.T) {
	a := seqTensor(0, 1)
	tests := []struct {
		tree any
		want string
	}{
		{newMLP(2, 3, 1), "&MLP{Layers: [Linear{W: *, B: *}, Linear{W: *, B: *}]}"},
		{*newMLP(2, 3), "MLP{Layers: [Linear{W: *, B: *}]}"},
		{[]*tensor.Tensor{a, nil}, "[*, nil]"},
		{map[string]any{"x": a, "y": 3, "z": nil}, `{"x": *, "y": int, "z": nil}`},
		{(*MLP)(nil), "nil"},
		{nil, "nil"},
		{a, "*"},
		{&Block{}, "&Block{Attn: nil, Norms: [nil, nil], Experts: {}, Extra: nil}"},
	}
	for _, tc := range tests {
		_, s := pytree.Flatten(tc.tree)
		assert.Equal(t, tc.want, s.String())
	}
	assert.Equal(t, "<invalid Structure>", pytree.Structure{}.String())

	_, s1 := pytree.Flatten(newMLP(2, 3, 1))
	_, s2 := pytree.Flatten(newMLP(5, 6, 7)) // other shapes, same structure
	_, s3 := pytree.Flatten(newMLP(2, 3))
	_, s4 := pytree.Flatten(*newMLP(2, 3, 1))
	m5 := newMLP(2, 3, 1)
	m5.Layers[1].B = nil
	_, s5 := pytree.Flatten(m5)
	assert.True(t, s1.Equal(s2))
	assert.False(t, s1.Equal(s3), "different length")
	assert.False(t, s1.Equal(s4), "pointer vs value")
	assert.False(t, s1.Equal(s5), "nil position")
	assert.False(t, s1.Equal(pytree.Structure{}))
	assert.True(t, pytree.Structure{}.Equal(pytree.Structure{}))
	assert.Equal(t, "&MLP{Layers: [Linear{W: *, B: *}, Linear{W: *, B: nil}]}", s5.String())
}

func TestStaticDataCarriedByReference(t *testing.T) {
	type Tokenizer struct{ Vocab []string }
	type Net struct {
		L     Linear
		Tok   *Tokenizer `pytree:"static"`
		Sizes []int
		Act   func(*tensor.Tensor) *tensor.Tensor
		Meta  map[int]string
		hid   *Linear
		n     int
	}
	hidden := &Linear{In: 9}
	n := Net{
		L:     Linear{W: seqTensor(0, 2, 2), B: seqTensor(1, 2), In: 2, Out: 2},
		Tok:   &Tokenizer{Vocab: []string{"a", "b"}},
		Sizes: []int{2, 2},
		Act:   tensor.Relu,
		Meta:  map[int]string{1: "x"},
		hid:   hidden,
		n:     5,
	}
	out := pytree.Map(n, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Neg(x) })
	assert.Same(t, n.Tok, out.Tok)
	assert.Same(t, &n.Sizes[0], &out.Sizes[0])
	assert.Equal(t, reflect.ValueOf(n.Act).Pointer(), reflect.ValueOf(out.Act).Pointer())
	assert.Equal(t, reflect.ValueOf(n.Meta).Pointer(), reflect.ValueOf(out.Meta).Pointer())
	assert.Same(t, hidden, out.hid)
	assert.Equal(t, 5, out.n)
	assert.Equal(t, 2, out.L.In)
	assert.Equal(t, []float32{0, -1, -2, -3}, out.L.W.Float32s())
	assert.Equal(t, []float32{0, 1, 2, 3}, n.L.W.Float32s(), "the input is not changed")
}

type Node struct {
	W    *tensor.Tensor
	Next *Node
}

func TestCycles(t *testing.T) {
	n := &Node{W: seqTensor(0, 1)}
	n.Next = &Node{Next: n}
	assert.Equal(t, "pytree: cycle: Node.Next.Next leads back to Node (the same *Node is already on the path)",
		panicMessage(t, func() { pytree.Leaves(n) }))

	s := []any{1, nil}
	s[1] = s
	assert.Equal(t, "pytree: cycle: []any[1] leads back to []any (the same []any is already on the path)",
		panicMessage(t, func() { pytree.Leaves(s) }))

	m := map[string]any{}
	m["self"] = []any{m}
	assert.Equal(t, `pytree: cycle: map[string]any["self"][0] leads back to map[string]any (the same map[string]any is already on the path)`,
		panicMessage(t, func() { pytree.Leaves(m) }))

	// The same check guards every entry point.
	requirePanicContains(t, func() { pytree.Flatten(n) }, "cycle")
	requirePanicContains(t, func() { pytree.Map(n, func(x *tensor.Tensor) *tensor.Tensor { return x }) }, "cycle")
	requirePanicContains(t, func() { pytree.Format(n) }, "cycle")
	requirePanicContains(t, func() { pytree.Equal(n, n, 0, 0) }, "cycle")

	// Sharing without a cycle is fine: a shared node is visited (and
	// copied) once per path, like a JAX pytree that holds a leaf twice.
	shared := &Linear{W: seqTensor(0, 2)}
	tied := struct{ Enc, Dec *Linear }{shared, shared}
	require.Len(t, pytree.Leaves(tied), 2)
	out := pytree.Map(tied, func(x *tensor.Tensor) *tensor.Tensor { return x })
	assert.NotSame(t, out.Enc, out.Dec)
	assert.Same(t, out.Enc.W, out.Dec.W)
}

func TestStaticFieldHoldingTensor(t *testing.T) {
	type WithCache struct {
		W     *tensor.Tensor
		cache *tensor.Tensor
	}
	type Frozen struct {
		W      *tensor.Tensor `pytree:"static"`
		Ignore *tensor.Tensor `pytree:"static"`
	}
	type ByID struct {
		ByID map[int]*Linear
	}
	type Hidden struct {
		layers []Linear
		meta   any
	}
	type Outer struct {
		Inner []WithCache
	}
	x := seqTensor(0, 3)
	tests := []struct {
		name string
		tree any
		msg  string
	}{
		{"unexported", &WithCache{cache: x},
			"pytree: static field WithCache.cache holds a tensor f32[3] (unexported fields are static, so the tensor would be invisible to transforms)"},
		{"tagged", Frozen{W: x},
			`pytree: static field Frozen.W holds a tensor f32[3] (the field is tagged pytree:"static", so the tensor would be invisible to transforms)`},
		{"non-string keys", ByID{ByID: map[int]*Linear{3: {B: x}}},
			"pytree: static field ByID.ByID holds a tensor f32[3] at ByID.ByID[3].B (maps with non-string keys are static, so the tensor would be invisible to transforms)"},
		{"deep", Hidden{layers: []Linear{{}, {W: x}}},
			"pytree: static field Hidden.layers holds a tensor f32[3] at Hidden.layers[1].W (unexported fields are static"},
		{"static interface", Hidden{meta: x},
			"pytree: static field Hidden.meta holds a tensor f32[3] (unexported"},
		{"nested path", Outer{Inner: []WithCache{{}, {cache: x}}},
			"pytree: static field Outer.Inner[1].cache holds a tensor f32[3]"},
		{"any holding a map with int keys", []any{map[int]*tensor.Tensor{0: x}},
			"pytree: static field []any[0] holds a tensor f32[3] at []any[0][0] (maps with non-string keys are static"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			msg := panicMessage(t, func() { pytree.Leaves(tc.tree) })
			assert.Contains(t, msg, tc.msg)
		})
	}
	// Nil tensors in static fields are fine.
	require.NotPanics(t, func() { pytree.Leaves(&WithCache{W: x}) })
	require.NotPanics(t, func() { pytree.Leaves(Hidden{layers: []Linear{{}}}) })
}

func TestTensorStoredByValue(t *testing.T) {
	type ByValue struct{ W tensor.Tensor }
	type Slice struct{ Ws []tensor.Tensor }
	type Map struct{ M map[string]tensor.Tensor }
	assert.Equal(t, "pytree: ByValue.W is a tensor.Tensor stored by value; use *tensor.Tensor",
		panicMessage(t, func() { pytree.Leaves(ByValue{}) }))
	assert.Equal(t, "pytree: Slice.Ws is a []tensor.Tensor: tensors stored by value; use *tensor.Tensor",
		panicMessage(t, func() { pytree.Leaves(Slice{}) }))
	assert.Equal(t, "pytree: Map.M is a map[string]tensor.Tensor: tensors stored by value; use *tensor.Tensor",
		panicMessage(t, func() { pytree.Leaves(&Map{}) }))
}

func TestMap(t *testing.T) {
	m := newMLP(2, 3, 1)
	m.Layers[1].B = nil
	calls := 0
	out := pytree.Map(m, func(x *tensor.Tensor) *tensor.Tensor {
		calls++
		return tensor.AddScalar(x, 1)
	})
	assert.Equal(t, 3, calls, "f is not called for nil positions")
	assert.Nil(t, out.Layers[1].B)
	assert.Equal(t, []float32{1, 2, 3}, out.Layers[0].B.Float32s())
	assert.Equal(t, []float32{0, 1, 2}, m.Layers[0].B.Float32s())
	assert.Equal(t, "mlp", out.Name)

	// f returning nil empties the position.
	out = pytree.Map(m, func(x *tensor.Tensor) *tensor.Tensor {
		if x.Rank() == 1 {
			return nil
		}
		return x
	})
	assert.Nil(t, out.Layers[0].B)
	assert.Same(t, m.Layers[0].W, out.Layers[0].W)

	// Map of a tree that is a single tensor, and of nil.
	x := seqTensor(0, 2)
	assert.Equal(t, []float32{0, -1}, pytree.Map(x, tensor.Neg).Float32s())
	assert.Nil(t, pytree.Map[*MLP](nil, tensor.Neg))
	assert.Nil(t, pytree.Map[any](nil, tensor.Neg))

	// MapWithPath sees the paths.
	var seen []string
	pytree.MapWithPath(m, func(p pytree.Path, x *tensor.Tensor) *tensor.Tensor {
		seen = append(seen, p.String())
		return x
	})
	assert.Equal(t, []string{"Layers[0].W", "Layers[0].B", "Layers[1].W"}, seen)
}

func TestMapKeepsLogicalAxes(t *testing.T) {
	type P struct{ W, B, S *tensor.Tensor }
	p := P{
		W: tensor.WithLogicalAxes(seqTensor(0, 2, 3), "embed", "mlp"),
		B: tensor.WithLogicalAxes(seqTensor(0, 3), "mlp"),
		S: seqTensor(0, 3),
	}
	// Ops drop axes; Map puts them back when the rank is unchanged.
	out := pytree.Map(p, func(x *tensor.Tensor) *tensor.Tensor { return tensor.MulScalar(x, 2) })
	assert.Equal(t, []string{"embed", "mlp"}, out.W.LogicalAxes())
	assert.Equal(t, []string{"mlp"}, out.B.LogicalAxes())
	assert.Nil(t, out.S.LogicalAxes())
	// A result of another rank does not get them.
	out = pytree.Map(p, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(x) })
	assert.Nil(t, out.W.LogicalAxes())
	// A result with its own axes keeps them.
	out = pytree.Map(p, func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.WithLogicalAxes(tensor.Neg(x), make([]string, x.Rank())...)
	})
	assert.Equal(t, []string{"", ""}, out.W.LogicalAxes())
	// MapWithPath and MapN keep them too.
	out = pytree.MapWithPath(p, func(_ pytree.Path, x *tensor.Tensor) *tensor.Tensor { return tensor.Neg(x) })
	assert.Equal(t, []string{"embed", "mlp"}, out.W.LogicalAxes())
	g := pytree.Map(p, func(x *tensor.Tensor) *tensor.Tensor { return tensor.OnesLike(x) })
	out = pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Sub(xs[0], xs[1]) }, p, g)
	assert.Equal(t, []string{"embed", "mlp"}, out.W.LogicalAxes())
	assert.Equal(t, []float32{-1, 0, 1, 2, 3, 4}, out.W.Float32s())
}

func TestMapN(t *testing.T) {
	params := newMLP(2, 3, 1)
	grads := pytree.Map(params, func(x *tensor.Tensor) *tensor.Tensor { return tensor.OnesLike(x) })
	grads.Layers[1].B = nil // no gradient for this one
	lr := float32(0.5)
	var sizes []int
	out := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		sizes = append(sizes, len(xs))
		if xs[1] == nil {
			return xs[0]
		}
		return tensor.Sub(xs[0], tensor.MulScalar(xs[1], lr))
	}, params, grads)
	assert.Equal(t, []int{2, 2, 2, 2}, sizes)
	assert.Equal(t, []float32{-0.5, 0.5, 1.5}, out.Layers[0].B.Float32s())
	assert.Same(t, params.Layers[1].B, out.Layers[1].B)

	// Positions nil in every tree stay nil without a call.
	a, b := newMLP(2, 3), newMLP(2, 3)
	a.Layers[0].B, b.Layers[0].B = nil, nil
	calls := 0
	out = pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor { calls++; return xs[0] }, a, b)
	assert.Equal(t, 1, calls)
	assert.Nil(t, out.Layers[0].B)

	// One tree.
	out = pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor { return tensor.Neg(xs[0]) }, a)
	assert.Equal(t, []float32{0, -1, -2, -3, -4, -5}, out.Layers[0].W.Float32s())
}

// MapNOut equals one MapN per result, nil positions included.
func TestMapNOut(t *testing.T) {
	params := newMLP(2, 3, 1)
	grads := pytree.Map(params, func(x *tensor.Tensor) *tensor.Tensor { return tensor.OnesLike(x) })
	grads.Layers[1].B = nil
	step := func(xs []*tensor.Tensor) []*tensor.Tensor {
		if xs[1] == nil {
			return []*tensor.Tensor{xs[0], nil}
		}
		return []*tensor.Tensor{tensor.Sub(xs[0], xs[1]), tensor.Neg(xs[1])}
	}
	calls := 0
	outs := pytree.MapNOut(2, func(xs []*tensor.Tensor) []*tensor.Tensor { calls++; return step(xs) }, params, grads)
	require.Len(t, outs, 2)
	assert.Equal(t, 4, calls, "one call per position")
	for k, out := range outs {
		want := pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor { return step(xs)[k] }, params, grads)
		assert.Nil(t, pytree.Diff(want, out, 0, 0), "result %d", k)
	}
	assert.Same(t, params.Layers[1].B, outs[0].Layers[1].B)
	assert.Nil(t, outs[1].Layers[1].B)
	assert.Equal(t, []float32{-1, -1, -1}, outs[1].Layers[0].B.Float32s())

	msg := panicMessage(t, func() {
		pytree.MapNOut(3, func(xs []*tensor.Tensor) []*tensor.Tensor { return xs }, params, grads)
	})
	assert.Equal(t, "pytree.MapNOut: f returned 2 tensors, want 3", msg)
}

func TestMapNOutAll(t *testing.T) {
	params := newMLP(2, 3, 1)
	grads := pytree.Map(params, func(x *tensor.Tensor) *tensor.Tensor { return tensor.OnesLike(x) })
	grads.Layers[1].B = nil
	// A position nil in every tree is left out of pos and stays nil.
	params.Layers[1].W, grads.Layers[1].W = nil, nil
	step := func(xs []*tensor.Tensor) []*tensor.Tensor {
		if xs[1] == nil {
			return []*tensor.Tensor{xs[0], nil}
		}
		return []*tensor.Tensor{tensor.Sub(xs[0], xs[1]), tensor.Neg(xs[1])}
	}
	calls := 0
	outs := pytree.MapNOutAll(2, func(pos [][]*tensor.Tensor) [][]*tensor.Tensor {
		calls++
		require.Len(t, pos, 3, "the positions not nil in every tree")
		assert.Same(t, params.Layers[0].W, pos[0][0])
		assert.Same(t, grads.Layers[0].B, pos[1][1])
		assert.Same(t, params.Layers[1].B, pos[2][0])
		assert.Nil(t, pos[2][1])
		rs := make([][]*tensor.Tensor, len(pos))
		for i, xs := range pos {
			rs[i] = step(xs)
		}
		return rs
	}, params, grads)
	require.Len(t, outs, 2)
	assert.Equal(t, 1, calls)
	for k, out := range outs {
		want := pytree.MapNOut(2, step, params, grads)[k]
		assert.Nil(t, pytree.Diff(want, out, 0, 0), "result %d", k)
	}
	assert.Nil(t, outs[0].Layers[1].W)
	assert.Same(t, params.Layers[1].B, outs[0].Layers[1].B)
	assert.Equal(t, []float32{-1, -1, -1}, outs[1].Layers[0].B.Float32s())

	msg := panicMessage(t, func() {
		pytree.MapNOutAll(2, func(pos [][]*tensor.Tensor) [][]*tensor.Tensor { return pos[:1] }, params, grads)
	})
	assert.Equal(t, "pytree.MapNOutAll: f returned results for 1 positions, want 3", msg)
	msg = panicMessage(t, func() {
		pytree.MapNOutAll(3, func(pos [][]*tensor.Tensor) [][]*tensor.Tensor { return pos }, params, grads)
	})
	assert.Equal(t, "pytree.MapNOutAll: f returned 2 tensors, want 3", msg)
}

func TestMapNMismatch(t *testing.T) {
	f := func(xs []*tensor.Tensor) *tensor.Tensor { return xs[0] }
	msg := panicMessage(t, func() { pytree.MapN(f, newMLP(2, 3, 1), newMLP(2, 3)) })
	assert.Equal(t, "pytree.MapN: tree 1 does not have the structure of tree 0: MLP.Layers: length 2 vs 1\n"+
		"  tree 0: &MLP{Layers: [Linear{W: *, B: *}, Linear{W: *, B: *}]}\n"+
		"  tree 1: &MLP{Layers: [Linear{W: *, B: *}]}", msg)

	x := seqTensor(0, 1)
	msg = panicMessage(t, func() {
		pytree.MapN(f, []any{x, map[string]*tensor.Tensor{"a": x}}, []any{x, map[string]*tensor.Tensor{"b": x}})
	})
	assert.Equal(t, `pytree.MapN: tree 1 does not have the structure of tree 0: []any[1]: keys ["a"] vs ["b"]`+"\n"+
		`  tree 0: [*, {"a": *}]`+"\n"+
		`  tree 1: [*, {"b": *}]`, msg)

	msg = panicMessage(t, func() { pytree.MapN(f, []any{x, 1}, []any{x, "s"}, []any{x, 1}) })
	assert.Equal(t, "pytree.MapN: tree 1 does not have the structure of tree 0: []any[1]: int vs string\n"+
		"  tree 0: [*, int]\n"+
		"  tree 1: [*, string]", msg)

	m := newModel()
	m2 := newModel()
	m2.Blocks[1].Attn = nil
	msg = panicMessage(t, func() { pytree.MapN(f, m, m2) })
	assert.Contains(t, msg, "tree 1 does not have the structure of tree 0: Model.Blocks[1].Attn: *Attention vs nil\n")

	assert.Equal(t, "pytree.MapN: no trees", panicMessage(t, func() { pytree.MapN[*MLP](f) }))

	// The panic value carries the parts, for callers that name the trees
	// in their own terms (package optim).
	defer func() {
		e, ok := recover().(*pytree.StructureError)
		require.True(t, ok, "the panic value is a *pytree.StructureError")
		assert.Equal(t, pytree.StructureError{Op: "pytree.MapN", Tree: 2, Where: "MLP.Layers: length 2 vs 1",
			Structures: [2]string{"&MLP{Layers: [Linear{W: *, B: *}, Linear{W: *, B: *}]}", "&MLP{Layers: [Linear{W: *, B: *}]}"}}, *e)
	}()
	pytree.MapN(f, newMLP(2, 3, 1), newMLP(2, 3, 1), newMLP(2, 3))
}

func TestFilterPartitionCombine(t *testing.T) {
	m := newModel()
	all := pytree.Leaves(m)
	require.Len(t, all, 19)

	params, rest := pytree.Partition(m, pytree.IsInexact)
	assert.Len(t, pytree.Leaves(params), 17)
	assert.Len(t, pytree.Leaves(rest), 2, "the int32 Extra leaves")
	assert.Nil(t, params.Blocks[0].Extra.(*tensor.Tensor), "typed nil keeps the interface's type")
	assert.Nil(t, rest.Embed)
	assert.Equal(t, "tiny", rest.Config.Name)
	assert.Equal(t, "tiny", params.Config.Name)

	// Both halves have the structure of the tree, up to nil positions.
	_, s := pytree.Flatten(m)
	_, sp := pytree.Flatten(params)
	_, sr := pytree.Flatten(rest)
	assert.Equal(t, s.NumPositions(), sp.NumPositions())
	assert.Equal(t, s.NumPositions(), sr.NumPositions())

	// Combine undoes Partition, in either order.
	for _, c := range []*Model{pytree.Combine(params, rest), pytree.Combine(rest, params)} {
		samePointers(t, all, pytree.Leaves(c))
		assert.True(t, pytree.Equal(m, c, 0, 0))
		_, sc := pytree.Flatten(c)
		assert.True(t, s.Equal(sc))
	}
	// Combining with a tree of nils changes nothing; combining nothing
	// with itself gives nils.
	none := pytree.Filter(m, func(pytree.Path, *tensor.Tensor) bool { return false })
	assert.Empty(t, pytree.Leaves(none))
	samePointers(t, all, pytree.Leaves(pytree.Combine(none, m)))
	assert.Empty(t, pytree.Leaves(pytree.Combine(none, none)))
	samePointers(t, all, pytree.Leaves(pytree.Combine(m)))

	// Where several trees hold a leaf, the first wins.
	ones := pytree.Map(m, tensor.OnesLike)
	samePointers(t, pytree.Leaves(ones), pytree.Leaves(pytree.Combine(ones, m)))
	samePointers(t, all, pytree.Leaves(pytree.Combine(m, ones)))

	// Partition by path.
	ws, others := pytree.Partition(m, pytree.PathGlob("**.W"))
	assert.Equal(t, []string{`Blocks[0].Experts["down"].W`, `Blocks[0].Experts["up"].W`,
		`Blocks[1].Experts["down"].W`, `Blocks[1].Experts["up"].W`, "Head.W"}, pathStrings(pytree.Paths(ws)))
	assert.Len(t, pytree.Leaves(others), 14)

	// Filter.
	f := pytree.Filter(m, pytree.And(pytree.IsInexact, pytree.Not(pytree.PathGlob("Blocks.**"))))
	assert.Equal(t, []string{"Embed", "Head.W", "Head.B"}, pathStrings(pytree.Paths(f)))
	assert.Len(t, pytree.Leaves(m), 19, "the input is not changed")

	// Combine of different structures.
	msg := panicMessage(t, func() { pytree.Combine(newMLP(2, 3, 1), newMLP(2, 3)) })
	assert.Contains(t, msg, "pytree.Combine: tree 1 does not have the structure of tree 0: MLP.Layers: length 2 vs 1\n")
	assert.Equal(t, "pytree.Combine: no trees", panicMessage(t, func() { pytree.Combine[*MLP]() }))
}

func TestPredicates(t *testing.T) {
	f := seqTensor(0, 1)
	i := tensor.ScalarInt(1)
	bo := tensor.ScalarBool(true)
	p := pytree.MustParsePath("Layers[0].W")
	assert.True(t, pytree.IsTensor(p, f))
	assert.False(t, pytree.IsTensor(p, nil))
	assert.True(t, pytree.IsInexact(p, f))
	assert.False(t, pytree.IsInexact(p, i))
	assert.False(t, pytree.IsInexact(p, bo))
	yes := func(pytree.Path, *tensor.Tensor) bool { return true }
	no := func(pytree.Path, *tensor.Tensor) bool { return false }
	tests := []struct {
		pred pytree.Predicate
		want bool
	}{
		{pytree.And(), true},
		{pytree.Or(), false},
		{pytree.And(yes, yes), true},
		{pytree.And(yes, no), false},
		{pytree.Or(no, yes), true},
		{pytree.Or(no, no), false},
		{pytree.Not(no), true},
		{pytree.Not(pytree.IsInexact), false},
		{pytree.And(pytree.IsInexact, pytree.PathGlob("Layers[*].W")), true},
		{pytree.And(pytree.IsInexact, pytree.PathGlob("Layers[*].B")), false},
	}
	for k, tc := range tests {
		assert.Equal(t, tc.want, tc.pred(p, f), "case %d", k)
	}
}

func TestDeepList(t *testing.T) {
	// A long linked list: the cycle check must stay cheap and exact.
	head := &Node{W: seqTensor(0, 1)}
	n := head
	for range 5000 {
		n.Next = &Node{W: n.W}
		n = n.Next
	}
	require.Len(t, pytree.Leaves(head), 5001)
	mid := head
	for range 2500 {
		mid = mid.Next
	}
	n.Next = mid // a cycle deep down
	msg := panicMessage(t, func() { pytree.Leaves(head) })
	assert.Contains(t, msg, "pytree: cycle: Node"+strings.Repeat(".Next", 5001)+" leads back to Node"+strings.Repeat(".Next", 2500)+" (")
	n.Next = nil
	out := pytree.Map(head, tensor.Neg)
	assert.Len(t, pytree.Leaves(out), 5001)
}

// Trees whose type can hold no tensor are static data: the functions that
// rebuild trees return them unchanged instead of reporting a changed tree.
func TestRebuildTreesWithoutLeaves(t *testing.T) {
	type Config struct{ Dim int }
	id := func(x *tensor.Tensor) *tensor.Tensor { return x }
	first := func(xs []*tensor.Tensor) *tensor.Tensor { return xs[0] }
	n := 3
	tests := []struct {
		name string
		run  func() any
		want any
	}{
		{"Map slice", func() any { return pytree.Map([]int{1, 2}, id) }, []int{1, 2}},
		{"Map nested slice", func() any { return pytree.Map([][]string{{"a"}}, id) }, [][]string{{"a"}}},
		{"Map pointer", func() any { return *pytree.Map(&Config{4}, id) }, Config{4}},
		{"Map map", func() any { return pytree.Map(map[string]int{"a": 1}, id) }, map[string]int{"a": 1}},
		{"MapWithPath slice", func() any {
			return pytree.MapWithPath([]int{5}, func(_ pytree.Path, x *tensor.Tensor) *tensor.Tensor { return x })
		}, []int{5}},
		{"MapN slice", func() any { return pytree.MapN(first, []int{1}, []int{1}) }, []int{1}},
		{"Filter slice", func() any { return pytree.Filter([]int{1, 2}, pytree.IsTensor) }, []int{1, 2}},
		{"Partition pointer", func() any {
			a, b := pytree.Partition(&n, pytree.IsTensor)
			return [2]int{*a, *b}
		}, [2]int{3, 3}},
		{"Combine pointer", func() any { return *pytree.Combine(&n, &n) }, 3},
		{"At pointer to struct", func() any {
			return *pytree.At(&Config{1}, func(c **Config) **Config { return c }, &Config{2})
		}, Config{2}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got any
			require.NotPanics(t, func() { got = tc.run() })
			assert.Equal(t, tc.want, got)
		})
	}
}
