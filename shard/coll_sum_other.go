//go:build !amd64 || noasm

package shard

var useAVX2 = false

// sumAsm is the assembly kernel of sum8, sum4 and sum2: none off amd64 or
// with noasm.
func sumAsm(d []float32, g [][]float32, first bool) int { return 0 }
