package tensor

import (
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"testing"
	"unsafe"
	"weak"

	"github.com/stretchr/testify/require"
)

// What a graph keeps alive: only the values its nodes save for the
// backward pass. A node's shape-only placeholder for an input it does not
// save must not share the allocation that holds the input's header and
// data (newHeader puts the shape there), and a compiled checkpoint must
// not hold the nodes its recording made.

func TestPlaceholderDoesNotKeepValue(t *testing.T) {
	tr := NewTrace()
	x := tr.Leaf(Ones(Float32, 64, 64))
	a := Add(x, x) // an intermediate that Neg's backward does not read
	dead := weak.Make(a.primal)
	y := Neg(a)
	a = nil
	runtime.GC()
	require.Nil(t, dead.Value(), "Neg's node keeps its unsaved input alive")
	g := Backward(tr, []*Tensor{y}, []*Tensor{OnesLike(y)}, []*Tensor{x}, false)
	require.Equal(t, float32(-2), g[0].Float32s()[0])
}

func TestRematKeepsNoRecording(t *testing.T) {
	tr := NewTrace()
	w := tr.Leaf(FromFloat32([]float32{0.5, -0.25, 0.125, 1}, 2, 2))
	h := tr.Leaf(Ones(Float32, 3, 2))
	var inner []weak.Pointer[Tensor]
	run := func(in []*Tensor) []*Tensor {
		h := in[0]
		for range 4 {
			h = Tanh(MatMul(h, w))
			inner = append(inner, weak.Make(h.primal))
		}
		return []*Tensor{h}
	}
	for _, f := range []func(...*Tensor) []*Tensor{
		func(in ...*Tensor) []*Tensor { return Remat(run, nil, in...) },
		RematCompiled(run, nil),
	} {
		inner = nil
		out := f(h)[0]
		out = f(out)[0]
		runtime.GC()
		alive := 0
		for _, p := range inner {
			if p.Value() != nil {
				alive++
			}
		}
		// The outputs of the two calls (the first one is the second's
		// input, which its backward reads) and nothing else.
		require.LessOrEqual(t, alive, 2, "values of the recordings alive after compiling")
		g := Backward(tr, []*Tensor{out}, []*Tensor{OnesLike(out)}, []*Tensor{w, h}, true)
		require.Len(t, g, 2)
	}
}

// A node is small: every traced op makes one and a graph keeps them all
// until its backward pass, which on small tensors (a recurrence's steps)
// is most of what it keeps.
func TestNodeIsSmall(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(opRec{}), uintptr(640-8), "a node fits a 640-byte size class")
	// Above 512 bytes an object with pointers carries an 8-byte header.
	require.LessOrEqual(t, unsafe.Sizeof(opRecTwin{}), uintptr(704-8), "a node with its traced result fits a 704-byte size class")
	require.LessOrEqual(t, unsafe.Sizeof(leafRec{}), uintptr(320), "a leaf fits a 320-byte size class")
	require.LessOrEqual(t, 8*unsafe.Sizeof(leafRec{}), uintptr(2688-8), "a model's 8 leaves (Trace.Leaves) fit a 2688-byte size class")
}

// A header is small: every op result, placeholder and cotangent has one.
// The storage of every dtype lies in one slot (rawData), the rarely set
// fields behind one pointer (tensorExt).
func TestHeaderIsSmall(t *testing.T) {
	require.LessOrEqual(t, unsafe.Sizeof(Tensor{}), uintptr(96), "a header fits a 96-byte size class")
	require.LessOrEqual(t, unsafe.Sizeof(tensorBox{}), uintptr(160), "an op result's header, shape and holder count fit a 160-byte size class")
	require.LessOrEqual(t, unsafe.Sizeof(avalRec{}), uintptr(40), "a node's shape record")
}

// Residuals counts the graph: every node (leaves too), the headers of the
// values they save, and what did not fit in a node.
func TestResidualsCountGraph(t *testing.T) {
	node, hdr := int(unsafe.Sizeof(opRec{})), int(unsafe.Sizeof(Tensor{}))
	leaf := int(unsafe.Sizeof(leafRec{}) - unsafe.Sizeof(Tensor{})) // a leaf's traced header is not the graph's
	tr := NewTrace()
	x := tr.Leaf(Ones(Float32, 2, 3))
	y := Sum(Exp(x)) // exp saves its output, sum nothing
	rep := Residuals(y)
	require.Equal(t, ResidualStat{Count: 3, Bytes: leaf + 2*node + hdr}, rep.Graph)
	require.Equal(t, ResidualStat{Count: 1, Bytes: 24}, rep.ResidualStat)

	// Neg records its operand's shape and its result's, 8 ints each for a
	// rank-8 value: the second does not fit in the node. A leaf's record
	// shares its value's shape.
	z := tr.Leaf(Ones(Float32, 1, 1, 1, 1, 1, 1, 1, 2))
	rep = Residuals(Neg(Neg(z)))
	require.Equal(t, ResidualStat{Count: 3, Bytes: leaf + 2*node + 2*8*8}, rep.Graph)
	require.Contains(t, rep.String(), "graph: 3 nodes")
}

// The backward pass's node order, latest first: by the stack array when
// the sequence numbers span fewer than 64 (and then indexed by number), by
// a comparison sort when not; the same order as sorting by number, and
// indexOf finds every node and no other.
func TestNodeOrder(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 7))
	for _, tc := range []struct {
		name   string
		n, gap int
		dense  bool
	}{{"one", 1, 1, true}, {"dense", 13, 1, true}, {"sparse", 20, 3, true}, {"span 64", 2, 63, true}, {"wide", 40, 5, false}} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*node, tc.n)
			for i := range nodes {
				nodes[i] = &node{seq: uint64(100 + i*tc.gap)}
			}
			rng.Shuffle(len(nodes), func(i, j int) { nodes[i], nodes[j] = nodes[j], nodes[i] })
			want := slices.Clone(nodes)
			slices.SortFunc(want, func(a, b *node) int { return int(b.seq) - int(a.seq) })
			b := backward{nodes: nodes}
			dense := b.order.sort(nodes)
			require.Equal(t, tc.dense, dense)
			require.Equal(t, want, nodes)
			if !dense {
				for i, n := range nodes {
					n.slot.Store(int32(i))
				}
			}
			for i, n := range nodes {
				require.Equal(t, i, b.indexOf(n), "node %d", n.seq)
			}
			for _, seq := range []uint64{99, 101, uint64(100 + tc.n*tc.gap)} {
				require.Equal(t, -1, b.indexOf(&node{seq: seq}), "a node of seq %d not in the pass", seq)
			}
		})
	}
}

// The values RecycleIntermediates spares (spareValues): scanned when
// few, sorted by address and searched when many; the primals of traced
// outputs and parameters found, other values not.
func TestSpareValues(t *testing.T) {
	for _, n := range []int{1, valueSetScan - 1, valueSetScan, 40} {
		tr := NewTrace()
		xs := make([]*Tensor, n)
		for i := range xs {
			xs[i] = Zeros(Float32, 2)
		}
		traced := tr.Leaves(xs...)
		others := []*Tensor{Zeros(Float32, 2), Zeros(Float32, 2)}
		s := spareValues(make([]*Tensor, n+1), tr, traced[:1], traced[1:])
		require.Len(t, s, n)
		for i, x := range xs {
			require.True(t, s.has(x), "n=%d value %d", n, i)
		}
		for i, x := range others {
			require.False(t, s.has(x), "n=%d other value %d", n, i)
		}
	}
}

// A twin header (twinInto, stored field by field into a zero header) is
// its value's header without the cotangent's fields, whichever of the
// pointers are nil.
func TestTwinIntoCopiesEveryField(t *testing.T) {
	require.Equal(t, 11, reflect.TypeFor[Tensor]().NumField(),
		"Tensor has a new field: copy it in twinInto and set it here")
	x := Zeros(Float32, 2, 3)
	full := Tensor{
		dtype: Float32, donated: true, cotShared: true, outIdx: 2, shape: x.shape, data: x.data,
		node: &node{seq: 5}, primal: x, ext: &tensorExt{axes: []string{"a"}}, cot: &backwardPass{}, rec: x.rec,
	}
	for _, src := range []Tensor{full, {dtype: Int32, shape: []int{}}, {}} {
		var c Tensor
		src.twinInto(&c)
		want := src
		want.cot, want.cotShared = nil, false
		require.Equal(t, want, c)
		require.Equal(t, src.shape == nil, c.shape == nil)
	}
	require.NotNil(t, full.rec, "the test sets every pointer")
}
