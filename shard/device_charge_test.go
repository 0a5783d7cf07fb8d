package shard_test

import (
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// A Map output's blocks are charged to their devices together: until the
// collector frees all of their headers (made in one allocation), so a
// block handed out keeps every device's charge after the array is
// dropped, and the charges end with it.
func TestDeviceMemoryMapOutput(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	devs := shard.Devices()
	base := settleMemory(t)
	double := shard.Map(m, shard.P("dp"), shard.P("dp"), func(_ *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return tensor.MulScalar(b, 2) })
	y := double(testData(tensor.Float32, 64, 32)) // 2 KiB a device
	want := slices.Clone(base)
	for i := range m.Size() {
		want[i] += 2048
	}
	assert.Equal(t, want, memory(devs), "after Map")
	b := shard.Blocks(y)[3]
	runtime.KeepAlive(y)
	y = nil
	for range 3 {
		runtime.GC()
		time.Sleep(5 * time.Millisecond)
	}
	assert.Equal(t, want, memory(devs), "a block of the output is live")
	assert.Equal(t, float32(2*(16*32+0.5)), b.Float32s()[0], "device 3 holds rows 16-31")
	runtime.KeepAlive(b)
	b = nil
	waitMemory(t, devs, base)
}
