//go:build !unix

package nn_test

// cpuSeconds is unavailable here: benchmarks report no CPU-time metric.
func cpuSeconds() float64 { return 0 }
