package tensor

import "unsafe"

// hugeThreshold is the size from which tensor storage asks the kernel for
// transparent huge pages: the first touch of a large fresh buffer then
// takes a few 2 MiB page faults instead of thousands of 4 KiB ones, which
// on virtual machines costs as much as the computation that fills it.
const hugeThreshold = 8 << 20

// tensorBox holds a tensor header, its shape and the holder count of its
// storage in one allocation.
type tensorBox struct {
	t    Tensor
	dims [4]int
	rec  storageRec
}

// newOut allocates a zeroed result tensor like newTensor, with the header
// and a shape of rank up to 4 in one allocation (and the data in a
// second): op results are the most frequent allocation of a training step.
func newOut(dt DType, shape []int) *Tensor {
	t := newHeader(dt, shape)
	t.allocData("tensor", numel(shape), true)
	return t
}

// newOutUninit is newOut for results whose op writes every element:
// storage recycled from the cache is not zeroed.
func newOutUninit(dt DType, shape []int) *Tensor {
	t := newHeader(dt, shape)
	t.allocData("tensor", numel(shape), false)
	return t
}

// newHeader returns a header of the given dtype and shape with no data
// yet, and a holder count of one for the storage the caller gives it.
func newHeader(dt DType, shape []int) *Tensor {
	if len(shape) > len(tensorBox{}.dims) {
		return newHeaderOwnShape(dt, shape)
	}
	return (&tensorBox{}).header(dt, shape)
}

// header makes box's header that of a dt tensor of the given shape (rank
// up to len(box.dims), kept in box: callers check) with no data yet, and a
// holder count of one for the storage the caller gives it.
func (box *tensorBox) header(dt DType, shape []int) *Tensor {
	n := copy(box.dims[:], shape)
	t := &box.t
	t.dtype, t.shape, t.rec = dt, box.dims[:n:n], &box.rec
	box.rec.initRefs()
	return t
}

// initRefs sets the holder count of a record nobody else reaches yet (just
// allocated) to one, with a plain store: an atomic one, an XCHG on amd64,
// waits until every store before it has left the core's store buffer, and
// a header is often made just after a kernel wrote its result or the
// allocator zeroed memory (in the batch-16 MLP step the waits at the
// headers of dense's results and gradients were ~1 % of the step's CPU).
// Whoever receives the header later does so through a synchronising
// operation, which orders this store before its atomic ones.
func (r *storageRec) initRefs() {
	*(*int32)(unsafe.Pointer(&r.refs)) = 1 // atomic.Int32 is its int32
}

// newHeaderOwnShape is newHeader for a shape of rank above
// len(tensorBox{}.dims), in an allocation of its own.
func newHeaderOwnShape(dt DType, shape []int) *Tensor {
	{
		box := &struct {
			t   Tensor
			rec storageRec
		}{}
		t := &box.t
		t.dtype, t.shape, t.rec = dt, append([]int(nil), shape...), &box.rec
		box.rec.initRefs()
		return t
	}
}
