package pytree_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Test models. They look like the nn package's modules will: exported
// tensor fields are parameters, everything else is static.

type Linear struct {
	W, B    *tensor.Tensor
	In, Out int
}

type MLP struct {
	Layers  []Linear
	Act     func(*tensor.Tensor) *tensor.Tensor
	Name    string
	Dropout float64 `pytree:"static"`
	calls   int
}

type Attention struct {
	Q, K, V *tensor.Tensor
	Heads   int
}

type Block struct {
	Attn    *Attention
	Norms   [2]*tensor.Tensor
	Experts map[string]*Linear
	Extra   any
}

type Model struct {
	Embed  *tensor.Tensor
	Blocks []*Block
	Head   Linear
	Config struct {
		Dim  int
		Name string
	}
}

// Pair is a custom node with value receivers, unexported data and named
// children.
type Pair struct {
	first, second *tensor.Tensor
	label         string
}

func (p Pair) PytreeChildren() ([]string, []any) {
	return []string{"First", "second one"}, []any{p.first, p.second}
}

func (p Pair) PytreeRebuild(c []any) any {
	return Pair{first: c[0].(*tensor.Tensor), second: c[1].(*tensor.Tensor), label: p.label}
}

// Seq is a custom node with pointer receivers and indexed children of
// any kind.
type Seq struct {
	items []any
}

func (s *Seq) PytreeChildren() ([]string, []any) { return nil, s.items }
func (s *Seq) PytreeRebuild(c []any) any         { return &Seq{items: c} }

type Custom struct {
	P   Pair
	S   Seq
	SP  *Seq
	Any any
}

// t32 returns a float32 tensor holding vals with the given shape (1-D by
// default).
func t32(vals []float32, shape ...int) *tensor.Tensor { return tensor.FromFloat32(vals, shape...) }

// seqTensor returns a float32 tensor of the shape filled with start,
// start+1, ...
func seqTensor(start float32, shape ...int) *tensor.Tensor {
	n := 1
	for _, d := range shape {
		n *= d
	}
	v := make([]float32, n)
	for i := range v {
		v[i] = start + float32(i)
	}
	return tensor.FromFloat32(v, shape...)
}

func newMLP(sizes ...int) *MLP {
	m := &MLP{Act: tensor.Relu, Name: "mlp", Dropout: 0.1}
	for i := 0; i+1 < len(sizes); i++ {
		m.Layers = append(m.Layers, Linear{
			W:  seqTensor(float32(10*i), sizes[i], sizes[i+1]),
			B:  seqTensor(float32(-i), sizes[i+1]),
			In: sizes[i], Out: sizes[i+1],
		})
	}
	return m
}

func newModel() *Model {
	m := &Model{Embed: seqTensor(0, 10, 4)}
	for i := range 2 {
		m.Blocks = append(m.Blocks, &Block{
			Attn:  &Attention{Q: seqTensor(1, 4, 4), K: seqTensor(2, 4, 4), V: seqTensor(3, 4, 4), Heads: 2},
			Norms: [2]*tensor.Tensor{seqTensor(float32(i), 4), nil},
			Experts: map[string]*Linear{
				"up":   {W: seqTensor(4, 4, 8), B: seqTensor(5, 8), In: 4, Out: 8},
				"down": {W: seqTensor(6, 8, 4), B: nil, In: 8, Out: 4},
			},
			Extra: tensor.ScalarInt(int32(i)),
		})
	}
	m.Head = Linear{W: seqTensor(7, 4, 10), B: seqTensor(8, 10), In: 4, Out: 10}
	m.Config.Dim = 4
	m.Config.Name = "tiny"
	return m
}

// panicMessage runs f and returns the message it panicked with, failing
// the test if it did not panic.
func panicMessage(t *testing.T, f func()) (msg string) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "expected a panic")
		msg = fmt.Sprint(r)
	}()
	f()
	return ""
}

// requirePanicContains checks that f panics with a message containing
// every one of parts.
func requirePanicContains(t *testing.T, f func(), parts ...string) {
	t.Helper()
	msg := panicMessage(t, f)
	for _, p := range parts {
		require.True(t, strings.Contains(msg, p), "panic message %q does not contain %q", msg, p)
	}
}

// samePointers checks that two leaf lists hold the same tensors.
func samePointers(t *testing.T, want, got []*tensor.Tensor) {
	t.Helper()
	require.Len(t, got, len(want))
	for i := range want {
		require.Same(t, want[i], got[i], "leaf %d", i)
	}
}

func pathStrings(ps []pytree.Path) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.String()
	}
	return out
}
