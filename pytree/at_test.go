package pytree_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

func TestAt(t *testing.T) {
	m := newModel()
	before := pytree.Leaves(m)
	w := seqTensor(100, 4, 8)

	tests := []struct {
		name  string
		apply func(*Model) *Model
		check func(t *testing.T, out *Model)
	}{
		{"leaf through pointers and a map", func(m *Model) *Model {
			// Map values are not addressable; a map of pointers is.
			return pytree.At(m, func(m **Model) **tensor.Tensor { return &(*m).Blocks[1].Experts["up"].W }, w)
		}, func(t *testing.T, out *Model) {
			assert.Same(t, w, out.Blocks[1].Experts["up"].W)
		}},
		{"array element", func(m *Model) *Model {
			return pytree.At(m, func(m **Model) **tensor.Tensor { return &(*m).Blocks[0].Norms[1] }, w)
		}, func(t *testing.T, out *Model) {
			assert.Same(t, w, out.Blocks[0].Norms[1])
		}},
		{"subtree", func(m *Model) *Model {
			return pytree.At(m, func(m **Model) *Linear { return &(*m).Head }, Linear{W: w, In: 4, Out: 8})
		}, func(t *testing.T, out *Model) {
			assert.Same(t, w, out.Head.W)
			assert.Nil(t, out.Head.B)
			assert.Equal(t, 8, out.Head.Out)
		}},
		{"pointer to nil", func(m *Model) *Model {
			return pytree.At(m, func(m **Model) **Attention { return &(*m).Blocks[0].Attn }, nil)
		}, func(t *testing.T, out *Model) {
			assert.Nil(t, out.Blocks[0].Attn)
			assert.NotNil(t, out.Blocks[1].Attn)
		}},
		{"whole slice", func(m *Model) *Model {
			return pytree.At(m, func(m **Model) *[]*Block { return &(*m).Blocks }, (*m).Blocks[:1])
		}, func(t *testing.T, out *Model) {
			assert.Len(t, out.Blocks, 1)
		}},
		{"static value inside the copied spine", func(m *Model) *Model {
			return pytree.At(m, func(m **Model) *int { return &(*m).Blocks[1].Attn.Heads }, 8)
		}, func(t *testing.T, out *Model) {
			assert.Equal(t, 8, out.Blocks[1].Attn.Heads)
		}},
		{"inline static struct", func(m *Model) *Model {
			return pytree.At(m, func(m **Model) *string { return &(*m).Config.Name }, "big")
		}, func(t *testing.T, out *Model) {
			assert.Equal(t, "big", out.Config.Name)
		}},
		{"interface", func(m *Model) *Model {
			return pytree.At(m, func(m **Model) *any { return &(*m).Blocks[0].Extra }, any(w))
		}, func(t *testing.T, out *Model) {
			assert.Same(t, w, out.Blocks[0].Extra)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := tc.apply(m)
			tc.check(t, out)
			// The original is untouched: same leaves, same spine values.
			samePointers(t, before, pytree.Leaves(m))
			assert.Equal(t, 2, m.Blocks[1].Attn.Heads)
			assert.Equal(t, "tiny", m.Config.Name)
			assert.Len(t, m.Blocks, 2)
			assert.NotSame(t, m, out)
		})
	}
}

func TestAtValueTree(t *testing.T) {
	m := *newMLP(2, 3, 1)
	w := seqTensor(9, 2, 3)
	out := pytree.At(m, func(m *MLP) **tensor.Tensor { return &m.Layers[0].W }, w)
	assert.Same(t, w, out.Layers[0].W)
	assert.NotSame(t, w, m.Layers[0].W)
	out = pytree.At(m, func(m *MLP) *float64 { return &m.Dropout }, 0.5)
	assert.Equal(t, 0.5, out.Dropout)
	assert.Equal(t, 0.1, m.Dropout)

	// Inside a custom node's value and a slice of leaves.
	leaves := []*tensor.Tensor{seqTensor(0, 1), seqTensor(1, 1)}
	got := pytree.At(leaves, func(s *[]*tensor.Tensor) **tensor.Tensor { return &(*s)[1] }, w)
	assert.Same(t, w, got[1])
	assert.NotSame(t, w, leaves[1])
}

func TestAtRejectsSharedMemory(t *testing.T) {
	type Tok struct{ Vocab []string }
	type Net struct {
		L     Linear
		Tok   *Tok `pytree:"static"`
		Sizes []int
	}
	n := &Net{L: Linear{W: seqTensor(0, 2)}, Tok: &Tok{Vocab: []string{"a"}}, Sizes: []int{1, 2}}
	other := 3
	tests := map[string]func(){
		"static pointer": func() {
			pytree.At(n, func(n **Net) *[]string { return &(*n).Tok.Vocab }, []string{"b"})
		},
		"static slice element": func() { pytree.At(n, func(n **Net) *int { return &(*n).Sizes[0] }, 5) },
		"a tensor":             func() { pytree.At(n, func(n **Net) *tensor.Tensor { return (*n).L.W }, tensor.Tensor{}) },
		"outside":              func() { pytree.At(n, func(n **Net) *int { return &other }, 5) },
	}
	for name, f := range tests {
		t.Run(name, func(t *testing.T) {
			requirePanicContains(t, f, "pytree.At: where returned a *", "does not point into the copy of the Net")
		})
	}
	assert.Equal(t, []string{"a"}, n.Tok.Vocab)
	assert.Equal(t, []int{1, 2}, n.Sizes)
	assert.Equal(t, 3, other)
	assert.Equal(t, "pytree.At: where returned nil",
		panicMessage(t, func() { pytree.At(n, func(n **Net) *int { return nil }, 1) }))
}

func TestAtPath(t *testing.T) {
	m := newModel()
	before := pytree.Leaves(m)
	w := seqTensor(100, 4, 8)

	out := pytree.AtPath(m, `Blocks[1].Experts["up"].W`, w)
	assert.Same(t, w, out.Blocks[1].Experts["up"].W)
	assert.NotSame(t, m.Blocks[1], out.Blocks[1])
	assert.Same(t, m.Blocks[0], out.Blocks[0], "only the path is copied")

	out = pytree.AtPath(m, "Blocks[0].Norms[1]", w)
	assert.Same(t, w, out.Blocks[0].Norms[1])

	out = pytree.AtPath(m, "Head", Linear{W: w})
	assert.Same(t, w, out.Head.W)

	out = pytree.AtPath(m, "Blocks[0].Attn", nil)
	assert.Nil(t, out.Blocks[0].Attn)

	out = pytree.AtPath(m, "Blocks[1].Attn.Heads", 16)
	assert.Equal(t, 16, out.Blocks[1].Attn.Heads)

	out = pytree.AtPath(m, "Config.Name", "big")
	assert.Equal(t, "big", out.Config.Name)

	out = pytree.AtPath(m, "Blocks[0].Extra", 7)
	assert.Equal(t, 7, out.Blocks[0].Extra)

	out = pytree.AtPath(m, "", &Model{})
	assert.Nil(t, out.Embed)

	// The original is untouched.
	samePointers(t, before, pytree.Leaves(m))
	assert.Equal(t, "tiny", m.Config.Name)
	assert.Equal(t, 2, m.Blocks[1].Attn.Heads)

	// Custom nodes, by name and by index, and interfaces.
	c := &Custom{P: Pair{first: seqTensor(0, 1), label: "l"}, S: Seq{items: []any{seqTensor(1, 1), 3}}, Any: Pair{}}
	oc := pytree.AtPath(c, `P["second one"]`, w)
	assert.Same(t, w, oc.P.second)
	assert.Equal(t, "l", oc.P.label)
	assert.Nil(t, c.P.second)
	oc = pytree.AtPath(c, "S[1]", 4)
	assert.Equal(t, 4, oc.S.items[1])
	assert.Equal(t, 3, c.S.items[1])
	oc = pytree.AtPath(c, "Any.First", w)
	assert.Same(t, w, oc.Any.(Pair).first)

	// Maps with named string keys and values that are not pointers.
	type Name string
	mp := map[Name]Linear{"a": {In: 1}}
	om := pytree.AtPath(mp, `["a"].In`, 2)
	assert.Equal(t, 2, om["a"].In)
	assert.Equal(t, 1, mp["a"].In)
}

func TestAtPathErrors(t *testing.T) {
	m := newModel()
	m.Blocks[0].Attn = nil
	tests := map[string]string{
		"Blocks[5].Attn":           `pytree.AtPath("Blocks[5].Attn"): Model.Blocks has 2 elements; no index 5`,
		"Blocks[0].Attn.Q":         `pytree.AtPath("Blocks[0].Attn.Q"): Model.Blocks[0].Attn is nil`,
		"Blocks[1].Attention":      `pytree.AtPath("Blocks[1].Attention"): Model.Blocks[1] (a Block) has no field Attention`,
		`Blocks[1].Experts["mid"]`: `pytree.AtPath("Blocks[1].Experts[\"mid\"]"): Model.Blocks[1].Experts has no key "mid"`,
		"Blocks.W":                 `pytree.AtPath("Blocks.W"): Model.Blocks is a []*Block; cannot select .W`,
		"Head[0]":                  `pytree.AtPath("Head[0]"): Model.Head is a Linear; cannot select [0]`,
		"Embed.X":                  `pytree.AtPath("Embed.X"): Model.Embed is a tensor; cannot select .X`,
		"Head.In.X":                `pytree.AtPath("Head.In.X"): Model.Head.In is a int; cannot select .X`,
		"Blocks[":                  `pytree.AtPath("Blocks["): bad path "Blocks[": missing ] after offset 6`,
		"Embed":                    `pytree.AtPath("Embed"): cannot replace Model.Embed (a *tensor.Tensor) with a int`,
		"Head.In":                  `pytree.AtPath("Head.In"): cannot set Model.Head.In (a int) to nil`,
		`Blocks[1].Experts[0]`:     `pytree.AtPath("Blocks[1].Experts[0]"): Model.Blocks[1].Experts is a map[string]*Linear; cannot select [0]`,
	}
	replace := map[string]any{"Embed": 3, "Head.In": nil}
	for path, want := range tests {
		assert.Equal(t, want, panicMessage(t, func() { pytree.AtPath(m, path, replace[path]) }), path)
	}

	type Hidden struct {
		w *tensor.Tensor //lint:ignore U1000 the unexported field AtPath must refuse
	}
	assert.Equal(t, `pytree.AtPath("w"): Hidden.w is unexported`,
		panicMessage(t, func() { pytree.AtPath(Hidden{}, "w", seqTensor(0, 1)) }))
	c := &Custom{}
	assert.Equal(t, `pytree.AtPath("P.Third"): Custom.P (a Pair) has no child .Third`,
		panicMessage(t, func() { pytree.AtPath(c, "P.Third", 1) }))
	assert.Equal(t, `pytree.AtPath("P.First"): cannot replace Custom.P.First (a *tensor.Tensor) with a int`,
		panicMessage(t, func() { pytree.AtPath(c, "P.First", 1) }))
	assert.Equal(t, `pytree.AtPath("S[0]"): cannot replace Custom.S[0] (a *tensor.Tensor) with a string`,
		panicMessage(t, func() { pytree.AtPath(&Custom{S: Seq{items: []any{seqTensor(0, 1)}}}, "S[0]", "x") }))
	require.NotPanics(t, func() { pytree.AtPath(c, "P.First", seqTensor(0, 1)) })
}
