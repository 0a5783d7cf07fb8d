package vec

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gonox/gonox/internal/kernels"
	"github.com/stretchr/testify/require"
)

// The AVX-512 GELU kernels return the AVX2 kernels' bits (which are the
// pure-Go code's, TestAsmMatchesGo) on random bit patterns, a sweep and
// the special values, at every length around the 32-element stride.
func TestGeluAVX512MatchesAVX2(t *testing.T) {
	require.Equal(t, kernels.Active() >= kernels.AVX512, useAVX512, "kernel set %v", kernels.Active())
	if !avx512Available {
		t.Skip("no AVX-512 kernels on this machine or build")
	}
	rng := rand.New(rand.NewPCG(3, 4))
	xs := sweep(stride() * 4)
	for range 1 << 14 {
		xs = append(xs, math.Float32frombits(rng.Uint32()), float32(rng.NormFloat64()*4))
	}
	xs = append(xs, specials...)
	for _, f := range []struct {
		name string
		f    func(dst, src []float32)
	}{{"Gelu", Gelu}, {"GeluGrad", GeluGrad}} {
		for _, n := range []int{len(xs), 31, 32, 33, 63, 64, 65, 100} {
			run := func(on bool) []float32 {
				defer setAVX512(on)()
				d := make([]float32, n)
				f.f(d, xs[len(xs)-n:])
				return d
			}
			a, b := run(true), run(false)
			for i := range a {
				if a[i] != a[i] && b[i] != b[i] {
					continue
				}
				require.Equal(t, math.Float32bits(b[i]), math.Float32bits(a[i]), "%s n=%d at %d: x = %g", f.name, n, i, xs[len(xs)-n+i])
			}
		}
	}
}

func BenchmarkGelu(b *testing.B) {
	src := make([]float32, 1<<16)
	for i := range src {
		src[i] = float32(i%400)/40 - 5
	}
	dst := make([]float32, len(src))
	for _, f := range []struct {
		name string
		f    func(dst, src []float32)
	}{{"Gelu", Gelu}, {"GeluGrad", GeluGrad}} {
		for _, on := range []bool{false, true} {
			name := f.name + "/avx2"
			if on {
				name = f.name + "/avx512"
			}
			b.Run(name, func(b *testing.B) {
				defer setAVX512(on)()
				for b.Loop() {
					f.f(dst, src)
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(src)), "ns/elem")
			})
		}
	}
}
