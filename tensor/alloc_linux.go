package tensor

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// adviseHuge marks the 2 MiB-aligned interior of a fresh buffer for
// transparent huge pages (madvise MADV_HUGEPAGE). Failure is harmless.
func adviseHuge(p unsafe.Pointer, bytes int) {
	const huge = 2 << 20
	start := (uintptr(p) + huge - 1) &^ (huge - 1)
	end := (uintptr(p) + uintptr(bytes)) &^ (huge - 1)
	if end <= start {
		return
	}
	b := unsafe.Slice((*byte)(unsafe.Add(p, start-uintptr(p))), end-start)
	_ = unix.Madvise(b, unix.MADV_HUGEPAGE)
}
