package pytree_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

type flag struct{ On bool }

type flagged struct {
	W       *tensor.Tensor
	F       flag
	PF      *flag
	Fs      []flag
	Arr     [2]flag
	ByName  map[string]flag
	ByInt   map[int]flag // static: non-string keys
	Static  flag         `pytree:"static"`
	hidden  flag
	Any     any
	Nested  *flagged
	Pairing pytree.Node
}

// flagNode is a custom node with one flag child.
type flagNode struct{ f flag }

func (n flagNode) PytreeChildren() ([]string, []any) { return []string{"Flag"}, []any{n.f} }
func (n flagNode) PytreeRebuild(c []any) any         { return flagNode{c[0].(flag)} }

func TestMapType(t *testing.T) {
	w := tensor.FromFloat32([]float32{1, 2})
	in := flagged{
		W: w, PF: &flag{}, Fs: []flag{{}, {}}, ByName: map[string]flag{"a": {}}, ByInt: map[int]flag{1: {}},
		Any: flag{}, Nested: &flagged{F: flag{}}, Pairing: flagNode{},
	}
	before := pytree.Format(in)
	on := func(f flag) flag { f.On = true; return f }
	out := pytree.MapType(in, on)

	assert.True(t, out.F.On)
	assert.True(t, out.PF.On)
	assert.Equal(t, []flag{{true}, {true}}, out.Fs)
	assert.Equal(t, [2]flag{{true}, {true}}, out.Arr)
	assert.Equal(t, map[string]flag{"a": {true}}, out.ByName)
	assert.Equal(t, flag{true}, out.Any)
	assert.True(t, out.Nested.F.On)
	assert.Equal(t, flagNode{flag{true}}, out.Pairing)
	// Static data is not walked, as by every function of the package.
	assert.False(t, out.ByInt[1].On)
	assert.False(t, out.Static.On)
	assert.False(t, out.hidden.On)
	// Tensors are shared, the input is unchanged.
	assert.Same(t, w, out.W)
	assert.Equal(t, before, pytree.Format(in))
	assert.False(t, in.PF.On)
	assert.False(t, in.Fs[0].On)
	assert.False(t, in.ByName["a"].On)

	// Nothing to replace: the tree itself.
	type noFlags struct{ W *tensor.Tensor }
	nf := &noFlags{W: w}
	assert.Same(t, nf, pytree.MapType(nf, on))

	// A V is replaced whole, not searched inside.
	outer := pytree.MapType(in, func(f flagged) flagged { f.F.On = true; return f })
	assert.True(t, outer.F.On)
	assert.False(t, outer.Nested.F.On)
}

type flagList struct {
	F    flag
	Next *flagList
}

func TestMapTypeCycle(t *testing.T) {
	l := &flagList{}
	l.Next = &flagList{Next: l}
	require.PanicsWithValue(t, "pytree.MapType: cycle: flagList.Next.Next leads back to a flagList already on the path",
		func() { pytree.MapType(l, func(f flag) flag { return f }) })
}
