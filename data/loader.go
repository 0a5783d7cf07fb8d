package data

import (
	"fmt"
	"io"
	"iter"
	"sync"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Loader iterates over a dataset in batches, one epoch at a time. Set its
// fields, then range over Epoch:
//
//	loader := &data.Loader{Dataset: train, BatchSize: 64, Shuffle: true, Key: key, Prefetch: 2}
//	for epoch := range 10 {
//		for b, err := range loader.Epoch(epoch) {
//			if err != nil {
//				return err
//			}
//			// b.X, b.Y ...
//		}
//	}
//
// Each epoch visits every example once (DropLast aside), in an order that
// depends only on Key and the epoch number: reproducible from run to run,
// different from epoch to epoch. With Prefetch > 0 batches are gathered
// and placed by a goroutine that runs ahead of the consumer; it stops when
// the epoch ends, when the loop is left early (break, return, panic), or
// on the first error, and it never outlives the range loop. The order of
// batches never depends on Prefetch.
//
// A Loader is not changed by Epoch, so it may be shared; its fields must
// not be changed while an epoch is running.
type Loader struct {
	// Dataset is what to iterate over.
	Dataset Dataset
	// BatchSize is the number of examples per batch (at least 1).
	BatchSize int
	// Shuffle visits the examples in the order of
	// tensor.Permutation(tensor.FoldIn(Key, epoch), n); otherwise in index
	// order.
	Shuffle bool
	// Key is the base key of the shuffle.
	Key tensor.Key
	// DropLast drops the last batch of an epoch when it is smaller than
	// BatchSize (so every batch has the same shape); otherwise it is kept.
	DropLast bool
	// Prefetch is how many finished batches the loader's goroutine may hold
	// ready for the consumer while it gathers the next one; 0 loads each
	// batch when it is asked for, on the consumer's goroutine.
	Prefetch int
	// Place, when set, is applied to each batch after it is gathered and
	// before it is handed out, for example to put it on a mesh:
	//
	//	Place: func(b data.Batch) (data.Batch, error) {
	//		return shard.FilterShard(b, mesh, shard.P("dp")), nil
	//	}
	//
	// It runs on the prefetch goroutine when Prefetch > 0.
	Place func(Batch) (Batch, error)
	// Sharding, when its mesh is set, places each batch on that mesh split
	// along its first dimension (the spec may split no other dimension;
	// the batch size must divide): the rows of each block are read from
	// the dataset for that block alone, so in a job of several processes
	// (package shard/mpi) each process reads only the examples its devices
	// hold. The values equal shard.Put of the whole batch. Place, if also
	// set, runs afterwards.
	Sharding shard.Sharding
	// Augment, when set, transforms the examples of each batch as they are
	// gathered (before Sharding and Place), example i of epoch e with the
	// key ExampleKey(Key, e, i): the same augmentation whatever BatchSize,
	// Prefetch or the mesh.
	Augment Augmentation
	// Progress, when set and a terminal (see IsTerminal), shows a progress
	// bar of the epoch's batches on it, advanced as the consumer finishes
	// each batch.
	Progress io.Writer
}

// NumBatches returns the number of batches in an epoch.
func (l *Loader) NumBatches() int {
	l.check("NumBatches")
	n := l.Dataset.Len()
	if l.DropLast {
		return n / l.BatchSize
	}
	return (n + l.BatchSize - 1) / l.BatchSize
}

// Order returns the order in which epoch visits the examples, before
// batching (and before dropping a partial last batch).
func (l *Loader) Order(epoch int) []int {
	l.check("Order")
	checkEpoch("Order", epoch)
	n := l.Dataset.Len()
	if !l.Shuffle {
		order := make([]int, n)
		for i := range order {
			order[i] = i
		}
		return order
	}
	return ints(tensor.Permutation(tensor.FoldIn(l.Key, uint32(epoch)), n))
}

func (l *Loader) check(what string) {
	switch {
	case l.Dataset == nil:
		panic(fmt.Sprintf("data.Loader.%s: no Dataset", what))
	case l.BatchSize < 1:
		panic(fmt.Sprintf("data.Loader.%s: BatchSize %d must be at least 1", what, l.BatchSize))
	case l.Prefetch < 0:
		panic(fmt.Sprintf("data.Loader.%s: Prefetch %d must not be negative", what, l.Prefetch))
	}
}

// checkEpoch panics if epoch, an argument of the Loader's method what,
// is negative: epochs count from 0 (a negative one would shuffle as some
// large epoch).
func checkEpoch(what string, epoch int) {
	if epoch < 0 {
		panic(fmt.Sprintf("data.Loader.%s: epoch %d must not be negative", what, epoch))
	}
}

// loaded is a batch or the error of producing it.
type loaded struct {
	b     Batch
	err   error
	panic any // a panic of the dataset or Place, re-raised by the consumer
}

// Epoch returns an iterator over the batches of the given epoch (0, 1, ...),
// for use with range. Each batch carries its Indices, Epoch and Step. An
// error from the dataset or from Place is yielded with a zero Batch and
// ends the epoch; a panic in either is re-raised on the goroutine ranging
// over the epoch, whatever Prefetch is.
//
// The shuffle is computed when the iteration starts, not when Epoch is
// called.
func (l *Loader) Epoch(epoch int) iter.Seq2[Batch, error] {
	l.check("Epoch")
	checkEpoch("Epoch", epoch)
	return func(yield func(Batch, error) bool) {
		order := l.Order(epoch)
		nb := l.NumBatches()
		load := func(step int) (r loaded) {
			defer func() {
				if p := recover(); p != nil {
					r = loaded{panic: p}
				}
			}()
			lo, hi := step*l.BatchSize, min((step+1)*l.BatchSize, len(order))
			idx := order[lo:hi:hi] // capped: appending to Indices cannot reach the next batch
			gather := func(ix []int) (Batch, error) { return augmented(l.Dataset, ix, l.Augment, l.Key, epoch) }
			var b Batch
			var err error
			if l.Sharding.Mesh() != nil {
				b, err = shardedBatch(gather, idx, l.Sharding)
			} else {
				b, err = gather(idx)
			}
			if err != nil {
				return loaded{err: fmt.Errorf("data: epoch %d batch %d: %w", epoch, step, err)}
			}
			if l.Place != nil {
				if b, err = l.Place(b); err != nil {
					return loaded{err: fmt.Errorf("data: epoch %d batch %d: placing: %w", epoch, step, err)}
				}
			}
			b.Indices, b.Epoch, b.Step = idx, epoch, step
			return loaded{b: b}
		}

		var bar *Progress
		if l.Progress != nil {
			bar = NewProgress(l.Progress, nb, fmt.Sprintf("epoch %d", epoch), "batch")
		}
		complete := false
		defer func() {
			if complete {
				bar.Finish()
			} else {
				bar.Stop()
			}
		}()
		// deliver hands r to the consumer and reports whether to go on.
		deliver := func(r loaded) bool {
			if r.panic != nil {
				panic(r.panic)
			}
			if !yield(r.b, r.err) || r.err != nil {
				return false
			}
			bar.Add(1)
			return true
		}

		if l.Prefetch == 0 {
			for step := range nb {
				if !deliver(load(step)) {
					return
				}
			}
			complete = true
			return
		}

		ch := make(chan loaded, l.Prefetch)
		stop := make(chan struct{})
		var wg sync.WaitGroup
		wg.Go(func() {
			defer close(ch)
			for step := range nb {
				r := load(step)
				select {
				case ch <- r:
				case <-stop:
					return
				}
				if r.err != nil || r.panic != nil {
					return
				}
			}
		})
		// However the loop ends, stop the producer and wait for it.
		defer wg.Wait()
		defer close(stop)
		for r := range ch {
			if !deliver(r) {
				return
			}
		}
		complete = true
	}
}
