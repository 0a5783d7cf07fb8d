package data

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Stream is an endless, resumable sequence of batches of a dataset of any
// size, for training loops that count steps rather than epochs. Batch p
// (its position, from 0) is step p mod NumBatches() of epoch p div
// NumBatches(), and holds the examples at positions step·BatchSize ...
// (step+1)·BatchSize-1 of that epoch's order: with Shuffle, the order of
// NewPermutation(tensor.FoldIn(Key, epoch), n), computed position by
// position, so even a dataset of billions of examples costs no memory for
// its order; otherwise index order. A partial last batch of an epoch is
// never made (every batch has BatchSize examples).
//
// A batch depends only on the Stream's fields and its position: not on
// Prefetch, nor the mesh, nor how many processes share the work. So a
// training run saves the position of its next batch in its checkpoints (an
// i32[] or i64 step counter, as checkpoint's example saves its loader
// position) and resumes with Open(ctx, position) bit-exact mid-epoch, on
// the same mesh or on another.
//
// Each batch is read only where it is needed: with Sharding, each process
// of a job reads the rows of its own devices (as Loader does); with Share,
// each of Share.Count processes reads its own contiguous Share.Count-th of
// every batch, the way torch's DistributedSampler splits the work.
//
//	s := &data.Stream{Dataset: windows, BatchSize: 32, Shuffle: true, Key: key, Prefetch: 4}
//	r := s.Open(ctx, start)
//	defer r.Close()
//	for step := start; step < steps; step++ {
//		b, err := r.Next()
//		if err != nil {
//			return err
//		}
//		// b.X, b.Y ...; save r.Position() with a checkpoint
//	}
//
// A Stream is not changed by Open, so it may be shared; its fields must not
// change while a Reader is open.
type Stream struct {
	// Dataset is what to read; its Len is the number of examples of an
	// epoch.
	Dataset Dataset
	// BatchSize is the number of examples of a (global) batch, at least 1.
	BatchSize int
	// Shuffle visits each epoch's examples in a random order of Key and
	// the epoch; otherwise in index order.
	Shuffle bool
	// Key is the base key of the shuffle and of Augment.
	Key tensor.Key
	// Share, when Count > 1, makes this stream deliver only rows
	// [Index·B/Count, (Index+1)·B/Count) of every batch of B examples; B
	// must be a multiple of Count. The shares of processes 0..Count-1
	// concatenate to the batch of one process. It excludes Sharding.
	Share Share
	// Sharding, when its mesh is set, places each batch on that mesh split
	// along its first dimension, reading in each process only the rows of
	// its devices, as Loader.Sharding does.
	Sharding shard.Sharding
	// Augment, when set, transforms the examples of each batch as they
	// are gathered, example i of epoch e with the key
	// ExampleKey(Key, e, i).
	Augment Augmentation
	// Place, when set, is applied to each batch after it is gathered (and
	// placed by Sharding) and before it is handed out.
	Place func(Batch) (Batch, error)
	// Prefetch is how many batches a goroutine may have ready ahead of the
	// consumer (a bounded queue); 0 reads each batch in Next.
	Prefetch int
}

// Share names the part of each batch one process of several reads (see
// Stream.Share). The zero value is the whole batch.
type Share struct {
	Index, Count int
}

// NumBatches returns the number of batches of an epoch: Len/BatchSize.
func (s *Stream) NumBatches() int64 {
	s.check("NumBatches")
	return int64(s.Dataset.Len() / s.BatchSize)
}

func (s *Stream) check(what string) {
	switch {
	case s.Dataset == nil:
		panic(fmt.Sprintf("data.Stream.%s: no Dataset", what))
	case s.BatchSize < 1:
		panic(fmt.Sprintf("data.Stream.%s: BatchSize %d must be at least 1", what, s.BatchSize))
	case s.Prefetch < 0:
		panic(fmt.Sprintf("data.Stream.%s: Prefetch %d must not be negative", what, s.Prefetch))
	case s.Share.Count > 1 && (s.Share.Index < 0 || s.Share.Index >= s.Share.Count || s.BatchSize%s.Share.Count != 0):
		panic(fmt.Sprintf("data.Stream.%s: Share %d of %d with BatchSize %d: want 0 <= Index < Count dividing BatchSize", what, s.Share.Index, s.Share.Count, s.BatchSize))
	case s.Share.Count > 1 && s.Sharding.Mesh() != nil:
		panic(fmt.Sprintf("data.Stream.%s: both Share and Sharding set", what))
	}
}

// Indices returns the indices of the examples of the batch at position
// (all of them, whatever Share), and its epoch and step. It panics if
// position is negative or the dataset has fewer examples than a batch.
func (s *Stream) Indices(position int64) (idx []int, epoch int, step int64) {
	s.check("Indices")
	nb := s.NumBatches()
	if nb == 0 {
		panic(fmt.Sprintf("data.Stream: %d examples make no batch of %d", s.Dataset.Len(), s.BatchSize))
	}
	if position < 0 {
		panic(fmt.Sprintf("data.Stream: negative position %d", position))
	}
	epoch, step = int(position/nb), position%nb
	idx = make([]int, s.BatchSize)
	first := int(step) * s.BatchSize
	if !s.Shuffle {
		for j := range idx {
			idx[j] = first + j
		}
		return idx, epoch, step
	}
	perm := NewPermutation(tensor.FoldIn(s.Key, uint32(epoch)), s.Dataset.Len())
	for j := range idx {
		idx[j] = perm.At(first + j)
	}
	return idx, epoch, step
}

// load reads the batch at position.
func (s *Stream) load(position int64) (r loaded) {
	defer func() {
		if p := recover(); p != nil {
			r = loaded{panic: p}
		}
	}()
	if s.NumBatches() == 0 {
		return loaded{err: fmt.Errorf("data: batch %d: the dataset's %d examples make no batch of %d", position, s.Dataset.Len(), s.BatchSize)}
	}
	idx, epoch, step := s.Indices(position)
	if c := s.Share.Count; c > 1 {
		per := s.BatchSize / c
		idx = idx[s.Share.Index*per : (s.Share.Index+1)*per : (s.Share.Index+1)*per]
	}
	gather := func(ix []int) (Batch, error) { return augmented(s.Dataset, ix, s.Augment, s.Key, epoch) }
	var b Batch
	var err error
	if s.Sharding.Mesh() != nil {
		b, err = shardedBatch(gather, idx, s.Sharding)
	} else {
		b, err = gather(idx)
	}
	if err == nil && s.Place != nil {
		if b, err = s.Place(b); err != nil {
			err = fmt.Errorf("placing: %w", err)
		}
	}
	if err != nil {
		return loaded{err: fmt.Errorf("data: batch %d (epoch %d, step %d): %w", position, epoch, step, err)}
	}
	b.Indices, b.Epoch, b.Step = idx, epoch, int(step)
	return loaded{b: b}
}

// Reader reads a Stream from a position on: Next returns the batches in
// order. With Prefetch > 0 a goroutine reads ahead into a bounded queue;
// it stops when Close is called or the context is done, and Close waits
// for it, so none outlives the Reader. Call Close when done (defer it).
// A Reader is for one goroutine.
type Reader struct {
	s      *Stream
	ctx    context.Context
	cancel context.CancelFunc
	pos    int64
	ch     chan loaded
	wg     sync.WaitGroup
	err    error
	closed bool
}

// ErrClosed is returned by Next after Close.
var ErrClosed = errors.New("data: reader is closed")

// Open returns a Reader of the batches from position on (0 for a new run;
// the Position saved with a checkpoint to resume). When ctx is done, Next
// returns its error. A dataset too small for one batch makes Next fail.
func (s *Stream) Open(ctx context.Context, position int64) *Reader {
	s.check("Open")
	if position < 0 {
		panic(fmt.Sprintf("data.Stream.Open: negative position %d", position))
	}
	ctx, cancel := context.WithCancel(ctx)
	r := &Reader{s: s, ctx: ctx, cancel: cancel, pos: position}
	if s.Prefetch > 0 {
		r.ch = make(chan loaded, s.Prefetch)
		r.wg.Go(func() {
			defer close(r.ch)
			for p := position; ctx.Err() == nil; p++ {
				l := s.load(p)
				select {
				case r.ch <- l:
				case <-ctx.Done():
					return
				}
				if l.err != nil || l.panic != nil {
					return
				}
			}
		})
	}
	return r
}

// Next returns the batch at Position() and advances. An error reading it
// (naming the position) ends the reader: every later call returns it. A
// panic of the dataset, Augment or Place is re-raised here.
func (r *Reader) Next() (Batch, error) {
	if r.closed {
		return Batch{}, ErrClosed
	}
	if r.err != nil {
		return Batch{}, r.err
	}
	if err := r.ctx.Err(); err != nil {
		return Batch{}, err
	}
	var l loaded
	if r.ch == nil {
		l = r.s.load(r.pos)
	} else {
		var ok bool
		select {
		case l, ok = <-r.ch:
			if !ok {
				return Batch{}, r.ctx.Err()
			}
		case <-r.ctx.Done():
			return Batch{}, r.ctx.Err()
		}
	}
	if l.panic != nil {
		r.err = fmt.Errorf("data: batch %d: panicked: %v", r.pos, l.panic)
		panic(l.panic)
	}
	if l.err != nil {
		r.err = l.err
		return Batch{}, l.err
	}
	r.pos++
	return l.b, nil
}

// Position returns the position of the batch Next returns next: the number
// of batches of the stream delivered so far, counting from 0 of the
// stream (not of this Reader). Save it to resume.
func (r *Reader) Position() int64 { return r.pos }

// Close stops the prefetching goroutine and waits for it. It is safe to
// call more than once.
func (r *Reader) Close() error {
	r.cancel()
	r.wg.Wait()
	r.closed = true
	return nil
}
