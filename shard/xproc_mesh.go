package shard

// This file holds the communicators of a mesh spanning processes: which
// devices are local, and one Group per set of processes that a group of
// devices over some axes spans.

import (
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// meshNet is what a mesh spanning processes needs: which of its devices
// are local, and one communicator per set of processes that some group of
// devices over some axes spans. It is nil for a mesh whose devices all
// live in this process's job of one process.
type meshNet struct {
	local  []bool // per mesh index
	nlocal int
	first  int              // first local mesh index, -1 if none
	spans  bool             // devices of more than one process
	procs  []int            // the processes owning its devices, ascending
	groups map[string]Group // by process set, for the collectives of Map
	// whole is a communicator of the mesh's own over procs (nil if this
	// process is not in procs or the mesh does not span processes), for
	// Gather and reshards: operations on different meshes use different
	// communicators, so two meshes may be driven from two goroutines.
	whole Group
	// put is another, for the GONOX_DEBUG check of Put, so a loader
	// putting batches on its goroutine does not cross Map or Gather.
	put Group
	// prefetch is another, for the gathers Prefetch runs in the
	// background (prefetch.go), numbered by pstream; pf holds them.
	prefetch Group
	pstream  *stream
	pf       prefetcher
	// stream names the mesh in fingerprints, numbers the operations on
	// whole and the arrays computed on it (see xproc_agree.go); groupOps
	// numbers the operations on each of groups (by process set). Each
	// communicator has its own numbers: operations on different
	// communicators of a mesh (a reshard onto it and its Map) may be
	// issued from different goroutines, those on one may not.
	stream   *stream
	groupOps map[string]*atomic.Uint64

	mu        sync.Mutex
	partition map[uint64][][]int // groups over an axes mask, members ascending
}

// connect sets up the communicators of a new mesh (collectively) and
// returns it.
func (m *Mesh) connect() *Mesh {
	if dist.t == nil {
		return m
	}
	n := &meshNet{local: make([]bool, len(m.devices)), first: -1, groups: map[string]Group{}, groupOps: map[string]*atomic.Uint64{}}
	for i, d := range m.devices {
		n.local[i] = d.IsLocal()
		if n.local[i] {
			n.nlocal++
			if n.first < 0 {
				n.first = i
			}
		}
		if d.proc != m.devices[0].proc {
			n.spans = true
		}
		if !slices.Contains(n.procs, d.proc) {
			n.procs = append(n.procs, d.proc)
		}
	}
	slices.Sort(n.procs)
	m.net = n
	if !n.spans {
		return m
	}
	n.whole = newGroup(n.procs)
	n.stream = newStream(m.identity())
	if n.whole != nil {
		// Before the groups: processes listing the devices in different
		// orders would make different groups.
		stop := watchdog("shard.NewMesh of "+n.stream.ident, n.procs)
		m.agreeOnMesh(n.whole, n.procs)
		stop()
	}
	n.put = newGroup(n.procs)
	n.prefetch, n.pstream = newGroup(n.procs), newStream(n.stream.ident+" (prefetch)")
	// Every subset of axes, every group of it: in the same order on every
	// process, so the collective NewGroup calls match.
	k := len(m.sizes)
	for mask := 1; mask < 1<<k; mask++ {
		for _, procs := range m.groupProcs(uint64(mask)) {
			key := procsKey(procs)
			if _, ok := n.groups[key]; ok || len(procs) < 2 {
				continue
			}
			n.groups[key] = newGroup(procs) // nil if this process is not in it
			n.groupOps[key] = new(atomic.Uint64)
		}
	}
	return m
}

// partitionOf returns the groups of devices over the axes in mask, each
// as its members in ascending mesh order, in order of their first member.
func (m *Mesh) partitionOf(mask uint64) [][]int {
	n := m.net
	n.mu.Lock()
	defer n.mu.Unlock()
	if p, ok := n.partition[mask]; ok {
		return p
	}
	if n.partition == nil {
		n.partition = map[uint64][][]int{}
	}
	seen := map[int]bool{}
	var out [][]int
	for i := range m.devices {
		key, members := m.groupOf(i, mask)
		if !seen[key] {
			seen[key] = true
			out = append(out, members)
		}
	}
	n.partition[mask] = out
	return out
}

// groupProcs returns, for each group of devices over the axes in mask (in
// order of their first member), the sorted set of processes it spans.
func (m *Mesh) groupProcs(mask uint64) [][]int {
	var out [][]int
	for _, members := range m.partitionOf(mask) {
		out = append(out, m.procsOf(members))
	}
	return out
}

// groupOf returns the members (mesh indices, ascending) of the group over
// the axes in mask that contains device i, and its key (the first member).
func (m *Mesh) groupOf(i int, mask uint64) (int, []int) {
	c := m.Coords(i)
	var members []int
	for j := range m.devices {
		cj := m.Coords(j)
		same := true
		for a := range c {
			if mask&(1<<uint(a)) == 0 && c[a] != cj[a] {
				same = false
				break
			}
		}
		if same {
			members = append(members, j)
		}
	}
	return members[0], members
}

func (m *Mesh) procsOf(members []int) []int {
	var procs []int
	for _, j := range members {
		if p := m.devices[j].proc; !slices.Contains(procs, p) {
			procs = append(procs, p)
		}
	}
	slices.Sort(procs)
	return procs
}

func procsKey(procs []int) string {
	s := make([]string, len(procs))
	for i, p := range procs {
		s[i] = strconv.Itoa(p)
	}
	return strings.Join(s, ",")
}

// isLocal reports whether device i of the mesh belongs to this process.
func (m *Mesh) isLocal(i int) bool { return m.net == nil || m.net.local[i] }

// spans reports whether the mesh has devices of more than one process.
func (m *Mesh) spans() bool { return m.net != nil && m.net.spans }

// firstLocal returns the first mesh index of this process (0 in one
// process), or -1.
func (m *Mesh) firstLocal() int {
	if m.net == nil {
		return 0
	}
	return m.net.first
}

// nlocal returns the number of the mesh's devices in this process.
func (m *Mesh) nlocal() int {
	if m.net == nil {
		return len(m.devices)
	}
	return m.net.nlocal
}

// ownerProcs returns the processes that own devices of m, ascending
// ([0] in a job of one process).
func (m *Mesh) ownerProcs() []int {
	if m.net == nil {
		return []int{0}
	}
	return m.net.procs
}

// firstLocalMember returns the first member of g in this process.
func firstLocalMember(m *Mesh, g group) int {
	for _, j := range g.members {
		if m.isLocal(j) {
			return j
		}
	}
	return -1
}
