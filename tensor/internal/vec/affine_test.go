package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// kernelMode is one kernel set this machine runs, as switches.
type kernelMode struct {
	name        string
	asm, avx512 bool
}

// kernelModes are the kernel sets this machine runs: the pure-Go loops,
// AVX2, and AVX2 with AVX-512.
func kernelModes() []kernelMode {
	m := []kernelMode{{"go", false, false}}
	if hasAVX2() {
		m = append(m, kernelMode{"avx2", true, false})
	}
	if avx512Available {
		m = append(m, kernelMode{"avx512", true, true})
	}
	return m
}

// affineOperands returns n-element operands with random bit patterns,
// normal values, zeros of both signs and the special values mixed in.
func affineOperands(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		switch rng.IntN(8) {
		case 0:
			v[i] = math.Float32frombits(rng.Uint32())
		case 1:
			v[i] = specials[rng.IntN(len(specials))]
		case 2:
			v[i] = float32(math.Copysign(0, rng.NormFloat64()))
		default:
			v[i] = float32(rng.NormFloat64() * 3)
		}
	}
	return v
}

// sameAffineBits requires got to equal want bit for bit (any NaN matches any NaN).
func sameAffineBits(t *testing.T, want, got []float32, msg string) {
	t.Helper()
	for i := range want {
		if want[i] != want[i] && got[i] != got[i] {
			continue
		}
		require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s at %d: want %g, got %g", msg, i, want[i], got[i])
	}
}

// AffineRow and Affine2Row return, on every kernel set and at lengths
// around the 16-lane step, the bits of the scalar formulas they document
// (each product and sum rounded), in place too.
func TestAffineRowsMatchFormula(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const s, a = float32(1.7), float32(-2.25)
	negZero := float32(math.Copysign(0, -1))
	for _, mode := range kernelModes() {
		for _, b := range []float32{-0.3, negZero} { // -0: sums of -0 that relu turns into +0
			for _, n := range []int{0, 1, 7, 8, 15, 16, 17, 31, 32, 33, 63, 100, 1029} {
				x, r, g, y := affineOperands(rng, n), affineOperands(rng, n), affineOperands(rng, n), affineOperands(rng, n)
				for _, res := range []bool{false, true} {
					for _, relu := range []bool{false, true} {
						name := fmt.Sprintf("%s/b=%g/n=%d/res=%v/relu=%v", mode.name, b, n, res, relu)
						want := make([]float32, n)
						for i := range want {
							v := float32(x[i]*s) + b
							if res {
								v += r[i]
							}
							if relu {
								v = max(v, 0)
							}
							want[i] = v
						}
						var rr []float32
						if res {
							rr = r
						}
						got := make([]float32, n)
						inPlace := append([]float32(nil), x...)
						func() {
							defer setAsm(mode.asm)()
							defer setAVX512(mode.avx512)()
							AffineRow(got, x, s, b, rr, relu)
							AffineRow(inPlace, inPlace, s, b, rr, relu)
						}()
						sameAffineBits(t, want, got, "AffineRow "+name)
						sameAffineBits(t, want, inPlace, "AffineRow in place "+name)
					}
				}
				for _, masked := range []bool{false, true} {
					name := fmt.Sprintf("%s/b=%g/n=%d/masked=%v", mode.name, b, n, masked)
					want := make([]float32, n)
					for i := range want {
						gz := g[i]
						if masked && !(y[i] > 0) {
							gz = 0
						}
						want[i] = float32(float32(gz*a)+float32(x[i]*s)) + b
					}
					var yy []float32
					if masked {
						yy = y
					}
					got := make([]float32, n)
					onG, onX := append([]float32(nil), g...), append([]float32(nil), x...)
					func() {
						defer setAsm(mode.asm)()
						defer setAVX512(mode.avx512)()
						Affine2Row(got, g, yy, x, a, s, b)
						Affine2Row(onG, onG, yy, x, a, s, b)
						Affine2Row(onX, g, yy, onX, a, s, b)
					}()
					sameAffineBits(t, want, got, "Affine2Row "+name)
					sameAffineBits(t, want, onG, "Affine2Row into g "+name)
					sameAffineBits(t, want, onX, "Affine2Row into x "+name)
				}
			}
		}
	}
}
