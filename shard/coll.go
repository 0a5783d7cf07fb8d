package shard

// This file holds what the collectives of Ctx share: their parameters,
// the marking of blocks with the axes they vary over, the accounting of
// bytes, and the results the devices of a group share.

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gonox/gonox/tensor"
)

// collParams are the static parameters of a collective primitive.
type collParams struct {
	env   *devEnv
	axes  []string
	mask  uint64
	dim   int // gather axis, scatter dimension, split axis
	dim2  int // concat axis
	tiled bool
	perm  [][2]int
	max   bool // pmax (else pmin)
}

func tiledWord(tiled bool) string {
	if tiled {
		return "tiled"
	}
	return "stacked"
}

// marked returns x with the block mark for mask (x untraced).
func (e *devEnv) marked(x *tensor.Tensor, mask uint64) *tensor.Tensor {
	return tensor.WithLocal(x, e.Local(mask))
}

// markedFresh is marked for a header the collective made itself (a fresh
// result, or a view of its own over another block): out's header is
// donated once the marked one holds the storage, so that the storage goes
// back to the allocator cache when the result is donated in turn.
func (e *devEnv) markedFresh(out *tensor.Tensor, mask uint64) *tensor.Tensor {
	y := e.marked(out, mask)
	tensor.Donate(out)
	return y
}

// squeezeFresh removes dimension dim of a result the collective made
// itself, donating the header it replaces.
func squeezeFresh(out *tensor.Tensor, dim int) *tensor.Tensor {
	y := tensor.Squeeze(out, dim)
	if y != out {
		tensor.Donate(out)
	}
	return y
}

// remark gives a cotangent the mark of the input it belongs to.
func remark(g, like *tensor.Tensor) *tensor.Tensor {
	l := like.Local()
	if l == nil {
		return g
	}
	if g.IsTraced() {
		if maskOf(g)&^l.Mask != 0 {
			panic(fmt.Sprintf("shard: internal error: cotangent %v varies over more axes than %v", g, like))
		}
		return tensor.Vary(g, l)
	}
	return tensor.WithLocal(g, l)
}

func checkLocal(op string, c *Ctx, x *tensor.Tensor) {
	if l := x.Local(); l != nil && l.Env != c.env {
		panic(fmt.Sprintf("%s: %v belongs to another device or Map call", op, x))
	}
	if x.Layout() != nil {
		panic(fmt.Sprintf("%s: %v is a global sharded tensor; collectives take blocks inside shard.Map", op, x))
	}
}

// account charges bytes sent to this device and counts the collective once.
func (e *devEnv) account(kind string, bytes int64) {
	e.run.comm.add(e.mesh.devices[e.dev], kind, bytes)
	if e.dev == e.run.first {
		e.run.comm.count(kind)
	}
}

type lazyResult struct {
	once  sync.Once
	t     *tensor.Tensor
	marks atomic.Int32 // local members that took their view (markShared)
}

// markShared returns this device's marked view of out, the shared result
// of group g in slot s. Once every member of g in this process has its
// view, out's own header is donated (tensor.Donate): the storage then
// lives exactly as long as the members' views, and goes to the allocator
// cache when they are donated in turn.
func (e *devEnv) markShared(s *slot, g group, out *tensor.Tensor, mask uint64) *tensor.Tensor {
	y := e.marked(out, mask)
	e.doneWithShared(s, g, out)
	return y
}

// doneWithShared records that this device no longer reads out, the shared
// result of group g in slot s, by its own header; the last local member
// donates that header.
func (e *devEnv) doneWithShared(s *slot, g group, out *tensor.Tensor) {
	local := int32(0)
	for _, m := range g.members {
		if e.mesh.isLocal(m) {
			local++
		}
	}
	if v, ok := s.shared.Load(g.key); ok && v.(*lazyResult).marks.Add(1) == local {
		tensor.Donate(out)
	}
}

// sharedResult returns the result tensor shared by the devices of group
// key in slot s, creating it once. Devices fill disjoint parts of it and
// then meet at a barrier; afterwards it is immutable and every device of
// the group returns it (shared storage, as the blocks are read-only).
func sharedResult(s *slot, key int, mk func() *tensor.Tensor) *tensor.Tensor {
	v, _ := s.shared.LoadOrStore(key, &lazyResult{})
	l := v.(*lazyResult)
	l.once.Do(func() { l.t = mk() })
	return l.t
}

// chunk returns the part [lo, hi) of n elements that rank r of g reduces.
func chunk(n, g, r int) (int, int) {
	return n * r / g, n * (r + 1) / g
}

// placeAt copies the whole of src into dst (freshly allocated) at offset
// along axis.
func placeAt(dst, src *tensor.Tensor, axis, offset int) {
	off := make([]int, src.Rank())
	off[axis] = offset
	copyTensorRegion(dst, make([]int, dst.Rank()), src, off, off, src.Shape())
}

// sliceAxis returns x[start:start+n] along axis.
func sliceAxis(x *tensor.Tensor, axis, start, n int) *tensor.Tensor {
	return tensor.SliceAxis(x, axis, start, start+n)
}
