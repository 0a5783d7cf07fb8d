//go:build amd64 && !noasm

package conv

import "github.com/gonox/gonox/internal/kernels"

var (
	avx512Set = &kernelSet{name: "avx512", igemm: igemmAVX512, dot: dotAVX512}
	avx2Set   = &kernelSet{name: "avx2", igemm: igemmAVX2, dot: dotAVX2}
)

// kernelSets lists the sets this machine runs, best first, as package
// kernels allows; the Go set is last.
func kernelSets() []*kernelSet {
	var s []*kernelSet
	if kernels.Has(kernels.AVX512) {
		s = append(s, avx512Set)
	}
	if kernels.Has(kernels.AVX2) {
		s = append(s, avx2Set)
	}
	return append(s, goSet)
}
