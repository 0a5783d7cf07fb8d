package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// prefetchLayers is a stack of weights FSDP splits along their rows.
type prefetchLayers struct{ W []*tensor.Tensor }

// TestPrefetchFeedsTheGathers: a stack of layers whose weights are split
// over every device (FSDP), each layer prefetching the next one's weight
// (and, in the backward pass, the previous one's: PrefetchBackward),
// gives the loss and gradients of the same loop without prefetching, bit
// for bit, and of the host within float32 rounding; the bytes recorded are
// the same. Between processes (go test -c -tags mpi, mpirun -np 2 or 4
// shard.test -test.run Prefetch) the matmuls take the prefetched weights
// in both passes; in one process
// Prefetch does nothing. Prefetched weights nobody takes are dropped.
func TestPrefetchFeedsTheGathers(t *testing.T) {
	n := len(shard.Devices())
	mesh := shard.NewMesh([]int{n}, []string{"dp"})
	const layers, width = 4, 16
	keys := tensor.NewKey(7).Split(layers + 1)
	host := prefetchLayers{}
	for i := range layers {
		host.W = append(host.W, tensor.MulScalar(tensor.Normal(keys[i], width, width), 0.3))
	}
	x := tensor.Normal(keys[layers], 2*n, width)
	loss := func(prefetch bool) func(prefetchLayers) *tensor.Tensor {
		return func(p prefetchLayers) *tensor.Tensor {
			h := x
			if px, ok := shard.ShardingOf(p.W[0]); ok {
				h = shard.Put(x, shard.NewSharding(px.Mesh(), shard.P("dp", nil)))
			}
			for i, w := range p.W {
				if prefetch && i+1 < len(p.W) {
					shard.Prefetch(p.W[i+1])
				}
				if prefetch && i > 0 {
					h = shard.PrefetchBackward(h, p.W[i-1])
				}
				h = tensor.Tanh(tensor.MatMul(h, w))
			}
			return tensor.Mean(tensor.Mul(h, h))
		}
	}
	wantL, wantG := autodiff.ValueAndGrad(loss(false))(host)

	placed := prefetchLayers{}
	for _, w := range host.W {
		placed.W = append(placed.W, shard.Put(w, shard.NewSharding(mesh, shard.P("dp", nil))))
	}
	run := func(prefetch bool) (float64, [][]float32, *shard.Comm) {
		c := new(shard.Comm)
		stop := shard.Record(mesh, c)
		l, g := autodiff.ValueAndGrad(loss(prefetch))(placed)
		stop()
		var gs [][]float32
		for _, w := range g.W {
			gs = append(gs, shard.Gather(w).Float32s())
		}
		return l.Item(), gs, c
	}
	plainL, plainG, plainC := run(false)
	before := shard.PrefetchesTaken(mesh)
	gotL, gotG, gotC := run(true)
	taken := shard.PrefetchesTaken(mesh) - before

	assert.Equal(t, plainL, gotL)
	assert.Equal(t, plainG, gotG)
	assert.InDelta(t, wantL.Item(), gotL, 1e-6)
	for i := range gotG {
		assert.InDeltaSlice(t, wantG.W[i].Float32s(), gotG[i], 1e-6, "layer %d", i)
	}
	dev := mesh.Devices()[0]
	for _, k := range plainC.Kinds() {
		assert.Equal(t, plainC.Bytes(dev, k), gotC.Bytes(dev, k), "bytes of %s", k)
	}
	if shard.ProcessCount() > 1 {
		// Forward: every layer's weight but the first. Backward: every
		// layer's but the last (gathered before any marker ran) and the
		// first (x is a constant: no input gradient, no gather; its
		// prefetch is dropped).
		assert.Equal(t, (layers-1)+(layers-2), taken, "weights from prefetches, forward and backward")
	} else {
		assert.Zero(t, taken, "in one process there is nothing to prefetch")
	}

	// Prefetches nobody takes are dropped two calls later; gathers go on.
	for range 3 {
		shard.Prefetch(placed)
	}
	require.Equal(t, host.W[1].Float32s(), shard.Gather(placed.W[1]).Float32s())
	l, _, _ := run(false)
	assert.Equal(t, plainL, l)
}
