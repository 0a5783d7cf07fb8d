package f64

import (
	"bufio"
	"compress/gzip"
	"math"
	"math/big"
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// accuracy lists the kernels checked against testdata/ref.txt.gz (exact
// values from mpmath, see testdata/gen_ref.py) with their error bounds in
// ulps of the exact result: the largest errors measured, plus headroom.
// Derivatives that cross zero (absScale) are measured in ulps of
// max(1, |f'(x)|): absolute errors near their zeros.
var accuracy = []struct {
	name     string
	kernel   func(dst, src []float64)
	bound    float64
	absScale bool
}{
	{"exp", Exp, 1, false},
	{"log", Log, 1, false},
	{"tanh", Tanh, 1.5, false},
	{"sigmoid", Sigmoid, 2, false},
	{"silu", Silu, 2, false},
	{"softplus", Softplus, 2, false},
	{"logsigmoid", LogSigmoid, 1.5, false},
	{"gelu", Gelu, 2, false},
	{"gelugrad", GeluGrad, 1.5, true},
	{"silugrad", SiluGrad, 1.5, true},
	{"geluexact", GeluExact, 3, false},
	{"geluexactgrad", GeluExactGrad, 1, true},
}

// minNormal is the smallest normal float64, 2^-1022. Below it results
// have fewer significant bits, and errors are bounded absolutely:
// subnormalBound in units of 2^-1074 (the float32 kernels' doc has the
// same caveat for float32's subnormal range).
const (
	minNormal      = 0x1p-1022
	subnormalBound = 32.0
)

// refLine is one line of the reference file.
type refLine struct {
	name   string
	x, m   float64
	want   *big.Float
	wantIn float64 // want rounded to float64
}

func readRef(t *testing.T) []refLine {
	f, err := os.Open("testdata/ref.txt.gz")
	require.NoError(t, err)
	defer f.Close()
	z, err := gzip.NewReader(f)
	require.NoError(t, err)
	var out []refLine
	sc := bufio.NewScanner(z)
	for sc.Scan() {
		fs := strings.Fields(sc.Text())
		r := refLine{name: fs[0]}
		x, err := strconv.ParseFloat(fs[1], 64)
		require.NoError(t, err, sc.Text())
		r.x = x
		v := fs[2]
		if r.name == "expshift" {
			r.m, err = strconv.ParseFloat(fs[2], 64)
			require.NoError(t, err, sc.Text())
			v = fs[3]
		}
		switch v {
		case "inf":
			r.wantIn = math.Inf(1)
		case "-inf":
			r.wantIn = math.Inf(-1)
		default:
			w, _, err := big.ParseFloat(v, 10, 200, big.ToNearestEven)
			require.NoError(t, err, sc.Text())
			r.want = w
			r.wantIn, _ = w.Float64()
		}
		out = append(out, r)
	}
	require.NoError(t, sc.Err())
	require.Greater(t, len(out), 5000)
	return out
}

// ulpErr returns |got - want| in units of the float64 spacing at scale (a
// float64 near |want|).
func ulpErr(got float64, r refLine, scale float64) float64 {
	if r.want == nil || math.IsInf(got, 0) || math.IsNaN(got) {
		if got == r.wantIn {
			return 0
		}
		return math.Inf(1)
	}
	d := new(big.Float).SetPrec(200).SetFloat64(got)
	d.Sub(d, r.want)
	d.Abs(d)
	e, _ := d.Float64()
	return e / ulp(scale)
}

// ulp returns the spacing of float64 at |y|.
func ulp(y float64) float64 {
	y = math.Abs(y)
	if y < math.SmallestNonzeroFloat64*(1<<52) {
		return math.SmallestNonzeroFloat64
	}
	if math.IsInf(y, 0) {
		return math.Inf(1)
	}
	return math.Nextafter(y, math.Inf(1)) - y
}

// TestAccuracy measures every transcendental kernel against the exact
// values of testdata/ref.txt.gz.
func TestAccuracy(t *testing.T) {
	ref := readRef(t)
	by := map[string][]refLine{}
	for _, r := range ref {
		by[r.name] = append(by[r.name], r)
	}
	for _, a := range accuracy {
		t.Run(a.name, func(t *testing.T) {
			rs := by[a.name]
			require.NotEmpty(t, rs)
			xs := make([]float64, len(rs))
			for i, r := range rs {
				xs[i] = r.x
			}
			got := make([]float64, len(xs))
			a.kernel(got, xs)
			worst, at := 0.0, 0.0
			sub, subAt := 0.0, 0.0 // subnormal results: absolute errors
			for i, r := range rs {
				scale := r.wantIn
				if a.absScale {
					scale = max(1, math.Abs(r.wantIn))
				}
				e := ulpErr(got[i], r, scale)
				if math.Abs(r.wantIn) < minNormal {
					if e > sub || math.IsNaN(e) {
						sub, subAt = e, r.x
					}
				} else if e > worst || math.IsNaN(e) {
					worst, at = e, r.x
				}
			}
			t.Logf("%s: max error %.3f ulp at x = %v (%d inputs); subnormal results: %.0f·2^-1074 at x = %v",
				a.name, worst, at, len(rs), sub, subAt)
			require.LessOrEqual(t, worst, a.bound, "%s at x = %v", a.name, at)
			require.LessOrEqual(t, sub, subnormalBound, "%s at x = %v (subnormal result)", a.name, subAt)
		})
	}
	t.Run("expshift", func(t *testing.T) {
		worst, at := 0.0, [2]float64{}
		for _, r := range by["expshift"] {
			got := make([]float64, 1)
			ExpShift(got, []float64{r.x}, r.m)
			if e := ulpErr(got[0], r, r.wantIn); e > worst {
				worst, at = e, [2]float64{r.x, r.m}
			}
		}
		t.Logf("expshift: max error %.3f ulp at x, m = %v", worst, at)
		require.LessOrEqual(t, worst, 1.5)
	})
}
