package data

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// imageBatch returns n images h×w×c whose values say where they are:
// 1000·i + 100·y + 10·x + k.
func imageBatch(n, h, w, c int) Batch {
	x := make([]float32, n*h*w*c)
	for i := range n {
		for y := range h {
			for xx := range w {
				for k := range c {
					x[((i*h+y)*w+xx)*c+k] = float32(1000*i + 100*y + 10*xx + k)
				}
			}
		}
	}
	idx := make([]int, n)
	for i := range idx {
		idx[i] = i
	}
	return Batch{X: tensor.FromFloat32(x, n, h, w, c), Y: tensor.Zeros(tensor.Int32, n), Indices: idx}
}

func keysFor(n int, seed uint64) []tensor.Key { return tensor.NewKey(seed).Split(n) }

// TestRandomCrop compares with padding the image explicitly and cutting
// the window out, for offsets read back from the output.
func TestRandomCrop(t *testing.T) {
	const n, h, w, c, pad = 200, 4, 5, 2, 2
	in := imageBatch(n, h, w, c)
	orig := in.X.Float32s()
	keys := keysFor(n, 1)
	out, err := RandomCrop{Padding: pad}.Augment(in, keys)
	require.NoError(t, err)
	assert.Equal(t, orig, in.X.Float32s(), "the input is unchanged")
	got := out.X.Float32s()
	seen := map[[2]int]int{}
	for i := range n {
		// The padded image, then every possible window: exactly the
		// drawn one matches.
		padded := make([]float32, (h+2*pad)*(w+2*pad)*c)
		for y := range h {
			for x := range w {
				for k := range c {
					padded[((y+pad)*(w+2*pad)+x+pad)*c+k] = orig[((i*h+y)*w+x)*c+k]
				}
			}
		}
		r := tensor.FoldIn(keys[i], 0).Data()
		dy := int(uint64(r[0]) * (2*pad + 1) >> 32)
		dx := int(uint64(r[1]) * (2*pad + 1) >> 32)
		seen[[2]int{dy, dx}]++
		for y := range h {
			for x := range w {
				for k := range c {
					want := padded[((y+dy)*(w+2*pad)+x+dx)*c+k]
					require.Equal(t, want, got[((i*h+y)*w+x)*c+k], "image %d offset (%d,%d) at (%d,%d,%d)", i, dy, dx, y, x, k)
				}
			}
		}
	}
	assert.Len(t, seen, 25, "every offset of 5×5 occurs")
	same, _ := RandomCrop{Padding: pad}.Augment(in, keys)
	assert.Equal(t, got, same.X.Float32s(), "same keys, same crops")
	none, _ := RandomCrop{}.Augment(in, keys)
	assert.Equal(t, orig, none.X.Float32s(), "no padding: the image itself")
}

func TestHorizontalFlip(t *testing.T) {
	const n, h, w, c = 2000, 2, 3, 2
	in := imageBatch(n, h, w, c)
	orig := in.X.Float32s()
	out, err := HorizontalFlip{}.Augment(in, keysFor(n, 2))
	require.NoError(t, err)
	got := out.X.Float32s()
	flipped := 0
	for i := range n {
		img, o := got[i*h*w*c:(i+1)*h*w*c], orig[i*h*w*c:(i+1)*h*w*c]
		isSame, isFlipped := true, true
		for y := range h {
			for x := range w {
				for k := range c {
					isSame = isSame && img[(y*w+x)*c+k] == o[(y*w+x)*c+k]
					isFlipped = isFlipped && img[(y*w+x)*c+k] == o[(y*w+w-1-x)*c+k]
				}
			}
		}
		require.True(t, isSame != isFlipped, "image %d is neither itself nor its mirror", i)
		if isFlipped {
			flipped++
		}
	}
	assert.InDelta(t, n/2, flipped, 5*math.Sqrt(n/4.0))
}

func TestNormalizeChannels(t *testing.T) {
	in := Batch{X: tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 1, 1, 3, 2)}
	out, err := NormalizeChannels{Mean: []float32{1, 2}, Std: []float32{2, 0.5}}.Augment(in, nil)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 0, 1, 4, 2, 8}, out.X.Float32s())
	assert.Panics(t, func() { _, _ = NormalizeChannels{Mean: []float32{1}, Std: []float32{1}}.Augment(in, nil) })
	assert.Panics(t, func() { _, _ = NormalizeChannels{Mean: []float32{1, 1}, Std: []float32{1, 0}}.Augment(in, nil) })
	assert.PanicsWithValue(t, "data.RandomCrop: want images f32[B,H,W,C], got f32[1,6]", func() {
		_, _ = RandomCrop{Padding: 1}.Augment(Batch{X: tensor.Zeros(tensor.Float32, 1, 6)}, keysFor(1, 0))
	})
}

// TestLoaderAugment: a loader's augmentation is that of ExampleKey,
// the same with or without Prefetch, and differs between epochs.
func TestLoaderAugment(t *testing.T) {
	const n = 24
	ds := &InMemory{X: imageBatch(n, 4, 4, 1).X, Y: tensor.Arange(n)}
	aug := Augmentations{RandomCrop{Padding: 1}, HorizontalFlip{}}
	key := tensor.NewKey(5)
	l := &Loader{Dataset: ds, BatchSize: 5, Shuffle: true, Key: key, Augment: aug}
	epochs := [][]Batch{collect(t, l, 0), collect(t, l, 1)}
	l.Prefetch = 2
	again := collect(t, l, 0)
	for i, b := range epochs[0] {
		assert.Equal(t, b.X.Float32s(), again[i].X.Float32s())
		// By hand: the dataset's rows and the documented keys.
		raw, _ := ds.Batch(b.Indices)
		keys := make([]tensor.Key, len(b.Indices))
		for j, ix := range b.Indices {
			keys[j] = ExampleKey(key, 0, ix)
		}
		want, _ := aug.Augment(raw, keys)
		assert.Equal(t, want.X.Float32s(), b.X.Float32s())
	}
	// Epoch 1 crops the same examples differently.
	byIndex := func(bs []Batch) map[int][]float32 {
		m := map[int][]float32{}
		for _, b := range bs {
			x := b.X.Float32s()
			for j, ix := range b.Indices {
				m[ix] = x[j*16 : (j+1)*16]
			}
		}
		return m
	}
	e0, e1 := byIndex(epochs[0]), byIndex(epochs[1])
	differ := 0
	for ix := range e0 {
		if e1[ix] != nil && !assert.ObjectsAreEqual(e0[ix], e1[ix]) {
			differ++
		}
	}
	assert.Greater(t, differ, n/2)
}
