package gemm

import (
	"slices"
	"testing"
	"time"
)

func BenchmarkBF16KernelOnly(b *testing.B) {
	if bf16Level < bfAVX512 {
		b.Skip("no BF16 kernel")
	}
	kp := 256
	a := make([]uint32, kp*bfMR)
	bb := make([]uint32, kp*bfNR)
	c := make([]float32, bfMR*bfNR)
	for b.Loop() {
		bf16Kernel12x32(kp, &a[0], &bb[0], &c[0], bfNR, 0)
	}
	b.ReportMetric(float64(2*bfMR*bfNR*2*kp)*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
}

// BenchmarkBgemmModes runs 1024³ products single-threaded with Sgemm and
// with each Bgemm kernel this machine has, alternating them within every
// iteration so that all see the same load, and reports each one's median
// GFLOP/s and its speed-up over Sgemm.
func BenchmarkBgemmModes(b *testing.B) {
	const sz = 1024
	ah, af := bf16Matrix(1, sz*sz)
	bh, bf := bf16Matrix(2, sz*sz)
	c := make([]float32, sz*sz)
	flops := 2.0 * sz * sz * sz
	best := bf16Level
	defer func() { bf16Level = best }()
	times := make([][]float64, best+2) // [0]: Sgemm, [1+level]: Bgemm
	for b.Loop() {
		t0 := time.Now()
		Sgemm(false, false, sz, sz, sz, 1, af, sz, bf, sz, 0, c, sz, 1)
		times[0] = append(times[0], time.Since(t0).Seconds())
		for lv := bfWiden; lv <= best; lv++ {
			bf16Level = lv
			t0 := time.Now()
			Bgemm(false, false, sz, sz, sz, ah, sz, bh, sz, c, sz, 1)
			times[1+lv] = append(times[1+lv], time.Since(t0).Seconds())
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		return s[len(s)/2]
	}
	m32 := median(times[0])
	b.ReportMetric(flops/m32/1e9, "f32-GFLOP/s")
	for lv := bfWiden; lv <= best; lv++ {
		bf16Level = lv
		m := median(times[1+lv])
		b.ReportMetric(flops/m/1e9, BF16Kernel()+"-GFLOP/s")
		b.ReportMetric(m32/m, BF16Kernel()+"-speedup")
	}
}
