package f64

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// kernelDigest is the SHA-256 of every kernel's output on fixed inputs
// (see TestDeterminism). It changes only when a kernel's arithmetic does;
// update it then, after TestAccuracy passes.
const kernelDigest = "b20a76c18770f8006f2839d92f5730f91b9f498713752be9a865999de78e5cb9"

// TestDeterminism checks the package doc's promise that results are the
// same bits on every platform and GOAMD64 level (NaN payloads aside), and
// with -race: the outputs of every
// kernel on fixed inputs hash to kernelDigest. Run it also with
// GOAMD64=v3 (where the compiler may fuse a multiply and an add that are
// not rounded apart) and on other architectures.
func TestDeterminism(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	x := make([]float64, 4000)
	for i := range x {
		x[i] = (rng.Float64()*2 - 1) * math.Exp2(float64(rng.IntN(24)-12))
	}
	x = append(x, specials...)
	y := make([]float64, len(x))
	h := sha256.New()
	put := func(v ...float64) {
		for _, f := range v {
			if f != f {
				f = math.NaN() // NaN payloads may differ (math.FMA's do)
			}
			h.Write(binary.LittleEndian.AppendUint64(nil, math.Float64bits(f)))
		}
	}
	for _, k := range []func(dst, src []float64){Exp, Log, Tanh, Sigmoid, Gelu, GeluGrad, GeluExact,
		GeluExactGrad, Silu, SiluGrad, Softplus, LogSigmoid, Sqrt, Rsqrt} {
		k(y, x)
		put(y...)
	}
	put(ExpShift(y, x, 3), Sum(x), SumSqDiff(x, y), SumExpShift(x, 1))
	put(y...)
	got := hex.EncodeToString(h.Sum(nil))
	require.Equal(t, kernelDigest, got, "kernel outputs changed (or differ on this platform)")
}
