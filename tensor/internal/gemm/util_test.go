package gemm

import "unsafe"

func uintptrOf(x []float32) uintptr { return uintptr(unsafe.Pointer(&x[0])) }
