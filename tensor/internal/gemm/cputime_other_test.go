//go:build !unix

package gemm

// cpuSeconds is unavailable here: benchmarks report no CPU-time metric.
func cpuSeconds() float64 { return 0 }
