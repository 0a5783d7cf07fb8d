//go:build !amd64 || noasm

package shard

var useAVX2 = false

// sum8Asm is sum8's assembly kernel: none off amd64 or with noasm.
func sum8Asm(d []float32, g [][]float32, first bool) int { return 0 }
