package tensor

import "unsafe"

// hugeThreshold is the size from which tensor storage asks the kernel for
// transparent huge pages: the first touch of a large fresh buffer then
// takes a few 2 MiB page faults instead of thousands of 4 KiB ones, which
// on virtual machines costs as much as the computation that fills it.
const hugeThreshold = 8 << 20

// makeFloat32 allocates zeroed float32 storage.
func makeFloat32(n int) []float32 {
	s := make([]float32, n)
	if n*4 >= hugeThreshold {
		adviseHuge(unsafe.Pointer(unsafe.SliceData(s)), n*4)
	}
	return s
}

// makeInt32 allocates zeroed int32 storage.
func makeInt32(n int) []int32 {
	s := make([]int32, n)
	if n*4 >= hugeThreshold {
		adviseHuge(unsafe.Pointer(unsafe.SliceData(s)), n*4)
	}
	return s
}

// tensorBox holds a tensor header and its shape in one allocation.
type tensorBox struct {
	t    Tensor
	dims [4]int
}

// newOut allocates a zeroed result tensor like newTensor, with the header
// and a shape of rank up to 4 in one allocation (and the data in a
// second): op results are the most frequent allocation of a training step.
func newOut(dt DType, shape []int) *Tensor {
	if len(shape) > len(tensorBox{}.dims) {
		return newTensor(dt, shape)
	}
	box := &tensorBox{}
	n := copy(box.dims[:], shape)
	t := &box.t
	t.dtype, t.shape = dt, box.dims[:n:n]
	t.allocData("tensor", numel(shape))
	return t
}
