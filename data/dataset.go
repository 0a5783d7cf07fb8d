package data

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Batch is a batch of examples, batch-first: X holds the inputs and Y the
// targets, each with the batch size as its first dimension. Y is nil for a
// dataset without targets.
//
// A Batch is a pytree whose leaves are X and Y (Indices, Epoch and Step are
// static), so a placement function can hand it whole to shard.FilterShard.
type Batch struct {
	X *tensor.Tensor
	Y *tensor.Tensor

	// Indices are the positions in the dataset of the examples, in batch
	// order: row i of X is example Indices[i].
	Indices []int
	// Epoch and Step say where a Loader produced the batch: Step counts the
	// batches of the epoch from 0. A dataset leaves them zero.
	Epoch, Step int
}

// Size returns the number of examples in b: the first dimension of X, or the
// length of Indices when X is nil.
func (b Batch) Size() int {
	if b.X != nil && b.X.Rank() > 0 {
		return b.X.Dim(0)
	}
	return len(b.Indices)
}

// Dataset is a finite, indexable collection of examples. Batch gathers the
// examples at the given indices, in that order, into one Batch; indices are
// in [0, Len()) and may repeat. An implementation should gather whole rows at
// once (as tensor.Take does) rather than build a tensor per example.
//
// Batch may be called from a goroutine other than the caller's (a Loader
// prefetches), but never concurrently with itself by one Loader. Errors from
// outside the program (a file that cannot be read) are returned; an index out
// of range is a programmer error and panics.
type Dataset interface {
	Len() int
	Batch(indices []int) (Batch, error)
}

// InMemory is a dataset held in memory as two tensors whose first dimension
// indexes the examples: features X (typically f32[N,...]) and targets Y
// (typically i32[N] class labels, or nil). Batches are gathered with
// tensor.Take, one op per tensor per batch.
type InMemory struct {
	X *tensor.Tensor
	Y *tensor.Tensor
}

// FromTensors returns the in-memory dataset of x and y (y may be nil).
// It panics if x is a scalar or y does not have as many rows as x.
func FromTensors(x, y *tensor.Tensor) *InMemory {
	if x == nil || x.Rank() == 0 {
		panic(fmt.Sprintf("data.FromTensors: features must have a batch dimension, got %v", x))
	}
	if y != nil && (y.Rank() == 0 || y.Dim(0) != x.Dim(0)) {
		panic(fmt.Sprintf("data.FromTensors: %s and %s: features and targets must have the same number of rows", x, y))
	}
	return &InMemory{X: x, Y: y}
}

// Len returns the number of examples.
func (d *InMemory) Len() int { return d.X.Dim(0) }

// Batch gathers the examples at indices. A run of consecutive ascending
// indices is sliced rather than gathered. It panics, naming the index, if
// one is outside [0, Len()).
func (d *InMemory) Batch(indices []int) (Batch, error) {
	return Batch{X: d.rows("data.InMemory.Batch", d.X, indices), Y: d.rows("data.InMemory.Batch", d.Y, indices), Indices: indices}, nil
}

// rows returns the rows of t at indices.
func (d *InMemory) rows(what string, t *tensor.Tensor, indices []int) *tensor.Tensor {
	if t == nil {
		return nil
	}
	n := t.Dim(0)
	contiguous := len(indices) > 0
	for i, ix := range indices {
		if ix < 0 || ix >= n {
			panic(fmt.Sprintf("%s: index %d (position %d) out of range [0,%d)", what, ix, i, n))
		}
		if i > 0 && ix != indices[i-1]+1 {
			contiguous = false
		}
	}
	if contiguous {
		return tensor.SliceAxis(t, 0, indices[0], indices[0]+len(indices))
	}
	return tensor.Take(t, tensor.FromInts(indices), 0)
}

// Subset returns the dataset of the examples at indices, materialised: its
// tensors hold copies of those rows, in that order.
func (d *InMemory) Subset(indices []int) *InMemory {
	return &InMemory{X: d.rows("data.InMemory.Subset", d.X, indices), Y: d.rows("data.InMemory.Subset", d.Y, indices)}
}

// SplitAt returns the first n examples and the rest, without shuffling.
// It panics unless 0 <= n <= Len().
func (d *InMemory) SplitAt(n int) (first, rest *InMemory) {
	if n < 0 || n > d.Len() {
		panic(fmt.Sprintf("data.InMemory.SplitAt: %d out of range [0,%d]", n, d.Len()))
	}
	cut := func(t *tensor.Tensor, lo, hi int) *tensor.Tensor {
		if t == nil {
			return nil
		}
		return tensor.SliceAxis(t, 0, lo, hi)
	}
	return &InMemory{X: cut(d.X, 0, n), Y: cut(d.Y, 0, n)}, &InMemory{X: cut(d.X, n, d.Len()), Y: cut(d.Y, n, d.Len())}
}

// Split shuffles the examples with key (tensor.Permutation) and splits them
// into a training set and a test set holding the fraction testFrac of the
// examples, rounded to the nearest whole example. The same key always gives
// the same split. Each side keeps the shuffled order; shuffle again per epoch
// with a Loader. It panics unless 0 <= testFrac <= 1.
func (d *InMemory) Split(key tensor.Key, testFrac float64) (train, test *InMemory) {
	if !(testFrac >= 0 && testFrac <= 1) {
		panic(fmt.Sprintf("data.InMemory.Split: test fraction %g outside [0,1]", testFrac))
	}
	n := d.Len()
	nTest := int(float64(n)*testFrac + 0.5)
	perm := ints(tensor.Permutation(key, n))
	return d.Subset(perm[:n-nTest]), d.Subset(perm[n-nTest:])
}

// Flatten returns the dataset with each example's features flattened:
// X of shape [N, d1, d2, ...] becomes [N, d1*d2*...]. No data is copied.
func (d *InMemory) Flatten() *InMemory {
	return &InMemory{X: tensor.Reshape(d.X, d.Len(), -1), Y: d.Y}
}

// ClassCounts returns how many examples have each label 0..n-1 in Y, which
// must be an int32 vector. Labels outside [0, n) are not counted.
func (d *InMemory) ClassCounts(n int) []int {
	if d.Y == nil || d.Y.DType() != tensor.Int32 || d.Y.Rank() != 1 {
		panic(fmt.Sprintf("data.InMemory.ClassCounts: labels must be an int32 vector, got %v", d.Y))
	}
	counts := make([]int, n)
	for _, y := range d.Y.RawInt32() {
		if y >= 0 && int(y) < n {
			counts[y]++
		}
	}
	return counts
}

// ints converts an int32 vector to []int.
func ints(t *tensor.Tensor) []int {
	raw := t.RawInt32()
	out := make([]int, len(raw))
	for i, v := range raw {
		out[i] = int(v)
	}
	return out
}

// Slice returns the dataset of the examples [lo, hi) of d, numbered from
// 0, without copying them: example i is example lo+i of d. Use it to hold
// out the end of a dataset too large to copy (a TokenWindows) for
// validation. It panics unless 0 <= lo <= hi <= d.Len().
func Slice(d Dataset, lo, hi int) Dataset {
	if lo < 0 || lo > hi || hi > d.Len() {
		panic(fmt.Sprintf("data.Slice: [%d,%d) out of range [0,%d]", lo, hi, d.Len()))
	}
	return &slice{d: d, lo: lo, n: hi - lo}
}

type slice struct {
	d     Dataset
	lo, n int
}

func (s *slice) Len() int { return s.n }

func (s *slice) Batch(indices []int) (Batch, error) {
	shifted := make([]int, len(indices))
	for i, ix := range indices {
		if ix < 0 || ix >= s.n {
			panic(fmt.Sprintf("data.Slice: index %d (position %d) out of range [0,%d)", ix, i, s.n))
		}
		shifted[i] = s.lo + ix
	}
	b, err := s.d.Batch(shifted)
	b.Indices = indices
	return b, err
}
