package shard

import (
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gonox/gonox/tensor"
)

// DevicesEnv is the environment variable that sets the number of simulated
// devices in the local pool (default 8, like XLA's host device count).
const DevicesEnv = "GONOX_DEVICES"

const defaultDevices = 8

// Device is a simulated CPU device in this process. Devices compute with
// one goroutine each inside Map and hold the blocks of sharded tensors.
type Device struct {
	id   int
	proc int // owning process (see Install)
	mem  atomic.Int64
	// watch holds the observers of propagated ops on this device (Record,
	// Strict, Explain); see prop_watch.go.
	watch atomic.Pointer[[]*watcher]
}

// ID returns the device's index in the pool.
func (d *Device) ID() int { return d.id }

// MemoryBytes returns the bytes of sharded-tensor blocks the device holds
// that are still reachable. Blocks are counted when created and released
// when the garbage collector frees them, so the figure trails a dropped
// tensor until the next collection.
func (d *Device) MemoryBytes() int64 { return d.mem.Load() }

// String returns "CpuDevice(id=N)", as JAX prints devices.
func (d *Device) String() string { return fmt.Sprintf("CpuDevice(id=%d)", d.id) }

// The device pool is the only package-level state in gonox.
var pool struct {
	once sync.Once
	devs []*Device
}

// Devices returns the device pool, created on first use with the number
// of devices in $GONOX_DEVICES (default 8). In a job of several processes
// (see Install) it is the global pool, process-major. It panics if any
// variable of EnvSettings has a value it refuses.
func Devices() []*Device {
	pool.once.Do(func() {
		if _, err := EnvSettings(); err != nil {
			panic(err.Error())
		}
		n, _ := DevicesFromEnv()
		pool.devs = make([]*Device, n)
		for i := range pool.devs {
			pool.devs[i] = &Device{id: i}
		}
	})
	return append([]*Device(nil), pool.devs...)
}

// account charges a block to a device until the block's header is
// garbage collected. The header, not the storage, carries the charge:
// storage that a donated block gave back (tensor.Donate) serves another
// block, which is charged in turn, and reading the storage to find it
// would pin it (RawFloat32) and keep it from the allocator cache.
//
// The cleanup's argument packs the device's index in the pool with the
// bytes (a block has fewer than 2⁴⁸), and its function is not a closure:
// each charge then costs the runtime's two allocations and no third.
func account(d *Device, b *tensor.Tensor, bytes int) {
	if bytes == 0 {
		return
	}
	d.mem.Add(int64(bytes))
	runtime.AddCleanup(b, uncharge, uint64(d.id)<<chargeShift|uint64(bytes))
}

// accountAll charges bytes to each device of devs until the collector
// frees b's allocation: the headers of a Map output's blocks, which
// tensor.WithLocals makes in one (each block is charged until none of them
// is reachable).
func accountAll(devs []*Device, b *tensor.Tensor, bytes int) {
	if bytes == 0 {
		return
	}
	for _, d := range devs {
		d.mem.Add(int64(bytes))
	}
	runtime.AddCleanup(b, unchargeAll, charges{devs: devs, bytes: int64(bytes)})
}

// charges are accountAll's charges: bytes on every device of devs.
type charges struct {
	devs  []*Device
	bytes int64
}

// unchargeAll releases the charges accountAll made.
func unchargeAll(c charges) {
	for _, d := range c.devs {
		d.mem.Add(-c.bytes)
	}
}

// chargeShift places the device's index above a charge's bytes.
const chargeShift = 48

// uncharge releases a charge that account packed.
func uncharge(c uint64) {
	pool.devs[c>>chargeShift].mem.Add(-int64(c & (1<<chargeShift - 1)))
}
