//go:build mpi

package mpi

/*
#cgo pkg-config: mpi
#include <mpi.h>

static int gonox_split_shared(MPI_Comm c, int key, MPI_Comm *out) {
	return MPI_Comm_split_type(c, MPI_COMM_TYPE_SHARED, key, MPI_INFO_NULL, out);
}
static int gonox_errors_return(MPI_Comm c) {
	return MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
}
// gonox_share allocates a shared window of n bytes per process and locks
// it for passive access by every process; returns MPI's code.
static int gonox_share(MPI_Aint n, MPI_Comm c, void **base, MPI_Win *w) {
	MPI_Info info;
	MPI_Info_create(&info);
	MPI_Info_set(info, "alloc_shared_noncontig", "true");
	int rc = MPI_Win_allocate_shared(n, 1, info, c, base, w);
	MPI_Info_free(&info);
	if (rc != MPI_SUCCESS) return rc;
	MPI_Win_set_errhandler(*w, MPI_ERRORS_RETURN);
	rc = MPI_Win_lock_all(MPI_MODE_NOCHECK, *w);
	if (rc != MPI_SUCCESS) MPI_Win_free(w); // nothing left allocated on failure
	return rc;
}
static int gonox_segment(MPI_Win w, int rank, MPI_Aint *size, void **base) {
	int unit;
	return MPI_Win_shared_query(w, rank, size, &unit, base);
}
static int gonox_unshare(MPI_Win *w) {
	int rc = MPI_Win_unlock_all(*w);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Win_free(w);
}
// gonox_fence: memory barrier, process barrier, memory barrier, the
// synchronisation of a shared window under passive-target access in MPI's
// unified memory model (the pattern of MPI 3.1's examples in section 11.7).
static int gonox_fence(MPI_Win w, MPI_Comm c) {
	int rc = MPI_Win_sync(w);
	if (rc != MPI_SUCCESS) return rc;
	rc = MPI_Barrier(c);
	if (rc != MPI_SUCCESS) return rc;
	return MPI_Win_sync(w);
}
static int gonox_min_int(int *v, MPI_Comm c) {
	return MPI_Allreduce(MPI_IN_PLACE, v, 1, MPI_INT, MPI_MIN, c);
}
*/
import "C"

import (
	"fmt"
	"os"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/gonox/gonox/shard"
)

// sharedMemoryOn reads SharedMemoryEnv: unset, "" or "1" is on, "0" off
// (Init refused anything else).
func sharedMemoryOn() bool { return os.Getenv(SharedMemoryEnv) != "0" }

// windows lists the shared groups of the process in the order they were
// made (the same order on every process), for Finalize to free their
// windows in an order that cannot deadlock.
var windows struct {
	mu     sync.Mutex
	groups []*sharedGroup
}

// sharedGroup is a group whose processes share one node: a
// shard.SharedMemoryGroup over a window on node, a communicator of the
// same processes ranked alike.
type sharedGroup struct {
	group
	node *Comm
	win  C.MPI_Win
	live bool  // win is allocated
	held int64 // bytes win takes in the backing file system (as counted by Share)
}

// sharedOf returns c as a shared group if every process of c is on one
// node and has shared memory on, else nil. Collective over c: the
// processes agree, so a setting that differs between them turns shared
// memory off for all.
func sharedOf(c *Comm) *sharedGroup {
	node := &Comm{}
	call(func() {
		check("Comm_split_type", C.gonox_split_shared(c.c, C.int(c.rank), &node.c))
		node.fill()
		check("Comm_set_errhandler", C.gonox_errors_return(node.c))
	})
	ok := []int32{0}
	if sharedMemoryOn() && node.size == c.size && node.rank == c.rank {
		ok[0] = 1
	}
	Allreduce(c, ok, ok, Min)
	if ok[0] == 0 {
		node.Free()
		return nil
	}
	g := &sharedGroup{group: group{c}, node: node}
	windows.mu.Lock()
	windows.groups = append(windows.groups, g)
	windows.mu.Unlock()
	return g
}

// hostsOf returns, for every process of w, the lowest rank of w on its
// node (MPI_Comm_split_type with MPI_COMM_TYPE_SHARED). Collective over w.
func hostsOf(w *Comm) []int {
	node := &Comm{}
	call(func() {
		check("Comm_split_type", C.gonox_split_shared(w.c, C.int(w.rank), &node.c))
		node.fill()
	})
	first := []int32{int32(w.Rank())}
	Allreduce(node, first, first, Min)
	node.Free()
	all := make([]int32, w.Size())
	all[w.Rank()] = first[0]
	Allreduce(w, all, all, Sum)
	hosts := make([]int, len(all))
	for i, h := range all {
		hosts[i] = int(h)
	}
	return hosts
}

// Share implements shard.SharedMemoryGroup: it frees the group's window
// and allocates one of n bytes per process (MPI_Win_allocate_shared), and
// returns every process's segment. If the allocation fails on any
// process, all return nil.
func (g *sharedGroup) Share(n int) [][]byte {
	var seg [][]byte
	// Open MPI backs a window with one file in a memory file system that
	// holds every process's segment; when that file system is too small
	// it warns, and MPI_Win_allocate_shared does not return. So the
	// processes check the room first, and agree.
	need := int64(g.node.size) * int64(n+64+4096)
	room := []int32{1}
	if dir, free, ok := backingRoom(); ok && free+g.held < need { // the window replaced frees its own
		room[0] = 0
		if g.node.rank == 0 {
			warnNoRoom.Do(func() {
				fmt.Fprintf(os.Stderr, "gonox: process %d: %s has %d MB free, a shared-memory window of %d processes needs %d MB: collectives between processes of this host go through MPI's own (slower; %s=0 silences this)\n",
					Rank(), dir, free>>20, g.node.size, (need+1<<20-1)>>20, SharedMemoryEnv)
			})
		}
	}
	Allreduce(g.node, room, room, Min)
	g.unshare()
	if room[0] == 0 {
		return nil
	}
	call(func() {
		// 64 bytes more than asked, to start each segment 64-byte aligned:
		// Open MPI's segments are only 8-byte aligned. Every process maps
		// the window at page granularity, so all find the same start.
		var base unsafe.Pointer
		rc := C.gonox_share(C.MPI_Aint(n+64), g.node.c, &base, &g.win)
		ok := C.int(1)
		if rc != C.MPI_SUCCESS {
			ok = 0
		}
		check("Allreduce", C.gonox_min_int(&ok, g.node.c))
		if ok == 0 {
			if rc == C.MPI_SUCCESS {
				check("Win_free", C.gonox_unshare(&g.win))
			}
			return
		}
		g.live, g.held = true, need
		seg = make([][]byte, g.node.size)
		for q := range seg {
			var size C.MPI_Aint
			var p unsafe.Pointer
			check("Win_shared_query", C.gonox_segment(g.win, C.int(q), &size, &p))
			if int(size) < n+64 {
				panic(fmt.Sprintf("mpi: process %d asked for a shared window segment of %d bytes, process %d of the group for %d: the processes issued different collectives", Rank(), n+64, q, int(size)))
			}
			a := int(-uintptr(p) & 63)
			seg[q] = unsafe.Slice((*byte)(unsafe.Add(p, a)), n)
		}
	})
	return seg
}

// unshare frees the group's window, if it has one (collective).
func (g *sharedGroup) unshare() {
	if g.live {
		call(func() { check("Win_free", C.gonox_unshare(&g.win)) })
		g.live, g.held = false, 0
	}
}

// warnNoRoom prints the warning about a full shared-memory file system
// once per process.
var warnNoRoom sync.Once

// backingRoom returns the directory Open MPI backs shared windows with
// (its MCA parameter osc_sm_backing_directory, default /dev/shm) and the
// bytes free there; ok is false if that cannot be told.
func backingRoom() (dir string, free int64, ok bool) {
	dir = os.Getenv("OMPI_MCA_osc_sm_backing_directory")
	if dir == "" {
		dir = "/dev/shm"
	}
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		return dir, 0, false
	}
	return dir, int64(st.Bavail) * int64(st.Bsize), true
}

// Fence implements shard.SharedMemoryGroup: MPI_Win_sync, MPI_Barrier,
// MPI_Win_sync.
func (g *sharedGroup) Fence() {
	call(func() { check("Win_sync/Barrier", C.gonox_fence(g.win, g.node.c)) })
}

// freeWindows frees every shared window, in the order the groups were
// made (Finalize calls it before MPI_Finalize).
func freeWindows() {
	windows.mu.Lock()
	defer windows.mu.Unlock()
	for _, g := range windows.groups {
		g.unshare()
	}
	windows.groups = nil
}

var _ shard.SharedMemoryGroup = (*sharedGroup)(nil)
var _ shard.AsyncGroup = (*sharedGroup)(nil)
