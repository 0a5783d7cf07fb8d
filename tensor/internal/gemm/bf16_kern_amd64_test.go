//go:build amd64 && !noasm

package gemm

import (
	"testing"

	"github.com/gonox/gonox/internal/cputime"
)

// BenchmarkBF16KernelOnly runs the 12×32 VDPBF16PS micro-kernel on a
// packed A panel and B strip of 256 pairs (in L1), alternating with the
// 12×32 float32 kernel on 256 k steps of the same bytes, and reports
// both rates per CPU-second: the ceiling of each path.
func BenchmarkBF16KernelOnly(b *testing.B) {
	if bf16Level < bfAVX512 || active.name != "avx512" {
		b.Skip("no BF16 kernel")
	}
	const kp, reps = 256, 200
	a := make([]float32, kp*12)
	bb := make([]float32, kp*32)
	c := make([]float32, 12*32)
	k16, k32 := bf16Kernels[flavC][1][12], avx512Kernels[flavC][1][12]
	var t16, t32 []float64
	for b.Loop() {
		t0 := cputime.Used()
		for range reps {
			k16(kp, &a[0], 12, &bb[0], 32, &c[0], 32, 1, 0, 32)
		}
		t1 := cputime.Used()
		for range reps {
			k32(kp, &a[0], 12, &bb[0], 32, &c[0], 32, 1, 0, 32)
		}
		t16 = append(t16, (t1 - t0).Seconds())
		t32 = append(t32, (cputime.Used() - t1).Seconds())
	}
	flops := 2.0 * 12 * 32 * kp * reps
	b.ReportMetric(2*flops/medianOf(t16)/1e9, "bf16-GFLOP/cpu-s")
	b.ReportMetric(flops/medianOf(t32)/1e9, "f32-GFLOP/cpu-s")
}
