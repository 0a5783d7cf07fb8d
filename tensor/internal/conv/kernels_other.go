//go:build !amd64 || noasm

package conv

// kernelSets lists the sets this build runs: the Go set only.
func kernelSets() []*kernelSet { return []*kernelSet{goSet} }
