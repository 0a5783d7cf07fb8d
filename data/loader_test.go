package data

import (
	"errors"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/tensor"
)

// collect runs one epoch and returns its batches, failing on an error.
func collect(t *testing.T, l *Loader, epoch int) []Batch {
	t.Helper()
	var out []Batch
	for b, err := range l.Epoch(epoch) {
		require.NoError(t, err)
		out = append(out, b)
	}
	return out
}

// flat returns the example indices of the batches in order, checking on the
// way that each batch's data is the data of its indices.
func flat(t *testing.T, d *InMemory, bs []Batch) []int {
	t.Helper()
	xs, ys := d.X.Float32s(), d.Y.Int32s()
	row := d.X.Size() / max(d.Len(), 1)
	var idx []int
	for step, b := range bs {
		require.Equal(t, step, b.Step)
		bx, by := b.X.Float32s(), b.Y.Int32s()
		require.Len(t, by, len(b.Indices))
		for r, i := range b.Indices {
			require.Equal(t, xs[i*row:(i+1)*row], bx[r*row:(r+1)*row], "batch %d row %d is example %d", step, r, i)
			require.Equal(t, ys[i], by[r])
		}
		idx = append(idx, b.Indices...)
	}
	return idx
}

func TestLoaderEverySampleOnce(t *testing.T) {
	for _, n := range []int{0, 1, 10, 64, 100, 1000} {
		for _, bs := range []int{1, 7, 32, 100, 200} {
			for _, dropLast := range []bool{false, true} {
				for _, shuffle := range []bool{false, true} {
					for _, prefetch := range []int{0, 1, 3} {
						name := fmt.Sprintf("n=%d/bs=%d/drop=%v/shuffle=%v/prefetch=%d", n, bs, dropLast, shuffle, prefetch)
						t.Run(name, func(t *testing.T) {
							d := rowsDataset(n)
							l := &Loader{Dataset: d, BatchSize: bs, DropLast: dropLast, Shuffle: shuffle, Key: tensor.NewKey(7), Prefetch: prefetch}
							wantBatches, wantExamples := (n+bs-1)/bs, n
							if dropLast {
								wantBatches, wantExamples = n/bs, n/bs*bs
							}
							require.Equal(t, wantBatches, l.NumBatches())
							for epoch := range 2 {
								batches := collect(t, l, epoch)
								require.Len(t, batches, wantBatches)
								for i, b := range batches {
									size := bs
									if i == len(batches)-1 && !dropLast && n%bs != 0 {
										size = n % bs
									}
									assert.Equal(t, []int{size, 2, 3}, b.X.Shape(), "batch %d", i)
									assert.Equal(t, []int{size}, b.Y.Shape(), "batch %d", i)
									assert.Equal(t, epoch, b.Epoch)
								}
								idx := flat(t, d, batches)
								require.Len(t, idx, wantExamples)
								assert.True(t, slices.Equal(l.Order(epoch)[:wantExamples], idx), "batches follow Order")
								seen := slices.Clone(idx)
								slices.Sort(seen)
								assert.Len(t, slices.Compact(seen), wantExamples, "an example appears twice")
								if !dropLast {
									assert.True(t, slices.Equal(seq(n), seen), "every example once")
								}
								if !shuffle {
									assert.True(t, slices.Equal(seq(wantExamples), idx), "in index order")
								}
							}
						})
					}
				}
			}
		}
	}
}

func TestLoaderShuffleOrder(t *testing.T) {
	d := rowsDataset(500)
	l := &Loader{Dataset: d, BatchSize: 32, Shuffle: true, Key: tensor.NewKey(42)}
	same := &Loader{Dataset: d, BatchSize: 32, Shuffle: true, Key: tensor.NewKey(42)}
	other := &Loader{Dataset: d, BatchSize: 32, Shuffle: true, Key: tensor.NewKey(43)}

	e0 := flat(t, d, collect(t, l, 0))
	assert.Equal(t, e0, flat(t, d, collect(t, same, 0)), "same key, same epoch: same order")
	assert.Equal(t, e0, flat(t, d, collect(t, l, 0)), "running an epoch again repeats it")
	assert.NotEqual(t, e0, flat(t, d, collect(t, other, 0)), "another key: another order")
	e1 := flat(t, d, collect(t, l, 1))
	assert.NotEqual(t, e0, e1, "epochs differ")
	assert.NotEqual(t, seq(500), e0, "shuffled")
	// The order is Permutation(FoldIn(key, epoch)).
	assert.Equal(t, ints(tensor.Permutation(tensor.FoldIn(tensor.NewKey(42), 1), 500)), e1)

	// With DropLast the dropped examples differ between epochs, so every
	// example is seen over a few epochs.
	ld := &Loader{Dataset: d, BatchSize: 64, DropLast: true, Shuffle: true, Key: tensor.NewKey(1)}
	seen := map[int]bool{}
	for e := range 5 {
		for _, i := range flat(t, d, collect(t, ld, e)) {
			seen[i] = true
		}
	}
	assert.Len(t, seen, 500)
}

func TestLoaderPrefetchKeepsOrder(t *testing.T) {
	d := rowsDataset(1000)
	ref := &Loader{Dataset: d, BatchSize: 33, Shuffle: true, Key: tensor.NewKey(5)}
	want := flat(t, d, collect(t, ref, 3))
	for _, prefetch := range []int{1, 2, 8, 100} {
		l := *ref
		l.Prefetch = prefetch
		// A dataset with uneven delays, so the producer runs ahead at
		// times and lags at others.
		l.Dataset = &slowDataset{Dataset: d, delay: func(call int64) time.Duration { return time.Duration(call%3) * 200 * time.Microsecond }}
		assert.Equal(t, want, flat(t, d, collect(t, &l, 3)), "prefetch %d", prefetch)
	}
}

// slowDataset wraps a dataset, counting calls, tracking how many run at
// once, sleeping, and failing or panicking on request.
type slowDataset struct {
	Dataset
	delay    func(call int64) time.Duration
	calls    atomic.Int64
	inFlight atomic.Int64
	errAt    int64 // 1-based call number that fails, 0 for none
	panicAt  int64
}

func (s *slowDataset) Batch(idx []int) (Batch, error) {
	call := s.calls.Add(1)
	s.inFlight.Add(1)
	defer s.inFlight.Add(-1)
	if s.delay != nil {
		time.Sleep(s.delay(call))
	}
	if call == s.errAt {
		return Batch{}, errors.New("disk on fire")
	}
	if call == s.panicAt {
		panic("kaboom")
	}
	return s.Dataset.Batch(idx)
}

func TestLoaderEarlyBreakStopsPrefetch(t *testing.T) {
	for _, prefetch := range []int{0, 1, 4} {
		t.Run(fmt.Sprint(prefetch), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			sd := &slowDataset{Dataset: rowsDataset(1000), delay: func(int64) time.Duration { return time.Millisecond }}
			l := &Loader{Dataset: sd, BatchSize: 10, Prefetch: prefetch, Shuffle: true}
			n := 0
			for b, err := range l.Epoch(0) {
				require.NoError(t, err)
				n++
				if b.Step == 2 {
					break
				}
			}
			assert.Equal(t, 3, n)
			// When the loop is left the producer has finished: nothing is
			// being loaded and nothing more will be.
			assert.Zero(t, sd.inFlight.Load())
			calls := sd.calls.Load()
			assert.LessOrEqual(t, calls, int64(3+prefetch+1))
			time.Sleep(20 * time.Millisecond)
			assert.Equal(t, calls, sd.calls.Load())
		})
	}
}

func TestLoaderConsumerPanicStopsPrefetch(t *testing.T) {
	defer goleak.VerifyNone(t)
	sd := &slowDataset{Dataset: rowsDataset(100), delay: func(int64) time.Duration { return 100 * time.Microsecond }}
	l := &Loader{Dataset: sd, BatchSize: 10, Prefetch: 3}
	assert.PanicsWithValue(t, "consumer bug", func() {
		for range l.Epoch(0) {
			panic("consumer bug")
		}
	})
	assert.Zero(t, sd.inFlight.Load())
}

func TestLoaderDatasetError(t *testing.T) {
	for _, prefetch := range []int{0, 2} {
		t.Run(fmt.Sprint(prefetch), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			sd := &slowDataset{Dataset: rowsDataset(100), errAt: 4}
			l := &Loader{Dataset: sd, BatchSize: 10, Prefetch: prefetch}
			var good int
			var errs []error
			for b, err := range l.Epoch(5) {
				if err != nil {
					errs = append(errs, err)
					assert.Nil(t, b.X)
					continue // the epoch ends anyway
				}
				good++
			}
			assert.Equal(t, 3, good)
			require.Len(t, errs, 1)
			assert.EqualError(t, errs[0], "data: epoch 5 batch 3: disk on fire")
			assert.Equal(t, int64(4), sd.calls.Load(), "nothing is loaded after the failure")
		})
	}
}

func TestLoaderPlace(t *testing.T) {
	for _, prefetch := range []int{0, 3} {
		t.Run(fmt.Sprint(prefetch), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			d := rowsDataset(50)
			var placed atomic.Int64
			l := &Loader{Dataset: d, BatchSize: 8, Prefetch: prefetch, Shuffle: true, Key: tensor.NewKey(9),
				Place: func(b Batch) (Batch, error) {
					placed.Add(1)
					b.X = tensor.MulScalar(b.X, 2)
					return b, nil
				}}
			for b, err := range l.Epoch(0) {
				require.NoError(t, err)
				want := naiveRows(d.X, b.Indices)
				for i := range want {
					want[i] = float64(float32(want[i]) * 2)
				}
				assert.Equal(t, want, b.X.Float64s())
				assert.Equal(t, naiveRows(d.Y, b.Indices), b.Y.Float64s())
			}
			assert.Equal(t, int64(7), placed.Load())

			// An error from Place ends the epoch with the batch named.
			l.Place = func(b Batch) (Batch, error) {
				if b.Size() < 8 {
					return b, errors.New("batch does not divide over 8 devices")
				}
				return b, nil
			}
			var last error
			n := 0
			for _, err := range l.Epoch(1) {
				n++
				last = err
			}
			assert.Equal(t, 7, n)
			assert.EqualError(t, last, "data: epoch 1 batch 6: placing: batch does not divide over 8 devices")
		})
	}
}

func TestLoaderPanicsReRaised(t *testing.T) {
	for _, prefetch := range []int{0, 2} {
		t.Run(fmt.Sprint(prefetch), func(t *testing.T) {
			defer goleak.VerifyNone(t)
			sd := &slowDataset{Dataset: rowsDataset(100), panicAt: 2}
			l := &Loader{Dataset: sd, BatchSize: 10, Prefetch: prefetch}
			n := 0
			assert.PanicsWithValue(t, "kaboom", func() {
				for range l.Epoch(0) {
					n++
				}
			})
			assert.Equal(t, 1, n)

			l = &Loader{Dataset: rowsDataset(10), BatchSize: 4, Prefetch: prefetch,
				Place: func(b Batch) (Batch, error) { panic(fmt.Sprintf("shard.Put: %d rows", b.Size())) }}
			assert.PanicsWithValue(t, "shard.Put: 4 rows", func() {
				for range l.Epoch(0) {
				}
			})
		})
	}
}

func TestLoaderPanics(t *testing.T) {
	d := rowsDataset(3)
	assert.PanicsWithValue(t, "data.Loader.Epoch: no Dataset", func() { (&Loader{BatchSize: 1}).Epoch(0) })
	assert.PanicsWithValue(t, "data.Loader.Epoch: BatchSize 0 must be at least 1", func() { (&Loader{Dataset: d}).Epoch(0) })
	assert.PanicsWithValue(t, "data.Loader.NumBatches: Prefetch -1 must not be negative", func() { (&Loader{Dataset: d, BatchSize: 1, Prefetch: -1}).NumBatches() })
	assert.PanicsWithValue(t, "data.Loader.Order: BatchSize -2 must be at least 1", func() { (&Loader{Dataset: d, BatchSize: -2}).Order(0) })
	assert.PanicsWithValue(t, "data.Loader.Epoch: epoch -1 must not be negative", func() { (&Loader{Dataset: d, BatchSize: 1}).Epoch(-1) })
	assert.PanicsWithValue(t, "data.Loader.Order: epoch -3 must not be negative", func() { (&Loader{Dataset: d, BatchSize: 1, Shuffle: true}).Order(-3) })
}

func TestLoaderTextDataset(t *testing.T) {
	ids := make([]int32, 200)
	for i := range ids {
		ids[i] = int32(i)
	}
	txt := NewText(ids, 16, 4)
	l := &Loader{Dataset: txt, BatchSize: 8, Shuffle: true, Key: tensor.NewKey(2), Prefetch: 2}
	n := 0
	for b, err := range l.Epoch(0) {
		require.NoError(t, err)
		x, y := b.X.Int32s(), b.Y.Int32s()
		for r, ix := range b.Indices {
			assert.Equal(t, int32(ix*4), x[r*16])
			assert.Equal(t, int32(ix*4+16), y[r*16+15])
		}
		n += b.Size()
	}
	assert.Equal(t, txt.Len(), n)
}
