package shard

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/gonox/gonox/internal/box"
	"github.com/gonox/gonox/tensor"
)

// layout is the tensor.Layout of a global sharded tensor: one block per
// device of the mesh, in mesh (row-major) order. Replicas hold their own
// copies, as separate devices would.
type layout struct {
	sharding Sharding
	geo      geometry
	blocks   []*tensor.Tensor
	// partial lists the mesh axes over which the blocks are summands of
	// the value, not copies (a partial-sum result of propagation, DTensor's
	// Partial): the value is the sum of the blocks along these axes. It is
	// disjoint from the axes of the spec.
	partial DimSpec
	// origin names the op that left the pending sum (its reduction is
	// charged to it when nothing else consumes it first).
	origin string
	// id numbers the array among those computed on its mesh, putID among
	// those placed from the host (with GONOX_DEBUG), when the mesh spans
	// processes: Gather and reshards across processes compare them (see
	// xproc_agree.go).
	id, putID uint64
	// sum is the reduced layout, computed (and charged) once however many
	// consumers read a partial sum (see summed).
	sumOnce sync.Once
	sum     atomic.Pointer[layout]
	// owned marks block headers made for this layout alone (a Map or
	// propagated op's output, a MapBlocks result, a Put): no other layout
	// or caller holds them (a block's storage may still be shared with
	// other headers, which count as its holders). shared records that
	// they have been handed out since (ShareBlocks). extra counts the
	// tensor headers over the layout beyond the first (HoldBlocks). Owned
	// blocks that are not shared are donated with the last of those
	// headers (tensor.Donate), and so is the reduced sum of a partial
	// layout.
	owned  bool
	shared atomic.Bool
	extra  atomic.Int32
}

// DonateBlocks implements tensor.BlockDonator: the blocks of this
// process's devices are donated with the last tensor header over them
// when nothing else can reach them.
func (l *layout) DonateBlocks() {
	if l.extra.Add(-1) >= 0 {
		return // another header over the layout is live
	}
	if l.shared.Load() {
		return
	}
	if l.owned {
		tensor.Donate(l.blocks...)
	}
	if s := l.sum.Load(); s != nil && s.owned && !s.shared.Load() {
		tensor.Donate(s.blocks...)
	}
}

// ShareBlocks implements tensor.BlockDonator.
func (l *layout) ShareBlocks() { l.shared.Store(true) }

// HoldBlocks implements tensor.BlockHolder.
func (l *layout) HoldBlocks() { l.extra.Add(1) }

// summed returns the layout of a partial sum with the sum done, reducing
// it once however many consumers read it.
func (l *layout) summed() *layout {
	l.sumOnce.Do(func() { l.sum.Store(l.reduced()) })
	return l.sum.Load()
}

// ownCopies returns headers of their own over blocks that another layout
// holds (one per distinct block), for a layout that owns its blocks.
func ownCopies(blocks []*tensor.Tensor) []*tensor.Tensor {
	out := make([]*tensor.Tensor, len(blocks))
	seen := map[*tensor.Tensor]*tensor.Tensor{}
	for d, b := range blocks {
		if b == nil {
			continue
		}
		c, ok := seen[b]
		if !ok {
			c = tensor.WithLocal(b, nil)
			seen[b] = c
		}
		out[d] = c
	}
	return out
}

// DimAxes implements tensor.Layout.
func (l *layout) DimAxes(i int) string {
	d := l.sharding.spec.dim(i)
	if len(d) == 0 {
		return ""
	}
	return axesLabel(d)
}

// Gather implements tensor.Layout: the whole array as a host tensor.
func (l *layout) Gather(x *tensor.Tensor) *tensor.Tensor {
	needOwner("shard.Gather", l, x)
	if len(l.partial) > 0 {
		l = l.reduced()
	}
	if crossProcess(l) {
		return gatherAll(l, x)
	}
	if l.sharding.IsReplicated() {
		// Every block is the whole array, and blocks are immutable.
		l.ShareBlocks()
		return l.blocks[l.sharding.mesh.firstLocal()]
	}
	out := tensor.Zeros(x.DType(), l.geo.shape...)
	zero := make([]int, len(l.geo.shape))
	for _, dev := range l.uniqueBlocks() {
		off := l.offset(dev)
		copyTensorRegion(out, zero, l.blocks[dev], off, off, l.geo.block)
	}
	return out
}

// MapBlocks implements tensor.Layout.
//
// A tensor with pending sums (a gradient whose partial sums over some mesh
// axes are not yet all-reduced) is reduced first: fn sees the blocks of
// the value, not the summands (fn need not be linear, and a conversion of
// the summands would otherwise drop the pending sums).
func (l *layout) MapBlocks(x *tensor.Tensor, fn func(block *tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	if len(l.partial) > 0 {
		x = moveTo(l.origin, x, l.sharding)
		l = layoutOf("shard", x)
	}
	out := (&layout{sharding: l.sharding, geo: l.geo, blocks: make([]*tensor.Tensor, len(l.blocks)), owned: true}).number(false)
	var dt tensor.DType
	parallelFor(len(l.blocks), func(d int) {
		if l.blocks[d] == nil {
			return // another process's device
		}
		b := fn(l.blocks[d])
		if !slices.Equal(b.BorrowShape(), l.geo.block) {
			panic(fmt.Sprintf("shard: MapBlocks changed block %v to %v", l.blocks[d], b))
		}
		out.blocks[d] = tensor.WithLocal(tensor.StopGradient(b), nil)
		chargeBlock(l.sharding.mesh.devices[d], out.blocks[d])
	})
	dt = x.DType()
	if f := l.sharding.mesh.firstLocal(); f >= 0 {
		dt = out.blocks[f].DType()
	}
	return tensor.NewSharded(dt, x.Shape(), out)
}

// Abstract implements tensor.AbstractLayout: the layout without blocks,
// for the placeholders autodiff keeps.
func (l *layout) Abstract() tensor.Layout {
	if l.blocks == nil {
		return l
	}
	return &layout{sharding: l.sharding, geo: l.geo, partial: l.partial, origin: l.origin}
}

// DeviceBlocks implements tensor.BlockLayout.
func (l *layout) DeviceBlocks() ([]*tensor.Tensor, []int) {
	ids := make([]int, len(l.blocks))
	for d := range ids {
		ids[d] = l.sharding.mesh.devices[d].ID()
	}
	l.ShareBlocks()
	return slices.Clone(l.blocks), ids
}

// IsAbstract implements tensor.AbstractLayout.
func (l *layout) IsAbstract() bool { return l.blocks == nil }

// offset returns the global offset of the block of device dev.
func (l *layout) offset(dev int) []int {
	idx := l.sharding.blockIndex(dev, len(l.geo.shape))
	for i := range idx {
		idx[i] *= l.geo.block[i]
	}
	return idx
}

// uniqueBlocks returns one device per distinct block.
func (l *layout) uniqueBlocks() []int {
	seen := map[string]bool{}
	var out []int
	for dev := range l.blocks {
		k := fmt.Sprint(l.sharding.blockIndex(dev, len(l.geo.shape)))
		if !seen[k] {
			seen[k] = true
			out = append(out, dev)
		}
	}
	return out
}

// FromBlocks builds a global tensor of the given shape sharded by s from
// one block per device of s's mesh, in mesh order, as JAX's
// make_array_from_single_device_arrays does (checkpoint restore and data
// readers build blocks where they belong). Replicas may share one block
// tensor. The blocks must be host tensors of one dtype with the block
// shape s gives to shape; they are charged to their devices. Tensors are
// immutable, so the blocks must not be changed afterwards. When the mesh
// spans processes (see Install), each process passes the blocks of its
// own devices and nil for the others.
func FromBlocks(s Sharding, shape []int, blocks []*tensor.Tensor) (*tensor.Tensor, error) {
	if s.mesh == nil {
		return nil, fmt.Errorf("shard.FromBlocks: zero Sharding")
	}
	if msg := s.spec.check(s.mesh, shape); msg != "" {
		return nil, fmt.Errorf("shard.FromBlocks: shape %v: %s", shape, msg)
	}
	geo := s.geometry("shard.FromBlocks", shape)
	if len(blocks) != s.mesh.Size() {
		return nil, fmt.Errorf("shard.FromBlocks: %d blocks for a mesh of %d devices", len(blocks), s.mesh.Size())
	}
	// Not numbered: a loader builds batches on a goroutine of its own,
	// with no order agreed with the Puts of the main one.
	l := &layout{sharding: s, geo: geo, blocks: make([]*tensor.Tensor, len(blocks))}
	f := s.mesh.firstLocal()
	if f < 0 {
		return nil, fmt.Errorf("shard.FromBlocks: process %d has no device of %v", dist.rank, s.mesh)
	}
	for d, b := range blocks {
		if !s.mesh.isLocal(d) {
			if b != nil {
				return nil, fmt.Errorf("shard.FromBlocks: block %d given for device %d of process %d; this is process %d", d, s.mesh.devices[d].ID(), s.mesh.devices[d].Process(), dist.rank)
			}
			continue
		}
		switch {
		case b == nil:
			return nil, fmt.Errorf("shard.FromBlocks: block %d is nil", d)
		case b.Layout() != nil || b.Local() != nil || b.IsTraced():
			return nil, fmt.Errorf("shard.FromBlocks: block %d %v is not a plain host tensor", d, b)
		case b.DType() != blocks[f].DType():
			return nil, fmt.Errorf("shard.FromBlocks: block %d is %v, block %d is %v", d, b.DType(), f, blocks[f].DType())
		case !slices.Equal(b.Shape(), geo.block):
			return nil, fmt.Errorf("shard.FromBlocks: block %d is %v, want shape %v for %v of shape %v", d, b, geo.block, s.spec, shape)
		}
		l.blocks[d] = b
		chargeBlock(s.mesh.devices[d], b)
	}
	return tensor.NewSharded(blocks[f].DType(), shape, l), nil
}

// ShardingOf returns the sharding of a global sharded tensor, and false for
// a host tensor.
func ShardingOf(x *tensor.Tensor) (Sharding, bool) {
	l, ok := x.Layout().(*layout)
	if !ok {
		return Sharding{}, false
	}
	return l.sharding, true
}

// Blocks returns the blocks of a sharded tensor, one per device of its mesh
// in mesh order (replicas are distinct copies, or share storage where
// propagation computed them once), nil for devices of other processes. A
// partial sum left by propagation is reduced first, so the blocks always
// hold the value. It panics for a host tensor.
func Blocks(x *tensor.Tensor) []*tensor.Tensor {
	l, ok := x.Layout().(*layout)
	if !ok {
		panic(fmt.Sprintf("shard.Blocks: %v is not sharded", x))
	}
	if len(l.partial) > 0 {
		l = l.summed()
	}
	l.ShareBlocks()
	return slices.Clone(l.blocks)
}

var putOp, gatherOp *tensor.Op

func init() {
	putOp = &tensor.Op{
		Name:   "device_put",
		Traits: tensor.Traits{Placement: tensor.Distributed},
		Impl: func(in []*tensor.Tensor, p any) *tensor.Tensor {
			s := p.(Sharding)
			if src := layoutOf("device_put", in[0]); src != nil && src.sharding.mesh.Equal(s.mesh) {
				chargeMove("device_put", src, s) // a reshard on one mesh: Record counts it
			}
			return put(in[0], s)
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			// Send the cotangent back where the input lived.
			if s, ok := ShardingOf(in[0]); ok {
				return []*tensor.Tensor{Put(g, s)}
			}
			return []*tensor.Tensor{Gather(g)}
		},
		JVP: func(_, tan, _ []*tensor.Tensor, p any) []*tensor.Tensor {
			return []*tensor.Tensor{Put(tan[0], p.(Sharding))}
		},
		// The batch placed at once, its batch dimension replicated.
		Batch: func(in []*tensor.Tensor, _ []bool, p any) []*tensor.Tensor {
			s := p.(Sharding)
			return []*tensor.Tensor{Put(in[0], Sharding{mesh: s.mesh, spec: append(Spec{nil}, s.spec...)})}
		},
	}
	gatherOp = &tensor.Op{
		Name:   "gather",
		Traits: tensor.Traits{Placement: tensor.Distributed},
		Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor {
			x := in[0]
			out := x.Layout().Gather(x)
			return out
		},
		VJP: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, _ any) []*tensor.Tensor {
			s, _ := ShardingOf(in[0])
			return []*tensor.Tensor{Put(g, s)}
		},
		JVP: func(_, tan, _ []*tensor.Tensor, _ any) []*tensor.Tensor {
			if tan[0].Layout() == nil {
				return []*tensor.Tensor{tan[0]}
			}
			return []*tensor.Tensor{Gather(tan[0])}
		},
		// The placed batch gathered at once.
		Batch: func(in []*tensor.Tensor, _ []bool, _ any) []*tensor.Tensor {
			return []*tensor.Tensor{Gather(in[0])}
		},
	}
}

// Put places x on the mesh of s, split and replicated as s says: JAX's
// device_put. x may be a host tensor or already sharded (on this or any
// other mesh: Put then reshards, copying each target block straight from
// the source blocks that overlap it). It is differentiable: the cotangent
// returns to where x lived. It panics if a sharded dimension is not
// divisible by its axes, naming the dimension, the axes and the sizes.
func Put(x *tensor.Tensor, s Sharding) *tensor.Tensor {
	if x == nil {
		panic("shard.Put: x is nil")
	}
	if x.Local() != nil {
		panic(fmt.Sprintf("shard.Put: %v is a block inside shard.Map", x))
	}
	if s.mesh == nil {
		panic("shard.Put: zero Sharding (use NewSharding or Replicated)")
	}
	s.geometry("shard.Put: "+x.String(), x.Shape()) // validate early, with the operand named
	if cur, ok := ShardingOf(x); ok && cur.Equal(s) && !isPartial(x) {
		return x
	}
	return keepAxes(tensor.Apply(putOp, s, x), x)
}

// keepAxes gives y the logical axis names of x: placement moves data, it
// does not change what the dimensions mean.
func keepAxes(y, x *tensor.Tensor) *tensor.Tensor {
	if axes := x.BorrowLogicalAxes(); axes != nil && y.BorrowLogicalAxes() == nil && y.Rank() == x.Rank() {
		z := tensor.WithLogicalAxes(y, axes...)
		if l, _ := y.Layout().(*layout); l != nil {
			// Every caller drops y: z stays the only header of its blocks.
			l.extra.Add(-1)
		}
		return z
	}
	return y
}

// Reshard is Put for a tensor that is already sharded; it is the same
// operation, named for readability at call sites that change layouts.
func Reshard(x *tensor.Tensor, s Sharding) *tensor.Tensor { return Put(x, s) }

// Gather returns a sharded tensor as one host tensor (a host tensor is
// returned as is). It is differentiable.
func Gather(x *tensor.Tensor) *tensor.Tensor {
	if x.Layout() == nil {
		return x
	}
	return keepAxes(tensor.Apply(gatherOp, nil, x), x)
}

// put builds the sharded tensor of x (host or sharded) for sharding s.
func put(x *tensor.Tensor, s Sharding) *tensor.Tensor {
	if x.Layout() == nil {
		checkPutEqual(x, s.mesh)
	}
	geo := s.geometry("shard.Put", x.Shape())
	// Charged blocks are copies of their own, unless other processes sent
	// them.
	src, _ := x.Layout().(*layout)
	own := !acrossProcesses(src, s)
	l := &layout{sharding: s, geo: geo, blocks: makeBlocks(x, s, true), owned: own}
	if src == nil {
		// A reshard's result is not numbered: a reshard onto a mesh may
		// run on another goroutine than the mesh's Map (a teacher's
		// outputs moved to a student's mesh).
		l.number(true)
	}
	return tensor.NewSharded(x.DType(), x.Shape(), l)
}

// makeBlocks returns the block of x for every device of s's mesh. Blocks of
// a tensor already sharded by s are reused; a replicated host tensor is
// shared by every device and contiguous blocks of a host tensor are views
// (tensors are immutable, so sharing is safe) unless charge is set, in
// which case every block is a device's own copy, charged to its memory.
func makeBlocks(x *tensor.Tensor, s Sharding, charge bool) []*tensor.Tensor {
	geo := s.geometry("shard.Put", x.Shape())
	n := s.mesh.Size()
	out := make([]*tensor.Tensor, n)
	src, _ := x.Layout().(*layout)
	if src != nil && len(src.partial) > 0 {
		src = src.reduced()
	}
	if src != nil && src.sharding.Equal(s) && !charge {
		src.ShareBlocks()
		copy(out, src.blocks)
		return out
	}
	if acrossProcesses(src, s) {
		// The source or target blocks live on several processes: they
		// send each other the parts they need.
		return reshardAcross(src, x.DType(), s, charge)
	}
	proto := &layout{sharding: s, geo: geo}
	if src == nil && !charge {
		if s.IsReplicated() {
			for d := range out {
				out[d] = x
			}
			return out
		}
		if v := contiguousViews(x, proto, n); v != nil {
			return v
		}
	}
	// Without charging, devices that need the same block share one copy
	// (blocks are immutable): a gather to replicas builds it once. Only
	// this process's devices get blocks; other processes build theirs.
	var devs []int
	for d := range n {
		if s.mesh.isLocal(d) {
			devs = append(devs, d)
		}
	}
	var same map[int][]int
	if !charge {
		all := devs
		devs, same = nil, map[int][]int{}
		for _, d := range all {
			k := s.mesh.Index(proto.canonical(d))
			if _, ok := same[k]; !ok {
				devs = append(devs, d)
			}
			same[k] = append(same[k], d)
		}
	}
	parallelFor(len(devs), func(i int) {
		dev := devs[i]
		off := proto.offset(dev)
		b := tensor.Zeros(x.DType(), geo.block...)
		if src == nil {
			copyTensorRegion(b, off, x, make([]int, len(geo.shape)), off, geo.block)
		} else {
			for _, sd := range src.uniqueBlocks() {
				soff := src.offset(sd)
				lo, size, ok := box.Intersect(off, geo.block, soff, src.geo.block)
				if ok {
					copyTensorRegion(b, off, src.blocks[sd], soff, lo, size)
				}
			}
		}
		out[dev] = b
		if charge {
			chargeBlock(s.mesh.devices[dev], b)
		}
	})
	if same != nil {
		for _, d := range devs {
			for _, r := range same[s.mesh.Index(proto.canonical(d))] {
				out[r] = out[d]
			}
		}
	}
	return out
}

// acrossProcesses reports whether moving blocks laid out as src (nil for
// a host tensor) to s involves several processes.
func acrossProcesses(src *layout, s Sharding) bool {
	sm := src.meshOrNil()
	return sm != nil && len(unionProcs(sm, s.mesh)) > 1
}

// canonical returns the mesh coordinates of the first device holding the
// same block as device dev: its coordinates with the axes the spec does
// not use set to 0.
func (l *layout) canonical(dev int) []int {
	c := l.sharding.mesh.Coords(dev)
	used := l.sharding.spec.Axes()
	for k, name := range l.sharding.mesh.names {
		if !slices.Contains(used, name) {
			c[k] = 0
		}
	}
	return c
}

// contiguousViews returns blocks that are views into x when every block is
// a contiguous range of x's storage (only the leading dimensions that are
// not 1 are split), or nil.
func contiguousViews(x *tensor.Tensor, l *layout, n int) []*tensor.Tensor {
	shape := l.geo.shape
	first := -1
	for i := range shape {
		if l.geo.parts[i] > 1 {
			if first >= 0 {
				return nil
			}
			first = i
		}
	}
	for i := 0; i < first; i++ {
		if shape[i] != 1 {
			return nil
		}
	}
	if x.DType() == tensor.Bool {
		return nil
	}
	size := 1
	for _, d := range l.geo.block {
		size *= d
	}
	out := make([]*tensor.Tensor, n)
	for dev := range out {
		off := l.offset(dev)
		start := 0
		st := box.Strides(shape)
		for i, o := range off {
			start += o * st[i]
		}
		switch x.DType() {
		case tensor.Float32:
			out[dev] = tensor.WrapFloat32(x.RawFloat32()[start:start+size:start+size], l.geo.block...)
		case tensor.Int32:
			out[dev] = tensor.WrapInt32(x.RawInt32()[start:start+size:start+size], l.geo.block...)
		case tensor.BFloat16, tensor.Float16:
			out[dev] = tensor.WrapUint16(x.DType(), x.RawUint16()[start:start+size:start+size], l.geo.block...)
		case tensor.Float64:
			out[dev] = tensor.WrapFloat64(x.RawFloat64()[start:start+size:start+size], l.geo.block...)
		case tensor.Int64:
			out[dev] = tensor.WrapInt64(x.RawInt64()[start:start+size:start+size], l.geo.block...)
		case tensor.Uint8:
			out[dev] = tensor.WrapUint8(x.RawUint8()[start:start+size:start+size], l.geo.block...)
		}
	}
	return out
}

// chargeBlock accounts a block's bytes to a device.
func chargeBlock(d *Device, b *tensor.Tensor) {
	account(d, b, b.Bytes())
}

// storageOf identifies a block's storage (nil for an empty block).
func storageOf(b *tensor.Tensor) unsafe.Pointer {
	if b.Size() == 0 {
		return nil
	}
	switch b.DType() {
	case tensor.Float32:
		return unsafe.Pointer(&b.BorrowFloat32()[0]) // borrowed: identity only
	case tensor.Int32:
		return unsafe.Pointer(&b.BorrowInt32()[0])
	case tensor.BFloat16, tensor.Float16:
		return unsafe.Pointer(&b.RawUint16()[0])
	case tensor.Float64:
		return unsafe.Pointer(&b.BorrowFloat64()[0])
	case tensor.Int64:
		return unsafe.Pointer(&b.BorrowInt64()[0])
	case tensor.Uint8:
		return unsafe.Pointer(&b.RawUint8()[0])
	}
	return unsafe.Pointer(&b.RawBool()[0])
}

// copyBytesRegion is copyTensorRegion on raw storage of elements of es
// bytes (a send or receive buffer of an exchange, a block's storage):
// the region is copied straight between them, with no staging tensor.
func copyBytesRegion(dst []byte, dshape, doff []int, src []byte, sshape, soff, lo, size []int, es int) {
	r := len(size)
	if r == 0 {
		copy(dst[:es], src[:es])
		return
	}
	// The last axis in bytes keeps box.Copy's runs whole.
	bytesLast := func(s []int) []int {
		t := slices.Clone(s)
		t[r-1] *= es
		return t
	}
	box.Copy(dst, bytesLast(dshape), bytesLast(doff), src, bytesLast(sshape), bytesLast(soff), bytesLast(lo), bytesLast(size))
}

// copyTensorRegion copies the global box [lo, lo+size) from src, whose
// element 0 sits at global srcOff, into dst, whose element 0 sits at
// dstOff. dst must be freshly allocated (it is written in place).
func copyTensorRegion(dst *tensor.Tensor, dstOff []int, src *tensor.Tensor, srcOff, lo, size []int) {
	switch dst.DType() {
	case tensor.Float32:
		// Borrowed, not pinned: both may still be recycled (tensor.Donate).
		box.Copy(dst.BorrowFloat32(), dst.BorrowShape(), dstOff, src.BorrowFloat32(), src.BorrowShape(), srcOff, lo, size)
	case tensor.Int32:
		box.Copy(dst.BorrowInt32(), dst.BorrowShape(), dstOff, src.BorrowInt32(), src.BorrowShape(), srcOff, lo, size)
	case tensor.Bool:
		box.Copy(dst.RawBool(), dst.BorrowShape(), dstOff, src.RawBool(), src.BorrowShape(), srcOff, lo, size)
	case tensor.BFloat16, tensor.Float16:
		box.Copy(dst.RawUint16(), dst.BorrowShape(), dstOff, src.RawUint16(), src.BorrowShape(), srcOff, lo, size)
	case tensor.Float64:
		box.Copy(dst.BorrowFloat64(), dst.BorrowShape(), dstOff, src.BorrowFloat64(), src.BorrowShape(), srcOff, lo, size)
	case tensor.Int64:
		box.Copy(dst.BorrowInt64(), dst.BorrowShape(), dstOff, src.BorrowInt64(), src.BorrowShape(), srcOff, lo, size)
	case tensor.Uint8:
		box.Copy(dst.RawUint8(), dst.BorrowShape(), dstOff, src.RawUint8(), src.BorrowShape(), srcOff, lo, size)
	}
}

// parallelFor runs fn(0..n-1) on up to GOMAXPROCS goroutines and returns
// when all are done. A panic in fn is re-raised in the caller.
func parallelFor(n int, fn func(i int)) {
	workers := min(n, runtime.GOMAXPROCS(0))
	if workers <= 1 {
		for i := 0; i < n; i++ {
			fn(i)
		}
		return
	}
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		next  int
		first any
	)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if r := recover(); r != nil {
					mu.Lock()
					if first == nil {
						first = r
					}
					mu.Unlock()
				}
			}()
			for {
				mu.Lock()
				i := next
				next++
				stop := i >= n || first != nil
				mu.Unlock()
				if stop {
					return
				}
				fn(i)
			}
		}()
	}
	wg.Wait()
	if first != nil {
		panic(first)
	}
}
