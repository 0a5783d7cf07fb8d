//go:build !linux && !noasm

package gemm

// amxPermitted reports false: gonox asks only Linux for the AMX state.
func amxPermitted() bool { return false }
