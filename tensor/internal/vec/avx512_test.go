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

// GeluParts returns Gelu's and GeluGrad's bits, with and without the
// AVX-512 kernel, at lengths around its 32-element stride.
func TestGeluPartsMatches(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	xs := sweep(stride() * 4)
	for range 1 << 14 {
		xs = append(xs, math.Float32frombits(rng.Uint32()), float32(rng.NormFloat64()*4))
	}
	xs = append(xs, specials...)
	same := func(name string, a, b []float32) {
		t.Helper()
		for i := range a {
			if a[i] != a[i] && b[i] != b[i] {
				continue
			}
			require.Equal(t, math.Float32bits(b[i]), math.Float32bits(a[i]), "%s at %d: x = %g", name, i, xs[len(xs)-len(a)+i])
		}
	}
	for _, on := range []bool{false, true} {
		for _, n := range []int{len(xs), 31, 32, 33, 70} {
			restore := setAVX512(on)
			src := xs[len(xs)-n:]
			h, d := make([]float32, n), make([]float32, n)
			GeluParts(h, d, src)
			wh, wd := make([]float32, n), make([]float32, n)
			Gelu(wh, src)
			GeluGrad(wd, src)
			restore()
			same("h", wh, h)
			same("d", wd, d)
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
