//go:build !amd64 || noasm

package gemm

// archSets lists the assembly kernel sets this machine can run: none in a
// noasm build or off amd64.
func archSets() []*kernelSet { return nil }
