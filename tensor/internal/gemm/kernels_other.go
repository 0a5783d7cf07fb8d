//go:build !amd64 || noasm

package gemm

// archSets lists the assembly kernel sets this machine can run: none in a
// noasm build or off amd64.
func archSets() []*kernelSet[float32] { return nil }

// archSets64 is archSets for the float64 kernels.
func archSets64() []*kernelSet[float64] { return nil }
