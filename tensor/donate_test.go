package tensor_test

import (
	"fmt"
	"math"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// donated returns a donated f32[3] made by an op (its storage is the
// allocator's).
func donated() *tensor.Tensor {
	x := tensor.AddScalar(tensor.FromFloat32([]float32{1, 2, 3}, 3), 1)
	tensor.Donate(x)
	return x
}

// Every public op given a donated operand panics naming the op and the
// operand, like for a nil one (the check shares checkNil's path).
func TestDonatedOperands(t *testing.T) {
	ops := publicOps(t)
	x := tensor.FromFloat32([]float32{1, 2, 3}, 3)
	for name, params := range ops {
		call, ok := nilOps[name]
		if !ok {
			continue // TestNilOperands reports it
		}
		for k := range params {
			in := []*tensor.Tensor{x, x, x, x}
			in[k] = donated()
			want := "tensor." + name + ": operand " + params[k] + " f32[3] was donated (tensor.Donate)"
			assert.Equal(t, want, panicMessage(func() { call(in) }), "%s with operand %s donated", name, params[k])
		}
	}
}

// Readers of a donated tensor panic; its type still prints.
func TestDonatedReaders(t *testing.T) {
	readers := []struct {
		name string
		read func(x *tensor.Tensor)
	}{
		{"Tensor.Float32s", func(x *tensor.Tensor) { x.Float32s() }},
		{"Tensor.Float64s", func(x *tensor.Tensor) { x.Float64s() }},
		{"Tensor.Item", func(x *tensor.Tensor) { tensor.Sum(x).Item() }},
		{"Tensor.At", func(x *tensor.Tensor) { x.At(0) }},
		{"Tensor.RawFloat32", func(x *tensor.Tensor) { x.RawFloat32() }},
		{"tensor.Values", func(x *tensor.Tensor) { _ = x.Values() }},
	}
	for _, r := range readers {
		t.Run(r.name, func(t *testing.T) {
			x := donated()
			msg := panicMessage(func() { r.read(x) })
			assert.Contains(t, msg, "f32[3] was donated", "reader %s", r.name)
			assert.Equal(t, "f32[3]", x.String())
			assert.True(t, x.IsDonated())
		})
	}
}

// Donating nil, twice, or tensors that are not the allocator's is fine.
func TestDonateIdempotent(t *testing.T) {
	x := tensor.AddScalar(tensor.Ones(tensor.Float32, 64), 1)
	w := tensor.WrapFloat32(make([]float32, 64), 64)
	i := tensor.FromInts([]int{1, 2}, 2)
	require.NotPanics(t, func() { tensor.Donate(nil, x, x, w, i, nil) })
	require.NotPanics(t, func() { tensor.Donate(x) })
	assert.True(t, x.IsDonated())
	assert.True(t, w.IsDonated())
	assert.False(t, tensor.Ones(tensor.Float32, 2).IsDonated())
}

// Donating a traced tensor panics.
func TestDonateTraced(t *testing.T) {
	tr := tensor.NewTrace()
	x := tr.Leaf(tensor.Ones(tensor.Float32, 4))
	y := tensor.MulScalar(x, 2)
	assert.Contains(t, panicMessage(func() { tensor.Donate(y) }), "tensor.Donate: f32[4] is traced")
	assert.Contains(t, panicMessage(func() { tensor.Donate(x) }), "tensor.Donate: f32[4] is traced")
}

// reused reports whether, within a few tries, allocating n elements
// returns the storage identified by id.
func reused(id uintptr, n int) bool {
	for range 20 {
		if tensor.StorageID(tensor.Zeros(tensor.Float32, n)) == id {
			return true
		}
	}
	return false
}

// eventually reports whether try succeeds within 20 attempts: sync.Pool
// may drop what it is given (a quarter of it, at random, under the race
// detector), so a test of reuse repeats its whole scenario.
func eventually(try func() bool) bool {
	for range 20 {
		if try() {
			return true
		}
	}
	return false
}

// A donated op result's storage serves the next allocation of its size;
// a view keeps storage alive until the view is donated too; exposed storage
// is never recycled.
func TestDonateRecycles(t *testing.T) {
	const n = 1000
	t.Run("plain", func(t *testing.T) {
		assert.True(t, eventually(func() bool {
			x := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 1)
			id := tensor.StorageID(x)
			require.Equal(t, 1, tensor.HolderCount(x))
			tensor.Donate(x)
			return reused(id, n)
		}))
	})
	t.Run("view", func(t *testing.T) {
		assert.True(t, eventually(func() bool {
			x := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 1)
			id := tensor.StorageID(x)
			v := tensor.Reshape(x, 10, 100)
			w := tensor.WithLogicalAxes(x, "a")
			require.Equal(t, 3, tensor.HolderCount(x))
			tensor.Donate(x)
			require.False(t, reused(id, n))
			want := tensor.Full(tensor.Float32, 1, 10, 100).Float32s()
			require.Equal(t, want, v.Float32s(), "a view keeps its values")
			require.Equal(t, want, w.Float32s())
			tensor.Donate(v)
			require.False(t, reused(id, n))
			require.Equal(t, want, w.Float32s())
			tensor.Donate(w)
			return reused(id, n)
		}))
	})
	t.Run("exposed", func(t *testing.T) {
		x := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 1)
		id := tensor.StorageID(x)
		raw := x.RawFloat32()
		tensor.Donate(x)
		assert.False(t, reused(id, n))
		for _, v := range raw {
			require.Equal(t, float32(1), v)
		}
	})
	t.Run("cache off", func(t *testing.T) {
		defer tensor.SetAllocCache(false, false)()
		x := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 1)
		id := tensor.StorageID(x)
		tensor.Donate(x)
		assert.False(t, reused(id, n))
	})
}

// An untraced value a live graph saved is not recycled when donated: the
// backward pass that needs it panics naming the op, never reads recycled
// memory. Values the graph does not save are recycled as usual.
func TestDonateWhileTraced(t *testing.T) {
	const n = 256
	defer tensor.SetAllocCache(true, true)()
	tr := tensor.NewTrace()
	w := tr.Leaf(tensor.Ones(tensor.Float32, n))
	x := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 3)
	id := tensor.StorageID(x)
	y := tensor.Sum(tensor.Mul(w, x)) // Mul saves x
	tensor.Donate(x)
	assert.False(t, reused(id, n), "storage saved by a live graph was recycled")
	msg := panicMessage(func() {
		tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{w}, false)
	})
	assert.Contains(t, msg, "was donated")
}

// poisonedOps run every op converted to uninitialised outputs, on shapes
// whose results the primed cache serves.
var poisonedOps = []struct {
	name string
	f    func(a, b, v, bias *tensor.Tensor) []*tensor.Tensor
}{
	{"MatMul", func(a, b, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.MatMul(a, b)} }},
	{"MatMulT", func(a, b, _, _ *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.MatMulT(a, b, true, false)}
	}},
	{"Add broadcast", func(a, _, v, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Add(a, v)} }},
	{"Sub", func(a, b, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Sub(a, b)} }},
	{"Mul scalar", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.MulScalar(a, 3)} }},
	{"Div broadcast", func(a, _, v, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Div(v, a)} }},
	{"Exp", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Exp(a)} }},
	{"Tanh", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Tanh(a)} }},
	{"Relu", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Relu(a)} }},
	{"Clamp", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Clamp(a, -0.5, 0.5)} }},
	{"BiasAct relu", func(a, _, _, bias *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.BiasAct(a, bias, tensor.ActRelu)}
	}},
	{"BiasAct gelu", func(a, _, _, bias *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.BiasAct(a, bias, tensor.ActGelu)}
	}},
	{"MatMulBiasAct relu", func(a, b, _, bias *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.MatMulBiasAct(a, b, bias, tensor.ActRelu)}
	}},
	{"grad of MatMulBiasAct", func(a, b, _, bias *tensor.Tensor) []*tensor.Tensor {
		tr := tensor.NewTrace()
		al, bl, cl := tr.Leaf(a), tr.Leaf(b), tr.Leaf(bias)
		y := tensor.MSE(tensor.MatMulBiasAct(tensor.MatMulBiasAct(al, bl, cl, tensor.ActTanh), bl, cl, tensor.ActIdentity), a)
		return append([]*tensor.Tensor{y}, tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{al, bl, cl}, false)...)
	}},
	{"Softmax", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.Softmax(a, -1)} }},
	{"LogSoftmax", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor { return []*tensor.Tensor{tensor.LogSoftmax(a, 0)} }},
	{"Convert", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.Convert(tensor.Convert(a, tensor.BFloat16), tensor.Float32)}
	}},
	{"Where broadcast", func(a, b, v, _ *tensor.Tensor) []*tensor.Tensor {
		return []*tensor.Tensor{tensor.Where(tensor.Greater(v, tensor.Scalar(0)), a, tensor.Scalar(-1)), tensor.Where(tensor.Greater(a, b), a, b)}
	}},
	{"Transpose", func(a, _, _, _ *tensor.Tensor) []*tensor.Tensor {
		r := tensor.Reshape(a, 4, 6, 24)
		return []*tensor.Tensor{tensor.Transpose(a), tensor.Reshape(tensor.Transpose(r, 1, 0, 2), 24, 24)}
	}},
	{"AdamStep", func(a, b, _, _ *tensor.Tensor) []*tensor.Tensor {
		p, mu, nu := tensor.AdamStep(a, b, tensor.MulScalar(b, 0.1), tensor.Square(b), tensor.AdamCoeffs{B1: 0.9, B2: 0.999, G1: 0.1, G2: 0.001, A: -0.01, B: 1, Eps: 1e-8})
		return []*tensor.Tensor{p, mu, nu}
	}},
	{"SGDStep", func(a, b, _, _ *tensor.Tensor) []*tensor.Tensor {
		p, m := tensor.SGDStep(a, b, a, 0.9, -0.1, true)
		return []*tensor.Tensor{p, m}
	}},
	{"grad of a small MLP", func(a, b, _, bias *tensor.Tensor) []*tensor.Tensor {
		tr := tensor.NewTrace()
		al, bl, cl := tr.Leaf(a), tr.Leaf(b), tr.Leaf(bias)
		h := tensor.BiasAct(tensor.MatMul(al, bl), cl, tensor.ActGelu)
		h = tensor.Relu(tensor.MatMul(h, tensor.Transpose(bl, 1, 0)))
		y := tensor.MSE(tensor.Tanh(h), a)
		return append([]*tensor.Tensor{y}, tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{al, bl, cl}, false)...)
	}},
}

// Ops that write their results over recycled storage without zeroing it
// write every element: with recycled storage poisoned with NaN they give
// exactly the results of fresh storage.
func TestRecycledStoragePoisoned(t *testing.T) {
	const n = 24
	k := tensor.NewKey(1).Split(4)
	a, b := tensor.Normal(k[0], n, n), tensor.Normal(k[1], n, n)
	v, bias := tensor.Normal(k[2], n), tensor.Normal(k[3], n)
	prime := func() {
		for range 8 {
			tensor.Donate(tensor.AddScalar(tensor.Zeros(tensor.Float32, n, n), 0), tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 0))
		}
	}
	for _, c := range poisonedOps {
		t.Run(c.name, func(t *testing.T) {
			var want [][]float32
			func() {
				defer tensor.SetAllocCache(false, false)()
				for _, r := range c.f(a, b, v, bias) {
					want = append(want, r.Float32s())
				}
			}()
			defer tensor.SetAllocCache(true, true)()
			hits := tensor.CacheHits()
			prime()
			got := c.f(a, b, v, bias)
			assert.Greater(t, tensor.CacheHits(), hits, "the cache served nothing")
			require.Len(t, got, len(want))
			for i, r := range got {
				g := r.Float32s()
				for j := range g {
					require.False(t, math.IsNaN(float64(g[j])), "result %d element %d is poison", i, j)
					require.Equal(t, math.Float32bits(want[i][j]), math.Float32bits(g[j]), "result %d element %d", i, j)
				}
			}
		})
	}
}

// Many goroutines allocating and donating at once each see only their own
// values (run with -race).
func TestDonateConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 300 {
				n := 16 + (i%3)*16
				v := float32(g*1000 + i)
				x := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), v)
				y := tensor.MulScalar(x, 2)
				tensor.Donate(x)
				z := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 0)
				for _, e := range y.Float32s() {
					if e != 2*v {
						errs <- fmt.Errorf("goroutine %d step %d: %v, want %v", g, i, e, 2*v)
						return
					}
				}
				tensor.Donate(y, z)
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// RecycleIntermediates donates the intermediates the graph saved: the
// gradients are bit for bit those without it, an intermediate that
// escaped into a variable panics when used afterwards, and the result
// and the inputs stay valid.
func TestRecycleIntermediates(t *testing.T) {
	k := tensor.NewKey(2).Split(3)
	w, x, b := tensor.Normal(k[0], 8, 32), tensor.Normal(k[1], 16, 8), tensor.Normal(k[2], 32)
	run := func(recycle bool) ([][]float32, *tensor.Tensor, *tensor.Tensor) {
		tr := tensor.NewTrace()
		if recycle {
			tr.RecycleIntermediates()
		}
		wl, bl := tr.Leaf(w), tr.Leaf(b)
		h := tensor.BiasAct(tensor.MatMul(x, wl), bl, tensor.ActRelu)
		y := tensor.Mean(tensor.Square(h))
		gs := tensor.Backward(tr, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{wl, bl}, false)
		var out [][]float32
		for _, g := range gs {
			out = append(out, g.Float32s())
		}
		return out, h, y
	}
	want, h0, _ := run(false)
	assert.NotPanics(t, func() { h0.Float32s() })
	got, h, y := run(true)
	assert.Equal(t, want, got)
	assert.True(t, h.IsDonated())
	assert.Contains(t, panicMessage(func() { tensor.Relu(h) }), "tensor.Relu: operand x f32[16,32] was donated")
	assert.NotPanics(t, func() { y.Item() })
	assert.NotPanics(t, func() { x.Float32s(); w.Float32s(); b.Float32s() })
}

// Empty reuses recycled storage without zeroing it; BorrowFloat32, unlike
// RawFloat32, leaves storage recyclable.
func TestEmptyAndBorrow(t *testing.T) {
	const n = 512
	defer tensor.SetAllocCache(true, true)()
	found := eventually(func() bool {
		x := tensor.AddScalar(tensor.Zeros(tensor.Float32, n), 1)
		require.Len(t, x.BorrowFloat32(), n)
		id := tensor.StorageID(x)
		tensor.Donate(x)
		for range 20 {
			e := tensor.Empty(tensor.Float32, 8, 64)
			if tensor.StorageID(e) == id {
				require.True(t, math.IsNaN(float64(e.RawFloat32()[0])), "recycled storage is returned as it is (poisoned here)")
				return true
			}
		}
		return false
	})
	assert.True(t, found, "borrowed storage was not recycled")
	func() {
		defer tensor.SetAllocCache(false, false)()
		assert.Equal(t, make([]float32, 6), tensor.Empty(tensor.Float32, 2, 3).Float32s())
	}()
	assert.Equal(t, []int32{0, 0}, tensor.Empty(tensor.Int32, 2).Int32s())
	assert.Contains(t, panicMessage(func() { tensor.Empty(tensor.Float32, -1) }), "tensor.Empty: negative dimension")
}

// blockLayout is a Layout with blocks that Donate donates unless they
// are shared.
type blockLayout struct {
	blocks []*tensor.Tensor
	shared bool
}

func (l *blockLayout) DimAxes(int) string { return "d" }
func (l *blockLayout) Gather(x *tensor.Tensor) *tensor.Tensor {
	return tensor.Concat(0, l.blocks...)
}
func (l *blockLayout) MapBlocks(x *tensor.Tensor, fn func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	panic("unused")
}
func (l *blockLayout) DonateBlocks() {
	if !l.shared {
		tensor.Donate(l.blocks...)
	}
}
func (l *blockLayout) ShareBlocks() { l.shared = true }

// Donating a placed tensor donates its blocks through its layout.
func TestDonatePlaced(t *testing.T) {
	l := &blockLayout{blocks: []*tensor.Tensor{tensor.AddScalar(tensor.Zeros(tensor.Float32, 32), 1), tensor.AddScalar(tensor.Zeros(tensor.Float32, 32), 2)}}
	x := tensor.NewSharded(tensor.Float32, []int{64}, l)
	assert.Equal(t, float64(96), tensor.Sum(l.Gather(x)).Item())
	tensor.Donate(x)
	for _, b := range l.blocks {
		assert.True(t, b.IsDonated())
	}
	assert.Contains(t, panicMessage(func() { x.Float32s() }), "f32[64@d] was donated")

	// A second header over the layout (here WithLogicalAxes) shares the
	// blocks: donating one header must leave the other's values intact.
	l2 := &blockLayout{blocks: []*tensor.Tensor{tensor.AddScalar(tensor.Zeros(tensor.Float32, 32), 3)}}
	y := tensor.NewSharded(tensor.Float32, []int{32}, l2)
	z := tensor.WithLogicalAxes(y, "batch")
	tensor.Donate(y)
	assert.False(t, l2.blocks[0].IsDonated())
	assert.Equal(t, float64(96), tensor.Sum(l2.Gather(z)).Item())
}

// Storage is recycled within its size class: a donated buffer serves a
// later allocation of a nearby size (a mixture of experts' tokens per
// expert change from step to step), never a larger one than it holds.
func TestDonateRecyclesSizeClass(t *testing.T) {
	assert.True(t, eventually(func() bool {
		x := tensor.AddScalar(tensor.Zeros(tensor.Float32, 3000), 1)
		id := tensor.StorageID(x)
		tensor.Donate(x)
		y := tensor.Zeros(tensor.Float32, 2950)
		if tensor.StorageID(y) != id {
			return false
		}
		require.Equal(t, make([]float32, 2950), y.Float32s(), "recycled storage is zeroed")
		return true
	}))
	x := tensor.AddScalar(tensor.Zeros(tensor.Float32, 3000), 1)
	id := tensor.StorageID(x)
	tensor.Donate(x)
	for range 20 {
		require.NotEqual(t, id, tensor.StorageID(tensor.Zeros(tensor.Float32, 3100)), "storage served a size it does not hold")
	}
}

// A traced header over a value (a logical-axes copy of a leaf) holds
// nothing: it is valid as long as its primal, and donating the primal
// alone recycles the storage.
func TestTracedViewHoldsNothing(t *testing.T) {
	x := tensor.AddScalar(tensor.Zeros(tensor.Float32, 64), 1)
	tr := tensor.NewTrace()
	l := tr.Leaf(x)
	named := tensor.WithLogicalAxes(l, "a")
	assert.Equal(t, 1, tensor.HolderCount(x))
	assert.Equal(t, []string{"a"}, named.LogicalAxes())
	assert.Equal(t, 64.0, tensor.Sum(named).Item())
}
