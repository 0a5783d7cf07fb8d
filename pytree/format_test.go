package pytree_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// fakeLayout shards dimensions over named mesh axes, for type notation.
type fakeLayout struct{ axes []string }

func (l fakeLayout) DimAxes(i int) string { return l.axes[i] }
func (l fakeLayout) Gather(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Zeros(x.DType(), x.Shape()...)
}

func (l fakeLayout) MapBlocks(x *tensor.Tensor, _ func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	return tensor.NewSharded(x.DType(), x.Shape(), l)
}

type Static struct {
	I     int
	F     float32
	S     string
	B     bool
	D     time.Duration
	Fn    func()
	NilFn func()
	Sl    []int
	Long  []int
	M     map[string]int
	IM    map[int]string
	P     *Linear `pytree:"static"`
	In    struct{ A, B int }
	hid   int //lint:ignore U1000 an unexported field Format must not print
	Any   any
	Err   error
	Deep  struct {
		A struct{ B struct{ C struct{ D int } } }
	}
}

type panicky struct{}

func (panicky) String() string { panic("boom") }

func TestFormat(t *testing.T) {
	sharded := tensor.NewSharded(tensor.Float32, []int{8, 4}, fakeLayout{[]string{"dp", ""}})
	both := tensor.NewSharded(tensor.Float32, []int{8, 4}, fakeLayout{[]string{"(dp,tp)", "fsdp"}})
	tests := []struct {
		name string
		tree any
		want string
	}{
		{"nil", nil, "nil"},
		{"nil pointer", (*Linear)(nil), "nil"},
		{"leaf", seqTensor(0, 2, 2), "f32[2,2]"},
		{"int leaf", tensor.ScalarInt(3), "i32[]"},
		{"short struct", Linear{W: seqTensor(0, 2)}, "Linear{W: f32[2], B: nil, In: 0, Out: 0}"},
		{"sharded", &Linear{W: sharded, B: both}, "Linear{W: f32[8@dp,4], B: f32[8@(dp,tp),4@fsdp], In: 0, Out: 0}"},
		{"map sorted", map[string]*Linear{"b": nil, "a": {W: seqTensor(0, 2)}}, `{"a": Linear{W: f32[2], B: nil, In: 0, Out: 0}, "b": nil}`},
		{"interfaces", []any{nil, 1, seqTensor(0, 3), []*tensor.Tensor{}, "s", panicky{}}, `[nil, 1, f32[3], [], "s", %!v(PANIC=boom)]`},
		{"array", [2]*tensor.Tensor{nil, seqTensor(0, 1)}, "[nil, f32[1]]"},
		{"mlp", newMLP(2, 3, 1), `MLP{
  Layers: [
    Linear{W: f32[2,3], B: f32[3], In: 2, Out: 3},
    Linear{W: f32[3,1], B: f32[1], In: 3, Out: 1},
  ],
  Act: func,
  Name: "mlp",
  Dropout: 0.1,
}`},
		{"model", newModel(), `Model{
  Embed: f32[10,4],
  Blocks: [
    Block{
      Attn: Attention{Q: f32[4,4], K: f32[4,4], V: f32[4,4], Heads: 2},
      Norms: [f32[4], nil],
      Experts: {
        "down": Linear{W: f32[8,4], B: nil, In: 8, Out: 4},
        "up": Linear{W: f32[4,8], B: f32[8], In: 4, Out: 8},
      },
      Extra: i32[],
    },
    Block{
      Attn: Attention{Q: f32[4,4], K: f32[4,4], V: f32[4,4], Heads: 2},
      Norms: [f32[4], nil],
      Experts: {
        "down": Linear{W: f32[8,4], B: nil, In: 8, Out: 4},
        "up": Linear{W: f32[4,8], B: f32[8], In: 4, Out: 8},
      },
      Extra: i32[],
    },
  ],
  Head: Linear{W: f32[4,10], B: f32[10], In: 4, Out: 10},
  Config: {Dim: 4, Name: "tiny"},
}`},
		{"static values", &Static{I: 3, F: 0.1, S: "a\"b", B: true, D: time.Second, Fn: func() {}, Sl: []int{1, 2},
			Long: make([]int, 10), M: map[string]int{"b": 2, "a": 1}, IM: map[int]string{2: "x", 10: "y"},
			P: &Linear{In: 2}, Any: 2.5, Err: errors.New("bad")}, `Static{
  I: 3,
  F: 0.1,
  S: "a\"b",
  B: true,
  D: 1s,
  Fn: func,
  NilFn: nil,
  Sl: [1, 2],
  Long: []int(len=10),
  M: {"a": 1, "b": 2},
  IM: {2: "x", 10: "y"},
  P: Linear{W: nil, B: nil, In: 2, Out: 0},
  In: {A: 0, B: 0},
  Any: 2.5,
  Err: bad,
  Deep: {A: {B: {C: {...}}}},
}`},
		{"custom", &Custom{P: Pair{first: seqTensor(0, 1)}, S: Seq{items: []any{seqTensor(0, 2), 3, "x"}}}, `Custom{
  P: Pair{First: f32[1], second one: nil},
  S: Seq{f32[2], 3, "x"},
  SP: nil,
  Any: nil,
}`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			assert.Equal(t, tc.want, pytree.Format(tc.tree))
		})
	}
}

func TestFormatWidth(t *testing.T) {
	m := newMLP(2, 3, 1)
	assert.Equal(t, `MLP{
  Layers: [
    Linear{
      W: f32[2,3],
      B: f32[3],
      In: 2,
      Out: 3,
    },
    Linear{
      W: f32[3,1],
      B: f32[1],
      In: 3,
      Out: 1,
    },
  ],
  Act: func,
  Name: "mlp",
  Dropout: 0.1,
}`, pytree.FormatWidth(m, 40))
	// Wide enough for one line.
	one := pytree.FormatWidth(m, 1000)
	assert.Equal(t, `MLP{Layers: [Linear{W: f32[2,3], B: f32[3], In: 2, Out: 3}, Linear{W: f32[3,1], B: f32[1], In: 3, Out: 1}], Act: func, Name: "mlp", Dropout: 0.1}`, one)
	// Every line fits when it can.
	for _, line := range strings.Split(pytree.FormatWidth(newModel(), 60), "\n") {
		assert.LessOrEqual(t, len(line), 60, line)
	}
	// A line exactly at the limit is not broken.
	l := Linear{W: seqTensor(0, 2)}
	s := pytree.Format(l)
	assert.Equal(t, s, pytree.FormatWidth(l, len(s)))
	assert.NotEqual(t, s, pytree.FormatWidth(l, len(s)-1))
}

func TestFormatRejectsBadTrees(t *testing.T) {
	type WithCache struct{ cache *tensor.Tensor }
	requirePanicContains(t, func() { pytree.Format(WithCache{cache: seqTensor(0, 1)}) }, "static field WithCache.cache holds a tensor")
}
