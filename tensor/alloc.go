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
