package tensor

import (
	"fmt"
	"sync/atomic"
	"unsafe"
)

// Donation and the allocator cache (see "Donation" in doc.go).
//
// Storage that the allocator made (newOut, newTensor, Zeros, ...) carries a
// storageRec counting its holders: the header it was made for, every other
// header over the same storage (shallow copies, views), and every autodiff
// node that saves it as a residual. Donate drops a header's count; the
// storage goes to the cache when the count reaches zero. Handing the
// storage itself out (RawFloat32 and the other Raw accessors) pins it: it
// is then never recycled. A traced header is not a holder of its own: it
// is valid exactly as long as its primal (checkLive follows the chain).

// storageRec is the holder count of one allocator-made buffer, and the
// buffer itself (as allocated: start and capacity), which goes to the
// cache when the count reaches zero, whichever header drops the last hold
// (a donated header has let go of its slice by then, and a view's slice
// may start inside the buffer).
type storageRec struct {
	refs atomic.Int32
	kind DType          // the storage's dtype once recorded (setBuffer)
	capn int            // elements allocated
	base unsafe.Pointer // first element
}

// setBuffer records t's storage, as allocated, in its holder count.
func (t *Tensor) setBuffer() {
	r := t.rec
	if r == nil {
		return
	}
	switch t.dtype {
	case Float32:
		recordBuffer(r, t.f32())
	case Int32:
		recordBuffer(r, t.i32())
	case Bool:
		recordBuffer(r, t.b())
	case BFloat16, Float16:
		recordBuffer(r, t.u16())
	case Float64:
		recordBuffer(r, t.f64())
	case Int64:
		recordBuffer(r, t.i64())
	case Uint8:
		recordBuffer(r, t.u8())
	default:
		return
	}
	r.kind = t.dtype
}

// recordBuffer records s, as allocated, in r.
func recordBuffer[E any](r *storageRec, s []E) {
	r.capn, r.base = cap(s), unsafe.Pointer(unsafe.SliceData(s))
}

// pinnedRefs marks storage that was handed out: decrements never reach 0.
const pinnedRefs = 1 << 30

// hold counts one more holder of t's storage (a new header or a node).
func (t *Tensor) hold() {
	if t.rec != nil {
		t.rec.refs.Add(1)
	}
}

// pin marks t's storage as handed out: it is never recycled.
func (t *Tensor) pin() {
	if r := t.rec; r != nil && r.refs.Load() < pinnedRefs/2 {
		r.refs.Store(pinnedRefs)
	}
}

// release drops one holder of t's storage, recycling it at zero.
func (t *Tensor) release() {
	r := t.rec
	if r == nil || r.refs.Add(-1) != 0 || r.base == nil {
		return
	}
	switch r.kind {
	case Float32:
		putBuffer(&f32Cache, r)
	case Int32:
		putBuffer(&i32Cache, r)
	case Bool:
		putBuffer(&boolCache, r)
	case BFloat16, Float16:
		putBuffer(&u16Cache, r)
	case Float64:
		putBuffer(&f64Cache, r)
	case Int64:
		putBuffer(&i64Cache, r)
	case Uint8:
		putBuffer(&u8Cache, r)
	}
}

// putBuffer gives the buffer r records to c.
func putBuffer[E any](c *sizeCache[E], r *storageRec) {
	c.put(unsafe.Slice((*E)(r.base), r.capn))
}

// Donate declares the tensors dead, as JAX's donate_argnums does for the
// arguments of a step: each header becomes invalid, and any later use of it
// by an op or a reader panics naming the op ("tensor.Add: operand x
// f32[1024,1024] was donated"). Storage that no other live header, view or
// autodiff residual shares goes to the allocator cache, and the next
// allocation of the same dtype and size class reuses it instead of asking the
// collector for fresh zeroed memory.
//
// Donating nil or an already donated tensor does nothing. For a placed
// tensor (shard.Put) whose layout implements BlockDonator the blocks are
// donated. Donating a traced tensor (an intermediate of a function being
// differentiated) panics: its value belongs to the trace; see
// Trace.RecycleIntermediates for recycling those after Backward. A value
// inside Vmap that an op computed (not an argument of the vmapped
// function) donates the batch it stands for, unless another value wraps
// the same batch: RecycleIntermediates recycles a vmapped function's
// activations too.
//
// Storage that was handed out without a copy (RawFloat32, RawInt32,
// RawBool, RawUint16) is never recycled; a view (Reshape, WithLocal,
// WithLogicalAxes, ...) keeps it alive until it is donated too. An op may
// return its operand itself (Reshape to the same shape, Convert to the same
// dtype): donating such a result donates the operand.
func Donate(ts ...*Tensor) {
	for _, t := range ts {
		donate(t)
	}
}

// donate is Donate of one tensor. (Donate calling itself would make every
// caller's variadic slice escape to the heap.)
func donate(t *Tensor) {
	if t == nil || t.donated {
		return
	}
	if t.node != nil {
		panic(fmt.Sprintf("tensor.Donate: %v is traced (an intermediate of a function being differentiated); its value belongs to the trace", t))
	}
	t.donated = true
	if x := t.xv(); x != nil && x.owned.Load() && x.val.node == nil {
		donate(x.val) // a batch inside Vmap that only this value holds
	}
	if bd, ok := t.layout().(BlockDonator); ok {
		bd.DonateBlocks()
	}
	t.release()
	t.data = rawData{}
}

// BlockDonator is implemented by layouts whose blocks Donate can donate
// (package shard's placed tensors).
type BlockDonator interface {
	// DonateBlocks donates every block of this process's devices, unless
	// the blocks are shared (see ShareBlocks).
	DonateBlocks()
	// ShareBlocks records that the layout's blocks are seen through more
	// than one tensor: a second header over the layout (WithLocal,
	// WithLogicalAxes and other shallow copies call it), or blocks handed
	// out to another layout or to the caller. DonateBlocks then leaves
	// them alone.
	ShareBlocks()
}

// BlockHolder is implemented by BlockDonator layouts that count the
// headers over them, as storage counts its holders: a shallow copy of a
// placed tensor (WithLocal, WithLogicalAxes, ...) calls HoldBlocks instead
// of ShareBlocks, and DonateBlocks donates the blocks when the last of
// those headers is donated.
type BlockHolder interface {
	// HoldBlocks records one more header over the layout.
	HoldBlocks()
}

// IsDonated reports whether t was donated (or is traced over a donated
// value): any use of it then panics.
func (t *Tensor) IsDonated() bool {
	for ; t != nil; t = t.primal {
		if t.donated {
			return true
		}
	}
	return false
}

// donatedPanic panics naming op and the operand.
func donatedPanic(op, name string, x *Tensor) {
	if name != "" {
		name += " "
	}
	panic(fmt.Sprintf("%s: operand %s%v was donated (tensor.Donate)", op, name, x))
}

// CacheHits returns how many allocations the allocator cache has served
// since the process started (the storage of every dtype): a figure for
// benchmarks and tests.
func CacheHits() int64 {
	return ReadCacheStats().Hits
}

// Empty returns a tensor of the given dtype and shape whose elements are
// undefined, as numpy.empty: storage recycled from the allocator cache is
// returned as it is (fresh storage is zero). The caller must write every
// element before anyone reads it; kernels that fill a result (a
// collective's output, say) use it to skip zeroing.
func Empty(dt DType, shape ...int) *Tensor {
	checkShape("tensor.Empty", shape)
	if !dt.valid() {
		panic(fmt.Sprintf("tensor.Empty: invalid dtype %v", dt))
	}
	return newOutUninit(dt, shape)
}

// BorrowFloat32 returns the storage of a float32 host tensor without
// copying, like RawFloat32, but without pinning it: the storage may still
// be recycled once the tensor and every view of it are donated, and the
// slice must not be used after that. It is meant for kernels that use the
// slice only during a call (package shard's collectives), so that their
// results and operands can still be donated.
func (t *Tensor) BorrowFloat32() []float32 {
	t.mustDType("Tensor.BorrowFloat32", Float32)
	t.mustHost("Tensor.BorrowFloat32")
	t.mustHaveData("Tensor.BorrowFloat32")
	return t.f32()
}

// BorrowInt32 is BorrowFloat32 for int32 tensors.
func (t *Tensor) BorrowInt32() []int32 {
	t.mustDType("Tensor.BorrowInt32", Int32)
	t.mustHost("Tensor.BorrowInt32")
	t.mustHaveData("Tensor.BorrowInt32")
	return t.i32()
}
