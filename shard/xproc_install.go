package shard

// This file holds the multi-process device pool: Install, the process
// view of devices (Process, IsLocal, LocalDevices, ProcessIndex,
// ProcessCount), and the helpers every cross-process exchange uses (the
// watchdog, checkSame, allgatherBytes).

import (
	"encoding/binary"
	"fmt"
	"os"
	"slices"
	"time"
)

// DebugEnv is the environment variable that turns on cross-process checks
// (GONOX_DEBUG=1; 0 or unset is off, anything else an error).
const DebugEnv = "GONOX_DEBUG"

// TimeoutEnv is the environment variable with the longest time a process
// waits in one cross-process exchange before it aborts the job (a Go
// duration such as "90s", at least MinTimeout; "0" waits forever). The
// default is 10 minutes.
const TimeoutEnv = "GONOX_TIMEOUT"

// dist is the multi-process part of the device pool (nil transport: one
// process). It is set once, by Install, before the pool exists.
var dist struct {
	t     Transport
	aux   Group // all processes, for AllGatherProcesses
	world Group // the transport's World, for reshards between meshes
	// worldStream numbers the reshards through world (see agree).
	worldStream *stream
	rank        int
	debug       bool
	timeout     time.Duration
}

// Install makes the device pool global over the processes of t: each
// process owns localDevices devices, and device IDs count processes first
// (process r owns IDs r·localDevices ... (r+1)·localDevices-1). It must be
// called by every process, with the same localDevices, before the device
// pool is first used (Devices, NewMesh); package shard/mpi's Init calls
// it. A transport of one process leaves the pool as it is.
//
// From then on the program is SPMD (as under jax.distributed):
//
//   - NewMesh, NewMeshOn and ParseMesh are collective over all processes
//     whenever the mesh has devices of more than one process: they set up
//     the mesh's communicators (every process creates such meshes in the
//     same order, including processes that own none of their devices).
//   - Map and propagated ops on a mesh that spans processes, and Gather of
//     an array on it that is not replicated, are collective over the
//     processes that own the mesh's devices.
//   - A mesh whose devices all live in one process (JAX: its arrays are
//     fully addressable there) is computed on by that process alone,
//     without talking to any other; Gather of its arrays is local.
//   - A process that owns no device of a mesh holds no blocks of its
//     arrays (Put gives it a tensor without local blocks) and cannot read
//     or compute on them: Map, propagated ops and Gather panic naming the
//     process. Reshard such an array onto a mesh with a device of this
//     process to read it there.
//   - Put or Reshard of a placed array is collective over the processes
//     owning devices of its source or target mesh whenever those are more
//     than one (on the target mesh's communicator if its processes are
//     all of them, else on the source mesh's, else on one of all the
//     processes of the job, which must then all call it).
//
// Each mesh has communicators of its own, so operations on different
// meshes (a teacher and a student, say) may run concurrently from
// different goroutines; the operations on one mesh form one stream, issued
// in the same order on every process. Reshards that fall back to the
// job-wide communicator must not run concurrently with each other.
func Install(t Transport, localDevices int) error {
	if localDevices <= 0 {
		return fmt.Errorf("shard.Install: %d local devices, want at least 1", localDevices)
	}
	installed := false
	pool.once.Do(func() {
		installed = true
		n := localDevices
		if t.Size() > 1 {
			dist.t = t
			dist.rank = t.Rank()
			n = localDevices * t.Size()
		}
		pool.devs = make([]*Device, n)
		for i := range pool.devs {
			pool.devs[i] = &Device{id: i, proc: i / localDevices}
			if dist.t == nil {
				pool.devs[i].proc = 0
			}
		}
	})
	if !installed {
		return fmt.Errorf("shard.Install: the device pool is already in use; install the transport first (call mpi.Init at the start of main)")
	}
	if dist.t != nil {
		all := make([]int, t.Size())
		for i := range all {
			all[i] = i
		}
		dist.aux = newGroup(all)
		dist.world = wrapGroup(t.World())
		dist.worldStream = newStream("the job's processes")
	}
	var err error
	if dist.debug, err = parseDebug(os.Getenv(DebugEnv)); err != nil {
		return fmt.Errorf("shard.Install: %w", err)
	}
	if dist.timeout, err = parseTimeout(os.Getenv(TimeoutEnv)); err != nil {
		return fmt.Errorf("shard.Install: %w", err)
	}
	return nil
}

// Process returns the rank of the process that owns the device (0 in a
// one-process job).
func (d *Device) Process() int { return d.proc }

// IsLocal reports whether the device belongs to this process.
func (d *Device) IsLocal() bool { return dist.t == nil || d.proc == dist.rank }

// LocalDevices returns the devices of the pool that belong to this
// process.
func LocalDevices() []*Device {
	var out []*Device
	for _, d := range Devices() {
		if d.IsLocal() {
			out = append(out, d)
		}
	}
	return out
}

// ProcessIndex returns this process's rank in the job (0 with one
// process), as jax.process_index.
func ProcessIndex() int { return dist.rank }

// ProcessCount returns the number of processes in the job.
func ProcessCount() int {
	if dist.t == nil {
		return 1
	}
	return dist.t.Size()
}

// AllGatherProcesses gathers data from every process of the job, in rank
// order (with one process: just data). Every process must call it, in the
// same order; it uses a communicator of its own, so it may run on another
// goroutine than Map and Gather (package checkpoint commits saves with it,
// possibly in the background).
func AllGatherProcesses(data []byte) [][]byte {
	if dist.t == nil {
		return [][]byte{data}
	}
	stop := watchdog("shard.AllGatherProcesses", nil)
	defer stop()
	return allgatherBytes(dist.aux, data)
}

// watchdog aborts the job if the exchange described by what, with the
// processes procs (nil: every process), is not done within the timeout.
// The message names the other processes: one of them never issued the
// exchange, failed, or cannot be reached (a link down).
func watchdog(what string, procs []int) func() {
	if dist.timeout <= 0 {
		return func() {}
	}
	t := time.AfterFunc(dist.timeout, func() {
		var others []int
		for p := range dist.t.Size() {
			if p != dist.rank && (procs == nil || slices.Contains(procs, p)) {
				others = append(others, p)
			}
		}
		dist.t.Abort(fmt.Sprintf("gonox: process %d waited more than %v in %s for processes %v; one of them never issued it, failed, or cannot be reached (see %s)", dist.rank, dist.timeout, what, others, TimeoutEnv))
	})
	return func() { t.Stop() }
}

// checkSame panics unless every process of g (the processes procs, or
// all if nil) passes the same string; format gets the other process's
// rank and both strings.
func checkSame(g Group, procs []int, s, format string) {
	all := allgatherBytes(g, []byte(s))
	for r, b := range all {
		if string(b) != s {
			p := r
			if procs != nil {
				p = procs[r]
			}
			panic(fmt.Sprintf(format, p, s, string(b)))
		}
	}
}

// allgatherBytes gathers a variable-length byte string from every rank.
func allgatherBytes(g Group, send []byte) [][]byte {
	n := g.Size()
	lens := make([]byte, 8*n)
	var mine [8]byte
	binary.LittleEndian.PutUint64(mine[:], uint64(len(send)))
	counts := make([]int, n)
	for i := range counts {
		counts[i] = 8
	}
	g.Allgatherv(mine[:], lens, counts)
	total := 0
	for i := range counts {
		counts[i] = int(binary.LittleEndian.Uint64(lens[8*i:]))
		total += counts[i]
	}
	recv := make([]byte, total)
	g.Allgatherv(send, recv, counts)
	out := make([][]byte, n)
	off := 0
	for i, c := range counts {
		out[i] = recv[off : off+c]
		off += c
	}
	return out
}
