package gemm

import "testing"

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

func BenchmarkBgemmModes(b *testing.B) {
	const sz = 1024
	ah, af := bf16Matrix(1, sz*sz)
	bh, bf := bf16Matrix(2, sz*sz)
	c := make([]float32, sz*sz)
	flops := 2.0 * sz * sz * sz
	best := bf16Level
	defer func() { bf16Level = best }()
	for rep := 0; rep < 2; rep++ {
		b.Run("f32", func(b *testing.B) {
			for b.Loop() {
				Sgemm(false, false, sz, sz, sz, 1, af, sz, bf, sz, 0, c, sz, 1)
			}
			b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
		})
		for kern := bfWiden; kern <= best; kern++ {
			bf16Level = kern
			b.Run("bf16-"+BF16Kernel(), func(b *testing.B) {
				for b.Loop() {
					Bgemm(false, false, sz, sz, sz, ah, sz, bh, sz, c, sz, 1)
				}
				b.ReportMetric(flops*float64(b.N)/b.Elapsed().Seconds()/1e9, "GFLOP/s")
			})
		}
	}
}
