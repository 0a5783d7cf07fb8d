package shard

// This file holds the agreement of processes on what they exchange: every
// exchange between processes (a collective of Map, a started one, Gather,
// a reshard, the reduction of a propagated op's pending sums) is preceded
// by a fingerprint of what each process is about to do, compared on the
// communicator that carries the data, so that processes issuing different
// operations end the job naming both instead of exchanging garbage.

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/gonox/gonox/tensor"
)

// fingerprintBytes is the size of a fingerprint on the wire: the hash of
// the mesh's identity, the operation's sequence number on its stream, the
// hash of the operation's description.
const fingerprintBytes = 24

// stream is a mesh (or the job-wide communicator) as fingerprints name
// it. ops numbers the operations on its communicator of all its processes
// (meshNet.whole, or the job's world), meshNet.groupOps those on each of
// its other communicators: the processes of a communicator issue its
// operations in the same order (MPI requires it), so the k-th on one
// process is the k-th on every other.
type stream struct {
	ident string // the mesh's identity: device ids in order, axis names and sizes
	hash  uint64 // hash of ident
	ops   atomic.Uint64
	// arrays numbers the arrays computed on the mesh (outputs of Map and
	// propagated ops, reductions of pending sums), puts those placed from
	// the host by Put (with GONOX_DEBUG, which asks every process to Put
	// in one order; FromBlocks, which a loader calls on a goroutine of
	// its own, numbers nothing): Gather and reshards name the array they read by its
	// number, so that processes reading arrays of one shape in different
	// orders are caught. Reshards' results are not numbered (a reshard
	// onto a mesh may run on another goroutine than its Map).
	arrays, puts atomic.Uint64
}

func newStream(ident string) *stream {
	return &stream{ident: ident, hash: hash64(ident)}
}

func hash64(s string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return h.Sum64()
}

// identity returns the mesh's identity as the processes compare it: axis
// names and sizes and its device ids in order.
func (m *Mesh) identity() string {
	var b strings.Builder
	b.WriteString(m.String())
	b.WriteString(" of devices [")
	for i, d := range m.devices {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strconv.Itoa(d.id))
	}
	b.WriteByte(']')
	return b.String()
}

// typeOf writes a dtype and shape in type notation (f32[3,4]).
func typeNotation(dt tensor.DType, shape []int) string {
	var b strings.Builder
	b.WriteString(dt.Abbrev())
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// arrayName names an array in the messages of agreement: what made it,
// and its number among those arrays of its mesh.
func (l *layout) arrayName() string {
	switch {
	case l.id > 0:
		return "array #" + strconv.FormatUint(l.id, 10)
	case l.putID > 0:
		return "array placed from the host #" + strconv.FormatUint(l.putID, 10)
	}
	return "an unnumbered array (placed from the host, or resharded)"
}

// number gives a new layout on mesh m its number among the arrays of m
// (see stream.arrays); fromHost says it was placed from a host tensor.
// Numbers placed from the host are compared only with GONOX_DEBUG, which
// asks every process to place them in one order (see checkPutEqual).
func (l *layout) number(fromHost bool) *layout {
	m := l.sharding.mesh
	if !m.spans() {
		return l
	}
	if fromHost {
		if dist.debug {
			l.putID = m.net.stream.puts.Add(1)
		}
		return l
	}
	l.id = m.net.stream.arrays.Add(1)
	return l
}

// agree makes the processes of g (the processes procs, ascending) check,
// before they exchange data, that each is about to do the same thing: the
// same operation (desc: its kind, dtype, shape, axes and parameters, in
// type notation) on the same mesh (st: the same devices in the same order
// and the same axes) as the seq-th on g. On a mismatch every
// process of g panics with a message naming each process's operation. It
// costs one all-gather of fingerprintBytes per process.
func agree(g Group, procs []int, who string, st *stream, seq uint64, desc string) {
	var mine [fingerprintBytes]byte
	binary.LittleEndian.PutUint64(mine[0:], st.hash)
	binary.LittleEndian.PutUint64(mine[8:], seq)
	binary.LittleEndian.PutUint64(mine[16:], hash64(desc))
	n := g.Size()
	all := make([]byte, fingerprintBytes*n)
	counts := make([]int, n)
	for i := range counts {
		counts[i] = fingerprintBytes
	}
	g.Allgatherv(mine[:], all, counts)
	same := true
	for r := range n {
		if string(all[r*fingerprintBytes:(r+1)*fingerprintBytes]) != string(mine[:]) {
			same = false
			break
		}
	}
	if same {
		return
	}
	// Every process of g sees the mismatch: they exchange the full
	// descriptions (one more collective they all issue) and name them.
	full := fmt.Sprintf("operation #%d among processes %v on %s: %s", seq, procs, st.ident, desc)
	got := allgatherBytes(g, []byte(full))
	var b strings.Builder
	fmt.Fprintf(&b, "%s: the processes issued different collectives (every process must issue the same operations on a mesh, in the same order):", who)
	for r, s := range got {
		p := r
		if procs != nil {
			p = procs[r]
		}
		fmt.Fprintf(&b, "\n\tprocess %d: %s", p, s)
	}
	panic(b.String())
}

// agreeOnMesh checks, when a mesh spanning processes is made, that every
// process owning its devices made the same mesh (the same devices in the
// same order, the same axes). A mesh listing devices in different orders
// on different processes would pair different blocks in its collectives.
func (m *Mesh) agreeOnMesh(g Group, procs []int) {
	mine := m.identity()
	got := allgatherBytes(g, []byte(mine))
	for r, s := range got {
		if string(s) != mine {
			panic(fmt.Sprintf("shard.NewMesh: process %d made %s, process %d made %s; every process must make the same meshes, with their devices in the same order, in the same order", dist.rank, mine, procs[r], s))
		}
	}
}
