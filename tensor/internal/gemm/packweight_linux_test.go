package gemm

import (
	"runtime"
	"syscall"
	"testing"
	"time"
	"unsafe"
)

// threadCPU is the calling thread's CPU time (CLOCK_THREAD_CPUTIME_ID,
// exact where getrusage counts clock ticks); the caller locks its
// goroutine to the thread.
func threadCPU(b *testing.B) time.Duration {
	const clockThreadCPUTime = 3
	var ts syscall.Timespec
	if _, _, errno := syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockThreadCPUTime, uintptr(unsafe.Pointer(&ts)), 0); errno != 0 {
		b.Fatal(errno)
	}
	return time.Duration(ts.Nano())
}

// BenchmarkPackWeight measures what packing a 1024×1024 weight W costs the
// batch-256 MLP step twice a step, against a copy of the same bytes: "B"
// packs it as the forward X·W does (four 256-row blocks of nr-wide strips,
// row by row: packB32 on AVX-512), "BT" as dY·Wᵀ does (the same blocks of
// op(B) = Wᵀ, each strip a transpose of nr rows of W: transpose8),
// "copy" copies each block's 1 MiB unchanged. Before each pass a 16 MiB
// sweep pushes W (4 MiB) out of L2 into L3, where the step finds it; the
// figure is the thread's CPU time of the pass alone (cpu-µs/op) and W's
// bytes per CPU-second.
func BenchmarkPackWeight(b *testing.B) {
	const n, kc = 1024, 256
	ks := active
	w := alignedFloats[float32](n * n)
	for i := range w {
		w[i] = float32(i)
	}
	sweep := make([]float32, 4<<20)
	packed := alignedFloats[float32](kc * n)
	strips := n / ks.nr
	pB := &problem[float32]{m: 256, n: n, k: n, b: w, ldb: n}
	pBT := &problem[float32]{m: 256, n: n, k: n, b: w, ldb: n, transB: true}
	for _, c := range []struct {
		name string
		pass func()
	}{
		{"B", func() {
			for pc := 0; pc < n; pc += kc {
				ks.packBStrips(packed, pB, pc, kc, 0, n, 0, strips)
			}
		}},
		{"BT", func() {
			for pc := 0; pc < n; pc += kc {
				ks.packBStrips(packed, pBT, pc, kc, 0, n, 0, strips)
			}
		}},
		{"copy", func() {
			for pc := 0; pc < n; pc += kc {
				copy(packed, w[pc*n:(pc+kc)*n])
			}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			runtime.LockOSThread() // threadCPU reads this thread's clock
			defer runtime.UnlockOSThread()
			var used time.Duration
			for b.Loop() {
				for i := 0; i < len(sweep); i += 16 {
					sweep[i]++
				}
				t0 := threadCPU(b)
				c.pass()
				used += threadCPU(b) - t0
			}
			if used > 0 {
				b.ReportMetric(used.Seconds()/float64(b.N)*1e6, "cpu-µs/op")
				b.ReportMetric(float64(n*n*4*b.N)/used.Seconds()/1e9, "GB/cpu-s")
			}
		})
	}
}
