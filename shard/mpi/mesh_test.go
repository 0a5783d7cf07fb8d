//go:build mpi

package mpi_test

import (
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// grid returns a rows x cols float32 host tensor whose element (i, j) is
// base + 100i + j, and its column sums.
func grid(rows, cols int, base float32) (*tensor.Tensor, []float32) {
	d := make([]float32, rows*cols)
	sums := make([]float32, cols)
	for i := range rows {
		for j := range cols {
			v := base + float32(100*i+j)
			d[i*cols+j] = v
			sums[j] += v
		}
	}
	return tensor.FromFloat32(d, rows, cols), sums
}

// exercise runs on mesh m (one axis, named axis) iters rounds of: Put of
// a host tensor sharded by rows, Gather, a reshard to column blocks and
// one to replicas, Gather of each, and a Map whose Psum sums the rows;
// every value is checked against the host tensor. rows is a multiple of
// the mesh size; base varies the values between callers.
func exercise(m *shard.Mesh, axis string, rows, iters int, base float32) error {
	n := m.Size()
	for it := range iters {
		host, sums := grid(rows, n, base+float32(1000*(it%7))) // sums exact in float32
		want := host.Float32s()
		xs := shard.Put(host, shard.NewSharding(m, shard.P(axis)))
		// In the same order on every process (not a map's).
		for _, s := range []shard.Sharding{
			shard.NewSharding(m, shard.P(axis)),
			shard.NewSharding(m, shard.P(nil, axis)),
			shard.Replicated(m),
		} {
			got := shard.Gather(shard.Reshard(xs, s)).Float32s()
			if !assert.ObjectsAreEqual(want, got) {
				return fmt.Errorf("mesh %v, round %d, %v: gathered %v, want %v", m, it, s, got, want)
			}
		}
		psum := shard.Map(m, shard.P(axis), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.Psum(tensor.Sum(b, 0), axis)
		})
		if got := shard.Gather(psum(xs)).Float32s(); !assert.ObjectsAreEqual(sums, got) {
			return fmt.Errorf("mesh %v, round %d, psum: %v, want %v", m, it, got, sums)
		}
	}
	return nil
}

// TestMeshesConcurrently drives two meshes that span every process (each
// holds half of every process's devices) from two goroutines at once:
// each mesh's Gathers and reshards go through a communicator of its own,
// so they do not cross (on one shared communicator, the two goroutines'
// exchanges of different sizes would meet each other).
func TestMeshesConcurrently(t *testing.T) {
	local := len(shard.LocalDevices())
	if local < 2 {
		t.Skip("needs two devices per process")
	}
	var a, b []*shard.Device
	for _, d := range shard.Devices() {
		if d.ID()%local < local/2 {
			a = append(a, d)
		} else {
			b = append(b, d)
		}
	}
	ma := shard.NewMeshOn(a, []int{len(a)}, []string{"teacher"})
	mb := shard.NewMeshOn(b, []int{len(b)}, []string{"student"})
	var wg sync.WaitGroup
	errs := make([]error, 2)
	wg.Add(2)
	go func() { defer wg.Done(); errs[0] = exercise(ma, "teacher", 2*len(a), 100, 0) }()
	go func() { defer wg.Done(); errs[1] = exercise(mb, "student", 5*len(b), 100, 0.5) }()
	wg.Wait()
	require.NoError(t, errs[0])
	require.NoError(t, errs[1])
}

// TestLocalMeshes: a mesh whose devices all live in this process is
// computed on without any other process (JAX: a fully addressable array).
// Every process builds a mesh of its own devices and runs a different
// number of rounds on different values; if any operation talked to
// another process, the processes would wait for each other.
func TestLocalMeshes(t *testing.T) {
	rank := shard.ProcessIndex()
	devs := shard.LocalDevices()
	m := shard.NewMeshOn(devs, []int{len(devs)}, []string{"mine"})
	require.NoError(t, exercise(m, "mine", 3*len(devs), 1+2*rank, float32(rank)))
	// Propagated ops and the read of a partial sum: x @ w with x sharded
	// by columns leaves a pending sum over "mine".
	x, _ := grid(2, 2*len(devs), float32(rank))
	w := tensor.Ones(tensor.Float32, 2*len(devs), 3)
	xs := shard.Put(x, shard.NewSharding(m, shard.P(nil, "mine")))
	ws := shard.Put(w, shard.NewSharding(m, shard.P("mine")))
	assert.Equal(t, tensor.MatMul(x, w).Float32s(), shard.Gather(tensor.MatMul(xs, ws)).Float32s())
}

// recoverString runs f and returns what it panicked with, as a string
// ("" if it did not panic).
func recoverString(f func()) (msg string) {
	defer func() {
		if p := recover(); p != nil {
			msg = fmt.Sprint(p)
		}
	}()
	f()
	return ""
}

// TestMeshOfOneProcess: a mesh on the devices of process 0 only. Process
// 0 computes on it alone; the other processes hold no blocks of its
// arrays and cannot read or compute on them (a panic naming the process),
// but a reshard onto a mesh that spans every process (collective over
// the processes of both meshes) brings the values to all of them, and
// back.
func TestMeshOfOneProcess(t *testing.T) {
	if shard.ProcessCount() < 2 {
		t.Skip("needs several processes")
	}
	var devs []*shard.Device
	for _, d := range shard.Devices() {
		if d.Process() == 0 {
			devs = append(devs, d)
		}
	}
	m := shard.NewMeshOn(devs, []int{len(devs)}, []string{"p0"})
	host, _ := grid(2*len(devs), len(shard.Devices()), 7)
	xs := shard.Put(host, shard.NewSharding(m, shard.P("p0")))
	double := func() *tensor.Tensor {
		return shard.Map(m, shard.P("p0"), shard.P("p0"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.MulScalar(b, 2)
		})(xs)
	}
	if shard.ProcessIndex() == 0 {
		assert.Equal(t, host.Float32s(), shard.Gather(xs).Float32s())
		assert.Equal(t, tensor.MulScalar(host, 2).Float32s(), shard.Gather(double()).Float32s())
	} else {
		for _, b := range shard.Blocks(xs) {
			assert.Nil(t, b)
		}
		msg := recoverString(func() { shard.Gather(xs) })
		assert.True(t, strings.Contains(msg, fmt.Sprintf("process %d owns none", shard.ProcessIndex())), msg)
		msg = recoverString(func() { double() })
		assert.True(t, strings.Contains(msg, fmt.Sprintf("process %d has no device", shard.ProcessIndex())), msg)
		msg = recoverString(func() { tensor.Add(xs, xs) })
		assert.True(t, strings.Contains(msg, fmt.Sprintf("process %d has no device", shard.ProcessIndex())), msg)
	}
	all, _ := lineMesh()
	spread := shard.Reshard(xs, shard.NewSharding(all, shard.P(nil, "d")))
	assert.Equal(t, host.Float32s(), shard.Gather(spread).Float32s())
	back := shard.Reshard(spread, shard.NewSharding(m, shard.P("p0")))
	if shard.ProcessIndex() == 0 {
		assert.Equal(t, host.Float32s(), shard.Gather(back).Float32s())
	}
}

// TestDonatedPsumResults: psum results donated as soon as they are read
// (tensor.Donate) give their storage to the next psum across processes;
// every round's value must still be its own.
func TestDonatedPsumResults(t *testing.T) {
	m, n := lineMesh()
	psum := shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		return c.Psum(b, "d")
	})
	for it := range 6 {
		x, sums := grid(n, 1<<12, float32(it))
		y := psum(x)
		got := shard.Gather(y).Float32s()
		require.Equal(t, sums, got, "round %d", it)
		tensor.Donate(y)
	}
}
