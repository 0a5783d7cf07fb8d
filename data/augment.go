package data

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Augmentation transforms the examples of a batch gathered from a dataset,
// each with a key of its own, before the batch is placed: random crops,
// flips, normalisation (RandomCrop, HorizontalFlip, NormalizeChannels, and
// Augmentations to chain them). A Loader or Stream with Augment set derives
// the key of each example from its Key, the epoch and the example's index
// (ExampleKey), so augmented batches are reproducible, the same whatever
// the batch size, Prefetch, mesh or process count, and different from
// epoch to epoch.
//
// Augment must not change the tensors of b (a dataset may hand out views
// of its own storage): it returns a batch with new ones. keys[i] is the key
// of row i.
type Augmentation interface {
	Augment(b Batch, keys []tensor.Key) (Batch, error)
}

// augmentTag separates the keys of augmentation from those of the shuffle,
// which are FoldIn(Key, epoch) and keys derived from it by small counters.
const augmentTag = 0x61756721

// ExampleKey returns the key with which a Loader or Stream of base key key
// augments example index in epoch: FoldIn of the epoch's key, a fixed tag
// and the index's high and low words.
func ExampleKey(key tensor.Key, epoch int, index int) tensor.Key {
	k := tensor.FoldIn(tensor.FoldIn(key, uint32(epoch)), augmentTag)
	return tensor.FoldIn(tensor.FoldIn(k, uint32(uint64(index)>>32)), uint32(index))
}

// augmented gathers the examples idx of d and applies aug (if any) with
// their keys.
func augmented(d Dataset, idx []int, aug Augmentation, key tensor.Key, epoch int) (Batch, error) {
	b, err := d.Batch(idx)
	if err != nil || aug == nil {
		return b, err
	}
	keys := make([]tensor.Key, len(idx))
	for i, ix := range idx {
		keys[i] = ExampleKey(key, epoch, ix)
	}
	out, err := aug.Augment(b, keys)
	if err != nil {
		return Batch{}, fmt.Errorf("augmenting: %w", err)
	}
	out.Indices = b.Indices
	return out, nil
}

// Augmentations applies its augmentations in order; the i-th gets the keys
// tensor.FoldIn(k, i) of the example keys k, so each draws independently.
type Augmentations []Augmentation

// Augment applies each augmentation in turn.
func (as Augmentations) Augment(b Batch, keys []tensor.Key) (Batch, error) {
	sub := make([]tensor.Key, len(keys))
	for i, a := range as {
		for j, k := range keys {
			sub[j] = tensor.FoldIn(k, uint32(i))
		}
		var err error
		if b, err = a.Augment(b, sub); err != nil {
			return Batch{}, err
		}
	}
	return b, nil
}

// images checks that b.X is f32[B,H,W,C] with one key per row and returns
// its dimensions.
func images(what string, b Batch, keys []tensor.Key) (n, h, w, c int) {
	x := b.X
	if x == nil || x.DType() != tensor.Float32 || x.Rank() != 4 {
		panic(fmt.Sprintf("data.%s: want images f32[B,H,W,C], got %v", what, x))
	}
	if len(keys) != x.Dim(0) {
		panic(fmt.Sprintf("data.%s: %d keys for %v", what, len(keys), x))
	}
	return x.Dim(0), x.Dim(1), x.Dim(2), x.Dim(3)
}

// uniformBelow returns a number in [0, m) from a random word.
func uniformBelow(w uint32, m int) int { return int(uint64(w) * uint64(m) >> 32) }

// RandomCrop pads each image f32[B,H,W,C] with Padding zeros on every side
// and crops an H×W window at an offset drawn uniformly from the
// (2·Padding+1)² possible ones, as torchvision's RandomCrop(size,
// padding) does for CIFAR.
type RandomCrop struct {
	Padding int
}

// Augment crops every image of b at its own random offset.
func (c RandomCrop) Augment(b Batch, keys []tensor.Key) (Batch, error) {
	n, h, w, ch := images("RandomCrop", b, keys)
	if c.Padding < 0 {
		panic(fmt.Sprintf("data.RandomCrop: negative padding %d", c.Padding))
	}
	src := b.X.RawFloat32()
	out := make([]float32, len(src))
	span := 2*c.Padding + 1
	row := w * ch
	for i := range n {
		r := tensor.FoldIn(keys[i], 0).Data()
		dy, dx := uniformBelow(r[0], span)-c.Padding, uniformBelow(r[1], span)-c.Padding
		img, dst := src[i*h*row:(i+1)*h*row], out[i*h*row:(i+1)*h*row]
		for y := range h {
			sy := y + dy
			if sy < 0 || sy >= h {
				continue // a row of padding: zeros
			}
			// Columns x with 0 <= x+dx < w come from the image.
			lo, hi := max(0, -dx), min(w, w-dx)
			if lo < hi {
				copy(dst[y*row+lo*ch:y*row+hi*ch], img[sy*row+(lo+dx)*ch:sy*row+(hi+dx)*ch])
			}
		}
	}
	b.X = tensor.WrapFloat32(out, n, h, w, ch)
	return b, nil
}

// HorizontalFlip mirrors each image f32[B,H,W,C] left to right with
// probability one half.
type HorizontalFlip struct{}

// Augment flips the images of b whose key says so.
func (HorizontalFlip) Augment(b Batch, keys []tensor.Key) (Batch, error) {
	n, h, w, ch := images("HorizontalFlip", b, keys)
	src := b.X.RawFloat32()
	out := make([]float32, len(src))
	copy(out, src)
	for i := range n {
		if tensor.FoldIn(keys[i], 0).Data()[0]>>31 == 0 {
			continue
		}
		for y := range h {
			line := out[(i*h+y)*w*ch : (i*h+y+1)*w*ch]
			for x := range w / 2 {
				a, z := line[x*ch:(x+1)*ch], line[(w-1-x)*ch:(w-x)*ch]
				for k := range ch {
					a[k], z[k] = z[k], a[k]
				}
			}
		}
	}
	b.X = tensor.WrapFloat32(out, n, h, w, ch)
	return b, nil
}

// NormalizeChannels maps each feature x of channel c (the last dimension of X) to
// (x - Mean[c]) / Std[c], as torchvision's Normalize does for channels
// first. It uses no randomness.
type NormalizeChannels struct {
	Mean, Std []float32
}

// Augment normalises b.X.
func (nz NormalizeChannels) Augment(b Batch, keys []tensor.Key) (Batch, error) {
	x := b.X
	if x == nil || x.DType() != tensor.Float32 || x.Rank() < 2 || x.Dim(x.Rank()-1) != len(nz.Mean) || len(nz.Std) != len(nz.Mean) {
		panic(fmt.Sprintf("data.NormalizeChannels: %d means and %d deviations for %v: want one per channel (last dimension)", len(nz.Mean), len(nz.Std), x))
	}
	inv := make([]float32, len(nz.Std))
	for c, s := range nz.Std {
		if !(s > 0) {
			panic(fmt.Sprintf("data.NormalizeChannels: deviation %g of channel %d is not positive", s, c))
		}
		inv[c] = 1 / s
	}
	src := x.RawFloat32()
	out := make([]float32, len(src))
	ch := len(inv)
	for i, v := range src {
		c := i % ch
		out[i] = (v - nz.Mean[c]) * inv[c]
	}
	b.X = tensor.WrapFloat32(out, x.Shape()...)
	return b, nil
}
