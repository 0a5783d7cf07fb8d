package conv

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/testlong"
)

// refWindows calls f(o, k, xi) for every output o, window index k
// (row-major over the window's dimensions) and the input element xi it
// reads, from the definition in Window's doc, in the order of k.
func refWindows(w *Window, f func(o, k, xi int)) {
	r := len(w.Shape)
	out := w.Out()
	size := func(v []int) int {
		s := 1
		for _, x := range v {
			s *= x
		}
		return s
	}
	ks := make([]int, r)
	for d := range ks {
		if w.AdaptiveOut != nil {
			for t := 0; t < out[d]; t++ {
				ks[d] = max(ks[d], (t+1)*w.Shape[d]/out[d]+btoi((t+1)*w.Shape[d]%out[d] != 0)-t*w.Shape[d]/out[d])
			}
		} else {
			ks[d] = w.Size[d]
		}
	}
	pos, kk := make([]int, r), make([]int, r)
	for o := 0; o < size(out); o++ {
		unflat(pos, o, out)
		for k := 0; k < size(ks); k++ {
			unflat(kk, k, ks)
			xi, ok := 0, true
			for d := 0; d < r && ok; d++ {
				var i int
				if w.AdaptiveOut != nil {
					lo := pos[d] * w.Shape[d] / out[d]
					hi := ((pos[d]+1)*w.Shape[d] + out[d] - 1) / out[d]
					i = lo + kk[d]
					ok = i < hi
				} else {
					i = pos[d]*at(w.Stride, d, 1) + kk[d]*at(w.Dilation, d, 1) - at(w.PadLo, d, 0)
					ok = i >= 0 && i < w.Shape[d]
				}
				xi = xi*w.Shape[d] + i
			}
			if ok {
				f(o, k, xi)
			}
		}
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func checkWindow(t *testing.T, rng *rand.Rand, w *Window) {
	t.Helper()
	require.NoError(t, w.Check(), "%+v", w)
	nx := 1
	for _, n := range w.Shape {
		nx *= n
	}
	ny := 1
	for _, n := range w.Out() {
		ny *= n
	}
	x := randSlice(rng, nx)
	// Ties and specials: repeat values, and put in a NaN sometimes.
	for i := range x {
		if rng.IntN(4) == 0 && i > 0 {
			x[i] = x[rng.IntN(i)]
		}
	}
	if nx > 0 && rng.IntN(3) == 0 {
		x[rng.IntN(nx)] = float32(math.NaN())
	}
	dy, ddx := randSlice(rng, ny), randSlice(rng, nx)

	// Reference: max (first maximum; NaN wins, its last), arg, sums.
	wantY := make([]float64, ny)
	wantArg := make([]int, ny)
	wantXi := make([]int, ny)
	wantSum := make([]float64, ny)
	wantSumT := make([]float64, nx)
	count := make([]int, ny)
	for o := range wantY {
		wantY[o], wantArg[o], wantXi[o] = math.Inf(-1), -1, -1
	}
	refWindows(w, func(o, k, xi int) {
		v := float64(x[xi])
		// The first maximum; with NaNs, the last NaN.
		if wantArg[o] < 0 || v > wantY[o] || math.IsNaN(v) {
			wantY[o], wantArg[o], wantXi[o] = v, k, xi
		}
		wantSum[o] += v
		wantSumT[xi] += float64(dy[o])
		count[o]++
	})
	wantDx := make([]float64, nx)
	wantDdy := make([]float64, ny)
	for o, xi := range wantXi {
		if xi >= 0 {
			wantDx[xi] += float64(dy[o])
			wantDdy[o] = float64(ddx[xi])
		}
	}
	near := func(what string, want []float64, got []float32, terms []int) {
		t.Helper()
		require.Len(t, got, len(want), what)
		for i := range want {
			n := 1
			if terms != nil {
				n = terms[i] + 1
			}
			if math.IsNaN(want[i]) {
				require.True(t, math.IsNaN(float64(got[i])), "%s[%d] = %g, want NaN (%+v)", what, i, got[i], w)
				continue
			}
			require.InDelta(t, want[i], float64(got[i]), float64(n)*1e-6*(1+math.Abs(want[i])), "%s[%d] (%+v)", what, i, w)
		}
	}
	for _, set := range kernelSets() {
		restore, _ := useKernels(set.name)
		checkWindowThreads(t, w, x, dy, ddx, nx, ny, wantY, wantXi, wantSum, wantSumT, wantDx, wantDdy, count, near)
		restore()
	}
	counts, lead := Counts(w)
	out := w.Out()
	per := 1
	for _, n := range out[lead:] {
		per *= n
	}
	require.Len(t, counts, per)
	for o := range count {
		if per > 0 {
			require.Equal(t, float32(count[o]), counts[o%per], "count[%d] (%+v)", o, w)
		}
	}
}

func checkWindowThreads(t *testing.T, w *Window, x, dy, ddx []float32, nx, ny int, wantY []float64, wantXi []int,
	wantSum, wantSumT, wantDx, wantDdy []float64, count []int, near func(string, []float64, []float32, []int)) {
	t.Helper()
	for _, threads := range []int{1, 2} {
		func() {
			defer func(m float64) { parMinFlops = m }(parMinFlops)
			if threads > 1 {
				parMinFlops = 0
			}
			y, arg := nanSlice(ny), make([]int32, ny)
			MaxForward(w, y, arg, x, threads)
			near("max", wantY, y, nil)
			batchIn := batchSize(w, nx)
			for o := range arg {
				want := -1
				if wantXi[o] >= 0 {
					want = wantXi[o] % batchIn
				}
				require.Equal(t, want, int(arg[o]), "arg[%d] (%+v)", o, w)
			}
			y2 := nanSlice(ny)
			MaxForward(w, y2, nil, x, threads)
			require.Equal(t, fmt.Sprint(y), fmt.Sprint(y2))
			dx := nanSlice(nx)
			MaxBackward(w, dx, arg, dy, threads)
			near("max dx", wantDx, dx, nil)
			if ss := nanSlice(nx); SelectScatter(w, ss, x, dy, threads) {
				near("select-and-scatter", wantDx, ss, nil)
			}
			ddy := nanSlice(ny)
			MaxGather(w, ddy, arg, ddx, threads)
			near("max ddy", wantDdy, ddy, nil)
			s := nanSlice(ny)
			SumForward(w, s, x, threads)
			near("sum", wantSum, s, count)
			st := nanSlice(nx)
			SumBackward(w, st, dy, threads)
			near("sumᵀ", wantSumT, st, nil)
		}()
	}
}

func TestWindowTable(t *testing.T) {
	cases := []Window{
		{Shape: []int{2, 3, 28, 28}, Size: []int{1, 1, 2, 2}, Stride: []int{1, 1, 2, 2}},
		// 2×2 pools at stride 2 (kernelSet.maxPool2): rows of more than
		// 16 outputs, odd sizes (a row and a column unread), no batch.
		{Shape: []int{2, 3, 9, 37}, Size: []int{1, 1, 2, 2}, Stride: []int{1, 1, 2, 2}},
		{Shape: []int{1, 2, 4, 70}, Size: []int{1, 1, 2, 2}, Stride: []int{1, 1, 2, 2}},
		{Shape: []int{6, 8}, Size: []int{2, 2}, Stride: []int{2, 2}},
		{Shape: []int{3, 10, 11}, Size: []int{1, 2, 2}, Stride: []int{1, 2, 2}},
		{Shape: []int{2, 3, 9, 9}, Size: []int{1, 1, 3, 3}, Stride: []int{1, 1, 2, 2}, PadLo: []int{0, 0, 1, 1}, PadHi: []int{0, 0, 1, 1}},
		{Shape: []int{2, 2, 7, 8}, Size: []int{1, 1, 3, 2}, Stride: []int{1, 1, 1, 3}, Dilation: []int{1, 1, 2, 2}, PadLo: []int{0, 0, 2, 0}, PadHi: []int{0, 0, 0, 1}},
		{Shape: []int{3, 4, 10}, Size: []int{1, 1, 3}, Stride: []int{1, 1, 3}},
		{Shape: []int{2, 2, 5, 6, 7}, Size: []int{1, 1, 2, 3, 2}, Stride: []int{1, 1, 2, 1, 2}, PadLo: []int{0, 0, 1, 0, 1}, PadHi: []int{0, 0, 1, 1, 0}},
		{Shape: []int{2, 6, 5, 5}, Size: []int{1, 3, 2, 2}, Stride: []int{1, 2, 1, 1}},  // over channels too
		{Shape: []int{4, 5}, Size: []int{2, 5}},                                         // over everything
		{Shape: []int{3, 4}, Size: []int{1, 3}, PadLo: []int{0, 4}, PadHi: []int{0, 4}}, // windows of padding only
		{Shape: []int{2, 3, 0}, Size: []int{1, 1, 2}, PadLo: []int{0, 0, 1}, PadHi: []int{0, 0, 1}},
		{Shape: []int{2, 3, 3}, Size: []int{1, 1, 5}},                                   // empty output
		{Shape: []int{2, 3, 10, 7}, AdaptiveOut: []int{2, 3, 4, 3}},                     // adaptive, PyTorch's windows
		{Shape: []int{2, 3, 5, 4}, AdaptiveOut: []int{2, 3, 1, 1}},                      // global pooling
		{Shape: []int{2, 3, 5, 4}, Size: []int{1, 1, 5, 4}},                             // global pooling, a plain window
		{Shape: []int{3, 37}, Size: []int{3, 37}},                                       // one window over everything
		{Shape: []int{2, 3}, Size: []int{1, 5}, PadLo: []int{0, 1}, PadHi: []int{0, 1}}, // one window a row, with padding
		{Shape: []int{2, 4, 3, 5}, AdaptiveOut: []int{2, 4, 7, 9}},                      // upsampling windows
	}
	for i, w := range cases {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			checkWindow(t, rand.New(rand.NewPCG(uint64(i), 9)), &w)
		})
	}
}

// A window per batch element that reads each of its elements once (a
// global pool) takes the whole path: one sum a batch element, whose
// transpose spreads 0 + dy (so -0 becomes +0, as adding into cleared
// memory does); windows with padding, dilation or a second output do not.
func TestWindowWhole(t *testing.T) {
	for _, c := range []struct {
		w     Window
		whole bool
	}{
		{Window{Shape: []int{2, 3, 5, 4}, AdaptiveOut: []int{2, 3, 1, 1}}, true},
		{Window{Shape: []int{2, 3, 5, 4}, Size: []int{1, 1, 5, 4}}, true},
		{Window{Shape: []int{3, 37}, Size: []int{3, 37}}, true},
		{Window{Shape: []int{2, 3}, Size: []int{1, 5}, PadLo: []int{0, 1}, PadHi: []int{0, 1}}, false},
		{Window{Shape: []int{2, 5}, Size: []int{1, 3}, Dilation: []int{1, 2}}, false},
		{Window{Shape: []int{2, 3, 5, 4}, AdaptiveOut: []int{2, 3, 1, 2}}, false},
	} {
		nx := 1
		for _, n := range c.w.Shape {
			nx *= n
		}
		ny := 1
		for _, n := range c.w.Out() {
			ny *= n
		}
		pl := c.w.plan("test", nx, ny)
		require.Equal(t, c.whole, pl.whole, "%+v", c.w)
		if !c.whole {
			continue
		}
		x := make([]float32, nx)
		for i := range x {
			x[i] = float32(i%7) - 2.5
		}
		y := make([]float32, ny)
		SumForward(&c.w, y, x, 1)
		dy := make([]float32, ny)
		for b := range y {
			var want float64
			for _, v := range x[b*pl.inSize : (b+1)*pl.inSize] {
				want += float64(v)
			}
			require.Equal(t, float32(want), y[b], "sum %d (%+v)", b, c.w)
			dy[b] = float32(math.Copysign(float64(b), -1)) // -0 first
		}
		dx := nanSlice(nx)
		SumBackward(&c.w, dx, dy, 1)
		for i, v := range dx {
			require.Equal(t, math.Float32bits(dy[i/pl.inSize]+0), math.Float32bits(v), "sumᵀ %d (%+v)", i, c.w)
		}
	}
}

func TestWindowRandom(t *testing.T) {
	n := 300
	if testlong.Enabled() {
		n = 5000
	}
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < n; i++ {
		r := 1 + rng.IntN(4)
		w := &Window{Shape: make([]int, r)}
		for d := range w.Shape {
			w.Shape[d] = rng.IntN(7)
		}
		if rng.IntN(4) == 0 {
			w.AdaptiveOut = make([]int, r)
			for d := range w.AdaptiveOut {
				if w.Shape[d] > 0 {
					w.AdaptiveOut[d] = 1 + rng.IntN(w.Shape[d]+2)
				}
			}
		} else {
			w.Size = make([]int, r)
			for d := range w.Size {
				w.Size[d] = 1 + rng.IntN(3)
			}
			maybe := func(lo, n int) []int {
				if rng.IntN(2) == 0 {
					return nil
				}
				v := make([]int, r)
				for d := range v {
					v[d] = lo + rng.IntN(n)
				}
				return v
			}
			w.Stride, w.Dilation = maybe(1, 3), maybe(1, 2)
			w.PadLo, w.PadHi = maybe(0, 3), maybe(0, 3)
		}
		checkWindow(t, rng, w)
	}
}

func TestWindowCheck(t *testing.T) {
	cases := []struct {
		w    Window
		want string
	}{
		{Window{Shape: []int{3}, Size: []int{1, 1}}, "2 window sizes for 1 dimensions"},
		{Window{Shape: []int{3}, Size: []int{0}}, "window size 0 in dimension 0"},
		{Window{Shape: []int{3}, Size: []int{1}, Stride: []int{0}}, "stride 0 in dimension 0"},
		{Window{Shape: []int{3}, Size: []int{1}, AdaptiveOut: []int{1}}, "adaptive windows take no size"},
		{Window{Shape: []int{0}, AdaptiveOut: []int{2}}, "adaptive output size 2 for input size 0"},
	}
	for _, c := range cases {
		err := c.w.Check()
		require.Error(t, err)
		require.Contains(t, err.Error(), c.want)
	}
	w := Window{Shape: []int{4}, Size: []int{2}, Stride: []int{2}}
	require.Equal(t, []int{2}, w.Out())
	require.PanicsWithValue(t, "conv.SumForward: 4 input and 3 output elements, want 4 and 2", func() {
		SumForward(&w, make([]float32, 3), make([]float32, 4), 1)
	})
}

// batchSize is the number of input elements of one batch element of w
// (the leading dimensions whose windows are single elements at stride 1
// without padding form the batch).
func batchSize(w *Window, nx int) int {
	_, lead := Counts(w)
	n := 1
	for _, d := range w.Shape[lead:] {
		n *= d
	}
	if n == 0 {
		return 1
	}
	return n
}
