package tensor

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// threadCPU is the calling thread's CPU time (RUSAGE_THREAD).
func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_THREAD, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkAttnBF16Load times attention's bf16 operand pass (load, forward
// and backward) over examples/moe's shapes (batch 32, context 64, 4 heads of
// 32), operands 1 MiB each, against a plain copy of the same float32 bytes
// into a per-batch buffer (the memory bound of one read of each operand).
// Between passes a 256 MiB sweep evicts the operands from the caches, as the rest
// of a training step does; cpu-ns/op is the thread's CPU time of the timed
// part only (the machine is shared: wall time is not the figure).
//
//	go test ./tensor -run '^$' -bench AttnBF16Load -cpu 1
func BenchmarkAttnBF16Load(b *testing.B) {
	const B, T, N, H = 32, 64, 4, 32
	d := attnDims{B: B, T: T, S: T, N: N, H: H, V: H, ldq: N * H, ldv: N * H}
	mk := func() []float32 {
		x := make([]float32, B*T*N*H)
		for i := range x {
			x[i] = float32(i%97) * 0.25
		}
		return x
	}
	x := attnF32{q: mk(), k: mk(), v: mk(), g: mk()}
	evict := make([]byte, 256<<20) // pushes the operands out of the caches between passes
	var cpu time.Duration
	flush := func(b *testing.B) {
		cpu += threadCPU()
		b.StopTimer()
		for i := 0; i < len(evict); i += 64 {
			evict[i]++
		}
		b.StartTimer()
		cpu -= threadCPU()
	}
	report := func(b *testing.B) {
		cpu += threadCPU()
		b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
	}
	for _, c := range []struct {
		name string
		bwd  bool
	}{{"forward", false}, {"backward", true}} {
		b.Run(c.name+"/load", func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu = -threadCPU()
			for b.Loop() {
				flush(b)
				a := newAttnBF16(&d, x, c.bwd)
				for bb := range B {
					a.load(bb)
				}
				a.release()
			}
			report(b)
		})
		b.Run(c.name+"/copy", func(b *testing.B) {
			buf := make([]float32, 4*T*N*H)
			ops := [][]float32{x.q, x.k, x.v}
			if c.bwd {
				ops = append(ops, x.g)
			}
			w := T * N * H
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			cpu = -threadCPU()
			for b.Loop() {
				flush(b)
				for bb := range B {
					for i, o := range ops {
						copy(buf[i*w:(i+1)*w], o[bb*w:(bb+1)*w])
					}
				}
			}
			report(b)
		})
	}
}
