package vec

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"
)

// kernelSet names a kernel set this machine and build can run and
// switches to it, returning a function that restores the previous one.
type kernelSet struct {
	name string
	set  func() func()
}

// kernelSets lists the sets available: go, then avx2 and avx512 if the
// machine (and $GONOX_KERNELS) allow them.
func kernelSets() []kernelSet {
	sets := []kernelSet{{"go", func() func() { return setAsm(false) }}}
	if hasAVX2() {
		sets = append(sets, kernelSet{"avx2", func() func() {
			r := setAsm(true)
			r2 := setAVX512(false)
			return func() { r2(); r() }
		}})
	}
	if avx512Available {
		sets = append(sets, kernelSet{"avx512", func() func() { return setAsm(true) }})
	}
	return sets
}

// softmaxRows returns rows of every length 0..70 and a few long ones, of
// random logits, with masked (-Inf) keys, rows of nothing but -Inf, rows
// holding +Inf or NaN, and rows of signed zeros.
func softmaxRows(rng *rand.Rand) [][]float32 {
	var rows [][]float32
	lengths := []int{100, 128, 255, 1000, SumBlock + 37}
	for n := range 71 {
		lengths = append(lengths, n)
	}
	inf := float32(math.Inf(1))
	for _, n := range lengths {
		for kind := range 6 {
			if n == 0 && kind > 0 || n > 1000 && kind > 1 {
				continue
			}
			r := make([]float32, n)
			for i := range r {
				r[i] = float32(rng.NormFloat64() * 3)
				switch {
				case kind == 1 && rng.IntN(3) == 0:
					r[i] = -inf // masked key
				case kind == 2:
					r[i] = -inf // a row with every key masked
				case kind == 5:
					r[i] = float32(math.Copysign(0, float64(rng.IntN(2)-1)))
				}
			}
			if n > 0 {
				switch kind {
				case 3:
					r[rng.IntN(n)] = inf
				case 4:
					r[rng.IntN(n)] = math.Float32frombits(0x7fc00000 | rng.Uint32()&0x3fffff) // a NaN with a payload
					r[rng.IntN(n)] = float32(math.NaN())
				}
			}
			rows = append(rows, r)
		}
	}
	return rows
}

// maxLoop is MaxF32's definition: the first NaN, else the first of the
// maximal elements.
func maxLoop(x []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range x {
		if v != v {
			return v
		}
		if v > m {
			m = v
		}
	}
	return m
}

// MaxF32 returns the bits of the loop that defines it under every kernel
// set, NaN payloads and the sign of a zero maximum included.
func TestMaxF32Sets(t *testing.T) {
	rows := softmaxRows(rand.New(rand.NewPCG(7, 8)))
	for _, ks := range kernelSets() {
		restore := ks.set()
		for _, r := range rows {
			require.Equal(t, math.Float32bits(maxLoop(r)), math.Float32bits(MaxF32(r)), "%s: MaxF32 of f32[%d] %v", ks.name, len(r), head(r))
		}
		restore()
	}
}

// ExpShift returns the same exponentials and sum under every kernel set
// (the AVX-512 kernel sums as it stores, in SumF64's order), on rows of
// every length around the vector widths, shifted by their maximum (as
// softmax and attention shift them) and by other values, and within
// 2 ulp of the float64 exponential where that is finite.
func TestExpShiftSets(t *testing.T) {
	rows := softmaxRows(rand.New(rand.NewPCG(9, 10)))
	type result struct {
		d []float32
		s float64
	}
	for _, r := range rows {
		for _, m := range []float32{maxLoop(r), 1.5, -200} {
			var want result
			for i, ks := range kernelSets() {
				restore := ks.set()
				d := make([]float32, len(r)+1)
				d[len(r)] = 42 // ExpShift writes len(src) elements only
				got := result{d, ExpShift(d[:len(r)], r, m)}
				restore()
				require.Equal(t, float32(42), d[len(r)], "%s wrote past the row", ks.name)
				if i == 0 {
					want = got
					checkExpShift(t, r, m, d[:len(r)])
					continue
				}
				where := fmt.Sprintf("%s: ExpShift(f32[%d] %v, %g)", ks.name, len(r), head(r), m)
				requireSameBits(t, want.d, got.d, where)
				require.Equal(t, f64Bits(want.s), f64Bits(got.s), "%s: sum", where)
				require.Equal(t, f64Bits(got.s), f64Bits(sumUnder(r, m, ks)), "%s: SumExpShift", where)
			}
		}
	}
}

// sumUnder is SumExpShift under kernel set ks.
func sumUnder(r []float32, m float32, ks kernelSet) float64 {
	defer ks.set()()
	return SumExpShift(r, m)
}

// f64Bits returns the bits of x, one pattern for every NaN.
func f64Bits(x float64) uint64 {
	if x != x {
		return 0x7ff8000000000000
	}
	return math.Float64bits(x)
}

// checkExpShift compares ExpShift's values with the float64 e^(x-m): NaN
// for a NaN operand, 0 for x = -Inf, within 2 ulp (or below the smallest
// normal) elsewhere but for overflow.
func checkExpShift(t *testing.T, r []float32, m float32, d []float32) {
	t.Helper()
	for i, x := range r {
		want := math.Exp(float64(x) - float64(m))
		var ok bool
		switch {
		case math.IsNaN(want):
			ok = d[i] != d[i]
		case math.IsInf(float64(x), -1):
			ok = d[i] == 0
		case want > math.MaxFloat32:
			// Overflow gives +Inf or NaN (e·err + e with e = +Inf): out of
			// the softmax's range, where m >= x.
			ok = m < x
		case want < 0x1p-126:
			ok = math.Abs(float64(d[i])-want) <= 0x1p-126
		default:
			ulp := math.Abs(float64(math.Nextafter32(float32(want), float32(math.Inf(1))) - float32(want)))
			ok = math.Abs(float64(d[i])-want) <= 2*ulp
		}
		if !ok {
			require.Fail(t, "ExpShift", "e^(%g - %g) = %g, want %g", x, m, d[i], want)
		}
	}
}

func requireSameBits(t *testing.T, want, got []float32, where string) {
	t.Helper()
	require.Len(t, got, len(want), where)
	for i := range want {
		if want[i] != want[i] && got[i] != got[i] {
			continue
		}
		if math.Float32bits(want[i]) != math.Float32bits(got[i]) {
			require.Equal(t, math.Float32bits(want[i]), math.Float32bits(got[i]), "%s at %d", where, i)
		}
	}
}

func head(r []float32) []float32 { return r[:min(len(r), 8)] }

// BenchmarkSoftmaxRow times MaxF32, SumExpShift and ExpShift (with its sum) on an
// attention block's row (128) and a longer one, and DotF64 on a head's
// row (32), under each kernel set.
func BenchmarkSoftmaxRow(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{128, 4096} {
		src := make([]float32, n)
		for i := range src {
			src[i] = float32(rng.NormFloat64() * 3)
		}
		dst := make([]float32, n)
		m := maxLoop(src)
		for _, ks := range kernelSets() {
			b.Run(fmt.Sprintf("MaxF32/n=%d/%s", n, ks.name), func(b *testing.B) {
				defer ks.set()()
				for b.Loop() {
					MaxF32(src)
				}
				b.ReportMetric(float64(4*n*b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			b.Run(fmt.Sprintf("DotF64/n=%d/%s", n/4, ks.name), func(b *testing.B) {
				defer ks.set()()
				for b.Loop() {
					DotF64(src[:n/4], dst[:n/4])
				}
				b.ReportMetric(float64(2*n*b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			b.Run(fmt.Sprintf("SumExpShift/n=%d/%s", n, ks.name), func(b *testing.B) {
				defer ks.set()()
				for b.Loop() {
					SumExpShift(src, m)
				}
				b.ReportMetric(float64(4*n*b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
			b.Run(fmt.Sprintf("ExpShift/n=%d/%s", n, ks.name), func(b *testing.B) {
				defer ks.set()()
				for b.Loop() {
					ExpShift(dst, src, m)
				}
				b.ReportMetric(float64(8*n*b.N)/b.Elapsed().Seconds()/1e9, "GB/s")
			})
		}
	}
}

// dotLanes is DotF64's definition: product i in lane i mod 8 of its
// block, the lanes combined as SumF64 combines them, the blocks in order.
func dotLanes(a, b []float32) float64 {
	s := 0.0
	for start := 0; start < len(a) || start == 0; start += SumBlock {
		var l [8]float64
		for i := start; i < min(start+SumBlock, len(a)); i++ {
			l[(i-start)%8] += float64(a[i]) * float64(b[i])
		}
		s += ((l[0] + l[4]) + (l[1] + l[5])) + ((l[2] + l[6]) + (l[3] + l[7]))
	}
	return s
}

// DotF64 (attention's backward dots a cotangent row with an output row)
// returns its definition's bits under every kernel set, on rows of every
// length 0..70 and long ones, with infinities and NaNs.
func TestDotF64Sets(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 12))
	rows := softmaxRows(rng)
	for _, ks := range kernelSets() {
		restore := ks.set()
		for _, a := range rows {
			b := make([]float32, len(a)+1) // longer than a: DotF64 reads len(a)
			for i := range b {
				b[i] = float32(rng.NormFloat64())
			}
			require.Equal(t, f64Bits(dotLanes(a, b)), f64Bits(DotF64(a, b)), "%s: DotF64 of f32[%d] %v", ks.name, len(a), head(a))
		}
		restore()
	}
	require.Equal(t, 1*4.0+2*5+3*6, DotF64([]float32{1, 2, 3}, []float32{4, 5, 6}))
}
