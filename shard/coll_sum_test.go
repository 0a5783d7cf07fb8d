package shard

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"runtime"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/kernels"
)

func TestSumFloat32(t *testing.T) {
	for _, g := range []int{1, 2, 3, 4, 5, 7, 8, 9, 11, 16, 19} {
		r := rand.New(rand.NewPCG(uint64(g), 9))
		ins := make([][]float32, g)
		for k := range ins {
			ins[k] = make([]float32, 41)
			for i := range ins[k] {
				ins[k][i] = float32(r.NormFloat64())
			}
		}
		for _, span := range [][2]int{{0, 41}, {3, 29}, {7, 7}} {
			lo, hi := span[0], span[1]
			want := make([]float64, hi-lo)
			for _, in := range ins {
				for i := lo; i < hi; i++ {
					want[i-lo] += float64(in[i])
				}
			}
			dst := make([]float32, hi-lo)
			for i := range dst {
				dst[i] = 999 // must be overwritten
			}
			sumFloat32(dst, ins, lo, hi)
			got := make([]float64, len(dst))
			for i, v := range dst {
				got[i] = float64(v)
			}
			assert.InDeltaSlice(t, want, got, 1e-5, "g=%d span=%v", g, span)
		}
	}
}

// BenchmarkSumKernel measures the memory bandwidth of psum's reduction
// alone: 8 inputs of 64 MiB summed into one output on every core (bytes
// read and written per second). It is the ceiling of BenchmarkPsum64MiB.
func BenchmarkSumKernel(b *testing.B) {
	const n = 64 << 20 / 4
	ins := make([][]float32, 8)
	for i := range ins {
		ins[i] = make([]float32, n)
		for j := range ins[i] {
			ins[i][j] = 1
		}
	}
	dst := make([]float32, n)
	workers := runtime.GOMAXPROCS(0)
	run := func() {
		var wg sync.WaitGroup
		for w := range workers {
			lo, hi := n*w/workers, n*(w+1)/workers
			wg.Add(1)
			go func() {
				defer wg.Done()
				sumFloat32(dst[lo:hi], ins, lo, hi)
			}()
		}
		wg.Wait()
	}
	run()
	b.ResetTimer()
	for b.Loop() {
		run()
	}
	b.ReportMetric(float64(9*n*4)/(b.Elapsed().Seconds()/float64(b.N))/1e9, "GB/s")
}

// The assembly kernels give the bits of the Go loops, for every length
// (the two-stream kernel's four-vector turns from 32 elements) and for the
// first group and the later ones (16 inputs: two groups of 8; 14: groups
// of 8, 4 and 2; 6: 4 and 2).
func TestSumFloat32AsmMatchesGo(t *testing.T) {
	if !useAVX2 {
		t.Skip("no AVX2 kernel on this machine")
	}
	r := rand.New(rand.NewPCG(5, 6))
	lengths := []int{63, 64, 100, 257}
	for n := range 41 {
		lengths = append(lengths, n)
	}
	for _, g := range []int{2, 4, 6, 8, 14, 16} {
		for _, n := range lengths {
			ins := make([][]float32, g)
			for k := range ins {
				ins[k] = make([]float32, n)
				for i := range ins[k] {
					ins[k][i] = float32(r.NormFloat64() * 1e3)
				}
			}
			var outs [2][]float32
			for j, asm := range []bool{false, true} {
				useAVX2 = asm
				outs[j] = make([]float32, n)
				sumFloat32(outs[j], ins, 0, n)
			}
			useAVX2 = true
			assert.Equal(t, outs[0], outs[1], "g=%d n=%d", g, n)
		}
	}
}

// The reduction kernel follows GONOX_KERNELS as tensor's kernels do: this
// test binary, started again with each kernel set the machine runs,
// reports whether it sums with the AVX2 kernel; only the avx2 and avx512
// sets may (GONOX_KERNELS=go is the Go loop, as is a noasm build).
func TestSumKernelFollowsKernelSet(t *testing.T) {
	const child = "GONOX_TEST_SUM_KERNEL"
	if os.Getenv(child) == "1" {
		fmt.Printf("useAVX2=%v\n", useAVX2)
		return
	}
	if os.Getenv("OMPI_COMM_WORLD_SIZE") != "" {
		t.Skip("under mpirun: a child process would join the job")
	}
	for _, set := range kernels.Supported() {
		cmd := exec.Command(os.Args[0], "-test.run=^TestSumKernelFollowsKernelSet$", "-test.v")
		cmd.Env = append(os.Environ(), child+"=1", kernels.Env+"="+set.String())
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		want := set >= kernels.AVX2
		assert.Contains(t, string(out), fmt.Sprintf("useAVX2=%v\n", want), "GONOX_KERNELS=%v", set)
	}
}
