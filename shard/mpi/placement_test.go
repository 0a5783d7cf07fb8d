//go:build mpi

package mpi_test

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

func itoa(n int) string { return strconv.Itoa(n) }

// TestDevicePool: the pool is global and process-major.
func TestDevicePool(t *testing.T) {
	devs := shard.Devices()
	local := shard.LocalDevices()
	n := mpi.Size()
	require.Len(t, devs, n*len(local))
	assert.Equal(t, n, shard.ProcessCount())
	assert.Equal(t, mpi.Rank(), shard.ProcessIndex())
	for i, d := range devs {
		assert.Equal(t, i, d.ID())
		assert.Equal(t, i/len(local), d.Process())
		assert.Equal(t, d.Process() == mpi.Rank(), d.IsLocal())
	}
	for i, d := range local {
		assert.Equal(t, mpi.Rank()*len(local)+i, d.ID())
	}
}

func guideMesh(t *testing.T) *shard.Mesh {
	if len(shard.Devices()) != 8 {
		t.Skipf("needs 8 devices, the pool has %d", len(shard.Devices()))
	}
	return shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
}

// TestPlacementAcrossProcesses: Put materialises only this process's
// blocks; Gather, Reshard and FilterShard give the values of one process.
func TestPlacementAcrossProcesses(t *testing.T) {
	m := guideMesh(t)
	x := tensor.Reshape(tensor.Arange(64), 8, 8)
	specs := []shard.Spec{shard.P(), shard.P("dp"), shard.P("dp", "tp"), shard.P("tp", "dp"), shard.P(nil, []string{"dp", "tp"}), shard.P([]string{"tp", "dp"})}
	for _, from := range specs {
		y := shard.Put(x, shard.NewSharding(m, from))
		blocks := shard.Blocks(y)
		for d, b := range blocks {
			dev := m.Devices()[d]
			if dev.IsLocal() {
				require.NotNil(t, b, "block of local %v", dev)
				assert.Positive(t, dev.MemoryBytes())
			} else {
				assert.Nil(t, b, "block of %v of process %d", dev, dev.Process())
			}
		}
		assert.Equal(t, x.Ints(), shard.Gather(y).Ints(), "gather %v", from)
		for _, to := range specs {
			z := shard.Reshard(y, shard.NewSharding(m, to))
			assert.Equal(t, x.Ints(), shard.Gather(z).Ints(), "%v -> %v", from, to)
		}
	}
	// Reshards move raw bytes: every element size (8, 4, 2 and 1 bytes)
	// arrives whole and in place.
	for _, dt := range []tensor.DType{tensor.Float64, tensor.Int64, tensor.Int32, tensor.BFloat16, tensor.Uint8, tensor.Bool} {
		xd := tensor.AsType(x, dt)
		for _, from := range specs[1:4] {
			y := shard.Put(xd, shard.NewSharding(m, from))
			for _, to := range specs {
				z := shard.Gather(shard.Reshard(y, shard.NewSharding(m, to)))
				assert.Equal(t, xd.Float64s(), z.Float64s(), "%v: %v -> %v", dt, from, to)
			}
		}
	}
	y := shard.Put(tensor.Zeros(tensor.Float32, 8, 8), shard.NewSharding(m, shard.P("dp", "tp")))
	assert.Equal(t, "float32[8@dp,8@tp]", y.Type())
	assert.Equal(t, `┌──────────┬──────────┐
│  CPU 0   │  CPU 1   │
├──────────┼──────────┤
│  CPU 2   │  CPU 3   │
├──────────┼──────────┤
│  CPU 4   │  CPU 5   │
├──────────┼──────────┤
│  CPU 6   │  CPU 7   │
└──────────┴──────────┘
`, shard.Visualize(y))
}

type model struct {
	W    *tensor.Tensor
	B    *tensor.Tensor
	Name string
}

func TestFilterShardAcrossProcesses(t *testing.T) {
	m := guideMesh(t)
	in := model{W: tensor.Reshape(tensor.Arange(32), 4, 8), B: tensor.Arange(8), Name: "mlp"}
	out := shard.FilterShard(in, m, shard.Specs{"W": shard.P("dp", "tp"), "B": shard.P("tp")})
	assert.Equal(t, "int32[4@dp,8@tp]", out.W.Type())
	assert.Equal(t, "int32[8@tp]", out.B.Type())
	assert.Equal(t, "mlp", out.Name)
	assert.Equal(t, in.W.Ints(), shard.Gather(out.W).Ints())
	assert.Equal(t, in.B.Ints(), shard.Gather(out.B).Ints())
}

// TestFromBlocksAcrossProcesses: each process passes its own blocks.
func TestFromBlocksAcrossProcesses(t *testing.T) {
	m := guideMesh(t)
	s := shard.NewSharding(m, shard.P("dp", "tp"))
	blocks := make([]*tensor.Tensor, 8)
	for d, dev := range m.Devices() {
		if dev.IsLocal() {
			blocks[d] = tensor.Full(tensor.Float32, float64(d), 1, 1)
		}
	}
	x, err := shard.FromBlocks(s, []int{4, 2}, blocks)
	require.NoError(t, err)
	assert.Equal(t, []float32{0, 1, 2, 3, 4, 5, 6, 7}, shard.Gather(x).Float32s())
	if mpi.Size() > 1 {
		all := make([]*tensor.Tensor, 8)
		for d := range all {
			all[d] = tensor.Zeros(tensor.Float32, 1, 1)
		}
		_, err := shard.FromBlocks(s, []int{4, 2}, all)
		assert.ErrorContains(t, err, "given for device")
	}
}
