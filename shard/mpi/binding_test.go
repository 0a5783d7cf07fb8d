//go:build mpi

package mpi_test

import (
	"bytes"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard/mpi"
)

// TestBinding checks every bound MPI call against values each rank can
// compute on its own: rank r contributes numbers made from r.
func TestBinding(t *testing.T) {
	w := mpi.World()
	require.NotNil(t, w)
	r, n := w.Rank(), w.Size()
	assert.Equal(t, mpi.Rank(), r)
	assert.Equal(t, mpi.Size(), n)
	sumRanks := float32(n * (n - 1) / 2)

	t.Run("Allreduce", func(t *testing.T) {
		x := []float32{float32(r), 1, float32(-r)}
		got := make([]float32, 3)
		mpi.Allreduce(w, x, got, mpi.Sum)
		assert.Equal(t, []float32{sumRanks, float32(n), -sumRanks}, got)
		mpi.Allreduce(w, x, got, mpi.Max)
		assert.Equal(t, []float32{float32(n - 1), 1, 0}, got)
		mpi.Allreduce(w, x, got, mpi.Min)
		assert.Equal(t, []float32{0, 1, float32(1 - n)}, got)
		// In place, int32.
		v := []int32{int32(r + 1), 2}
		mpi.Allreduce(w, v, v, mpi.Sum)
		assert.Equal(t, []int32{int32(n * (n + 1) / 2), int32(2 * n)}, v)
	})
	t.Run("Allreduce in place, any stack", func(t *testing.T) {
		// In place, the send buffer is MPI_IN_PLACE, which is not a Go
		// pointer: a stack copied while it sat in a Go variable was a
		// fatal "invalid pointer found on stack". Each call runs at
		// another depth of a fresh goroutine's stack, so some grow it.
		for depth := range 300 {
			done := make(chan []int32)
			go func() {
				var deep func(d int) []int32
				deep = func(d int) []int32 {
					var pad [16]int64 // some stack per frame
					if d > 0 {
						out := deep(d - 1)
						out[0] += int32(pad[d%16])
						return out
					}
					v := []int32{int32(r + 1)}
					mpi.Allreduce(w, v, v, mpi.Sum)
					return v
				}
				done <- deep(depth)
			}()
			require.Equal(t, []int32{int32(n * (n + 1) / 2)}, <-done, "depth %d", depth)
		}
	})
	t.Run("Allgather", func(t *testing.T) {
		got := make([]int32, 2*n)
		mpi.Allgather(w, []int32{int32(r), int32(10 * r)}, got)
		for k := 0; k < n; k++ {
			assert.Equal(t, []int32{int32(k), int32(10 * k)}, got[2*k:2*k+2])
		}
	})
	t.Run("Allgatherv", func(t *testing.T) {
		// Rank k sends k+1 bytes of value k.
		counts := make([]int, n)
		var want []byte
		for k := range counts {
			counts[k] = k + 1
			for range k + 1 {
				want = append(want, byte(k))
			}
		}
		send := make([]byte, r+1)
		for i := range send {
			send[i] = byte(r)
		}
		got := make([]byte, len(want))
		mpi.Allgatherv(w, send, got, counts)
		assert.Equal(t, want, got)
	})
	t.Run("ReduceScatter", func(t *testing.T) {
		// Block j of rank r's send holds r+j; rank r receives sum_k (k+r).
		send := make([]float32, 2*n)
		for j := 0; j < n; j++ {
			send[2*j], send[2*j+1] = float32(r+j), 1
		}
		got := make([]float32, 2)
		mpi.ReduceScatter(w, send, got, mpi.Sum)
		assert.Equal(t, []float32{sumRanks + float32(n*r), float32(n)}, got)
	})
	t.Run("Alltoall", func(t *testing.T) {
		// Rank r sends 100r+j to rank j, which receives 100k+r from k.
		send := make([]int32, n)
		for j := range send {
			send[j] = int32(100*r + j)
		}
		got := make([]int32, n)
		mpi.Alltoall(w, send, got)
		for k := range got {
			assert.Equal(t, int32(100*k+r), got[k])
		}
	})
	t.Run("Alltoallv", func(t *testing.T) {
		// Rank r sends j+1 copies of 100r+j to rank j.
		sc, rc := make([]int, n), make([]int, n)
		var send, want []int32
		for j := 0; j < n; j++ {
			sc[j] = j + 1
			rc[j] = r + 1
			for range j + 1 {
				send = append(send, int32(100*r+j))
			}
			for range r + 1 {
				want = append(want, int32(100*j+r))
			}
		}
		got := make([]int32, len(want))
		mpi.Alltoallv(w, send, sc, got, rc)
		assert.Equal(t, want, got)
	})
	t.Run("Sendrecv ring", func(t *testing.T) {
		got := make([]float64, 1)
		mpi.Sendrecv(w, []float64{float64(r) + 0.5}, (r+1)%n, got, (r+n-1)%n, 7)
		assert.Equal(t, float64((r+n-1)%n)+0.5, got[0])
	})
	t.Run("Bcast", func(t *testing.T) {
		buf := []int32{int32(r), int32(r)}
		mpi.Bcast(w, buf, n-1)
		assert.Equal(t, []int32{int32(n - 1), int32(n - 1)}, buf)
	})
	t.Run("Split Dup Barrier", func(t *testing.T) {
		half := w.Split(r%2, r)
		require.NotNil(t, half)
		assert.Equal(t, r/2, half.Rank())
		assert.Equal(t, (n+1-r%2)/2, half.Size())
		v := []int32{int32(r)}
		mpi.Allreduce(half, v, v, mpi.Sum)
		want := 0
		for k := r % 2; k < n; k += 2 {
			want += k
		}
		assert.Equal(t, int32(want), v[0])
		half.Free()
		// A process left out gets nil.
		solo := w.Split(map[bool]int{true: 0, false: -1}[r == 0], 0)
		assert.Equal(t, r == 0, solo != nil)
		if solo != nil {
			assert.Equal(t, 1, solo.Size())
			solo.Free()
		}
		d := w.Dup()
		assert.Equal(t, r, d.Rank())
		assert.Equal(t, n, d.Size())
		d.Barrier()
		d.Free()
		w.Barrier()
	})
}

func TestOutputOnlyOnProcess0(t *testing.T) {
	var b bytes.Buffer
	w := mpi.Output(&b)
	if mpi.Rank() == 0 {
		assert.Same(t, &b, w)
	} else {
		assert.Equal(t, io.Discard, w)
	}
}

func TestBindingPanicsOnBadLengths(t *testing.T) {
	w := mpi.World()
	n := w.Size()
	assert.PanicsWithValue(t, "mpi.Allreduce: buffer of 2 elements, want 3 (communicator of "+itoa(n)+" processes)", func() {
		mpi.Allreduce(w, []float32{1, 2, 3}, make([]float32, 2), mpi.Sum)
	})
	assert.PanicsWithValue(t, "mpi.Allgather: buffer of 1 elements, want "+itoa(2*n)+" (communicator of "+itoa(n)+" processes)", func() {
		mpi.Allgather(w, []int32{1, 2}, make([]int32, 1))
	})
}
