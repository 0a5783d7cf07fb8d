package pytree_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Gen makes many distinct types, so that plans are built concurrently.
type Gen[T any] struct {
	W     *tensor.Tensor
	Items []T
	M     map[string]*Gen[T]
	Meta  T
}

type (
	k1 struct{ A *tensor.Tensor }
	k2 struct{ A, B *tensor.Tensor }
	k3 [3]*tensor.Tensor
	k4 map[string]*tensor.Tensor
	k5 []any
	k6 struct {
		X *k2
		y int //lint:ignore U1000 an unexported field the walk must skip
	}
	k7 *k1
	k8 struct{ P Pair }
)

func genTree[T any](item T) any {
	x := seqTensor(0, 2)
	return &Gen[T]{W: x, Items: []T{item, item}, M: map[string]*Gen[T]{"sub": {W: x, Items: []T{item}}}, Meta: item}
}

func TestConcurrentUse(t *testing.T) {
	x := seqTensor(1, 3)
	makers := []func() any{
		func() any { return genTree(k1{x}) },
		func() any { return genTree(k2{x, x}) },
		func() any { return genTree(k3{x, nil, x}) },
		func() any { return genTree(k4{"a": x}) },
		func() any { return genTree(k5{x, 1, "s"}) },
		func() any { return genTree(k6{X: &k2{A: x}}) },
		func() any { return genTree(k7(&k1{x})) },
		func() any { return genTree(k8{Pair{first: x}}) },
		func() any { return genTree(x) },
		func() any { return genTree(newMLP(2, 3, 1)) },
		func() any { return genTree(*newModel()) },
		func() any { return genTree[any](nil) },
	}
	// Every goroutine walks every type, starting at a different one, so
	// that plans are built and used concurrently; each checks its own
	// results (round trip, Partition/Combine, Format).
	const workers = 16
	var wg sync.WaitGroup
	errs := make(chan error, workers*len(makers))
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range makers {
				k := (i + w) % len(makers) // different goroutines start with different types
				tree := makers[k]()
				leaves, s := pytree.Flatten(tree)
				paths := pytree.Paths(tree)
				if len(paths) != len(leaves) {
					errs <- fmt.Errorf("maker %d: %d paths for %d leaves", k, len(paths), len(leaves))
					continue
				}
				back := pytree.Unflatten[any](s, leaves)
				if err := pytree.Diff(tree, back, 0, 0); err != nil {
					errs <- fmt.Errorf("maker %d: round trip: %v", k, err)
				}
				doubled := pytree.Map(back, func(x *tensor.Tensor) *tensor.Tensor { return tensor.FullLike(x, 2) })
				a, b := pytree.Partition(doubled, pytree.PathGlob("**.W"))
				c := pytree.Combine(a, b)
				if !pytree.Equal(doubled, c, 0, 0) {
					errs <- fmt.Errorf("maker %d: Combine(Partition) differs", k)
				}
				if pytree.Format(tree) != pytree.Format(back) {
					errs <- fmt.Errorf("maker %d: Format differs", k)
				}
				_ = s.String()
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestConcurrentUnflattenOfOneStructure(t *testing.T) {
	m := newModel()
	leaves, s := pytree.Flatten(m)
	var wg sync.WaitGroup
	outs := make([]*Model, 32)
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			fresh := make([]*tensor.Tensor, len(leaves))
			for j, x := range leaves {
				fresh[j] = tensor.FullLike(x, float64(i))
			}
			outs[i] = pytree.Unflatten[*Model](s, fresh)
		}()
	}
	wg.Wait()
	for i, o := range outs {
		require.NotNil(t, o)
		for _, x := range pytree.Leaves(o) {
			assert.Equal(t, float64(i), x.Float64s()[0])
		}
	}
	samePointers(t, leaves, pytree.Leaves(m))
}
