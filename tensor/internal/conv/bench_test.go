package conv

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/internal/kernels"
	"github.com/gonox/gonox/tensor/internal/gemm"
)

// The shape classes whose algorithm is chosen by measurement (see doc.go),
// benchmarked forward (fwd), input gradient (dx) and kernel gradient (dw):
//
//	go test -run '^$' -bench Conv ./tensor/internal/conv/
//
// GFLOP/s counts 2·N·O·Out·(C/G)·K, padding taps included. The anchor,
// gemm/..., is one Sgemm with the resnet class's forward product per
// sample, so ratios to it hold across runs on a busy machine.
type benchCase struct {
	name string
	p    Params
}

func benchCases() []benchCase {
	one, two := []int{1, 1}, []int{2, 2}
	return []benchCase{
		{"lenet1", Params{N: 128, C: 1, O: 6, Groups: 1, In: []int{28, 28}, Kernel: []int{5, 5}, PadLo: two, PadHi: two}},
		{"lenet2", Params{N: 128, C: 6, O: 16, Groups: 1, In: []int{14, 14}, Kernel: []int{5, 5}}},
		{"resnet", Params{N: 32, C: 64, O: 64, Groups: 1, In: []int{32, 32}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}},
		{"resnet_s2", Params{N: 32, C: 64, O: 128, Groups: 1, In: []int{32, 32}, Kernel: []int{3, 3}, Stride: two, PadLo: one, PadHi: one}},
		{"depthwise", Params{N: 32, C: 64, O: 64, Groups: 64, In: []int{32, 32}, Kernel: []int{3, 3}, PadLo: one, PadHi: one}},
		{"1x1", Params{N: 32, C: 64, O: 128, Groups: 1, In: []int{32, 32}, Kernel: one}},
		{"1d", Params{N: 32, C: 64, O: 64, Groups: 1, In: []int{256}, Kernel: []int{3}, PadLo: []int{1}, PadHi: []int{1}}},
		{"3d", Params{N: 4, C: 16, O: 32, Groups: 1, In: []int{16, 16, 16}, Kernel: []int{3, 3, 3}, PadLo: []int{1, 1, 1}, PadHi: []int{1, 1, 1}}},
	}
}

func BenchmarkConv(b *testing.B) {
	if err := kernels.Err(); err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(1, 1))
	for _, threads := range []int{1, 2} {
		b.Run(fmt.Sprintf("gemm_64x1024x576/threads=%d", threads), func(b *testing.B) {
			a, bb, c := randSlice(rng, 64*576), randSlice(rng, 576*1024), make([]float32, 64*1024)
			report(b, 2*64*1024*576, func() { gemm.Sgemm(false, false, 64, 1024, 576, 1, a, 576, bb, 1024, 0, c, 1024, threads) })
		})
	}
	for _, c := range benchCases() {
		p := &c.p
		nx, nw, ny := sizes(p)
		x, w, y := randSlice(rng, nx), randSlice(rng, nw), randSlice(rng, ny)
		dx, dw := make([]float32, nx), make([]float32, nw)
		g := p.geom()
		flops := g.flops()
		for _, threads := range []int{1, 2} {
			b.Run(fmt.Sprintf("%s/fwd/threads=%d", c.name, threads), func(b *testing.B) {
				report(b, flops, func() { Forward(p, y, x, w, threads) })
			})
			b.Run(fmt.Sprintf("%s/dx/threads=%d", c.name, threads), func(b *testing.B) {
				report(b, flops, func() { BackwardInput(p, dx, y, w, threads) })
			})
			b.Run(fmt.Sprintf("%s/dw/threads=%d", c.name, threads), func(b *testing.B) {
				report(b, flops, func() { BackwardKernel(p, dw, x, y, threads) })
			})
		}
	}
}

// report runs f b.N times and reports GFLOP/s and GFLOP per CPU-second.
func report(b *testing.B, flops float64, f func()) {
	b.ReportAllocs()
	cpu0 := cputime.Used().Seconds()
	for b.Loop() {
		f()
	}
	total := flops * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds()/1e9, "GFLOP/s")
	if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
		b.ReportMetric(total/cpu/1e9, "GFLOP/cpu-s")
	}
}

// BenchmarkConvMethod compares the algorithms on the classes where more
// than one applies.
func BenchmarkConvMethod(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range benchCases() {
		p := &c.p
		nx, nw, ny := sizes(p)
		x, w, y := randSlice(rng, nx), randSlice(rng, nw), randSlice(rng, ny)
		dx, dw := make([]float32, nx), make([]float32, nw)
		g := p.geom()
		flops := g.flops()
		for _, m := range []method{methodIm2col, methodDirect, methodRows, methodWinograd} {
			name := []string{"auto", "im2col", "direct", "rows", "winograd"}[m]
			b.Run(fmt.Sprintf("%s/fwd/%s", c.name, name), func(b *testing.B) {
				forceMethod = m
				defer func() { forceMethod = methodAuto }()
				report(b, flops, func() { Forward(p, y, x, w, 1) })
			})
			b.Run(fmt.Sprintf("%s/dx/%s", c.name, name), func(b *testing.B) {
				forceMethod = m
				defer func() { forceMethod = methodAuto }()
				report(b, flops, func() { BackwardInput(p, dx, y, w, 1) })
			})
			b.Run(fmt.Sprintf("%s/dw/%s", c.name, name), func(b *testing.B) {
				forceMethod = m
				defer func() { forceMethod = methodAuto }()
				report(b, flops, func() { BackwardKernel(p, dw, x, y, 1) })
			})
		}
	}
}

// BenchmarkIgemmShape runs the direct forward pass of each class with
// every shift kernel shape.
func BenchmarkIgemmShape(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	for _, c := range benchCases() {
		p := &c.p
		nx, nw, ny := sizes(p)
		x, w, y := randSlice(rng, nx), randSlice(rng, nw), randSlice(rng, ny)
		g := p.geom()
		if !g.useDirect(g.forwardShift) {
			continue
		}
		for i, k := range active.igemm {
			b.Run(fmt.Sprintf("%s/%dx%d", c.name, k.mr, k.nv), func(b *testing.B) {
				forceIgemm = i
				defer func() { forceIgemm = -1 }()
				report(b, g.flops(), func() { Forward(p, y, x, w, 1) })
			})
		}
	}
}

// BenchmarkWindow: LeNet's max pools, a ResNet global average pool and a
// 3×3 stride-2 pool, forward and backward, in GB/s of input per
// CPU-second; copy/... is a copy of the same bytes, the anchor.
func BenchmarkWindow(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	cases := []struct {
		name string
		w    Window
	}{
		{"lenet_pool1", Window{Shape: []int{128, 6, 28, 28}, Size: []int{1, 1, 2, 2}, Stride: []int{1, 1, 2, 2}}},
		{"lenet_pool2", Window{Shape: []int{128, 16, 10, 10}, Size: []int{1, 1, 2, 2}, Stride: []int{1, 1, 2, 2}}},
		{"global_avg", Window{Shape: []int{32, 64, 32, 32}, AdaptiveOut: []int{32, 64, 1, 1}}},
		{"pool3x3s2", Window{Shape: []int{32, 64, 32, 32}, Size: []int{1, 1, 3, 3}, Stride: []int{1, 1, 2, 2}, PadLo: []int{0, 0, 1, 1}, PadHi: []int{0, 0, 1, 1}}},
	}
	for _, c := range cases {
		w := &c.w
		nx, ny := 1, 1
		for _, n := range w.Shape {
			nx *= n
		}
		for _, n := range w.Out() {
			ny *= n
		}
		x, y, dx := randSlice(rng, nx), make([]float32, ny), make([]float32, nx)
		arg := make([]int32, ny)
		run := func(name string, f func()) {
			b.Run(c.name+"/"+name, func(b *testing.B) {
				cpu0 := cputime.Used().Seconds()
				for b.Loop() {
					f()
				}
				if cpu := cputime.Used().Seconds() - cpu0; cpu > 0 {
					b.ReportMetric(float64(nx)*4*float64(b.N)/cpu/1e9, "GB/cpu-s")
				}
			})
		}
		run("copy", func() { copy(dx, x) })
		run("max", func() { MaxForward(w, y, arg, x, 1) })
		run("max_grad", func() { MaxBackward(w, dx, arg, y, 1) })
		run("select_scatter", func() { SelectScatter(w, dx, x, y, 1) })
		run("sum", func() { SumForward(w, y, x, 1) })
		run("sum_grad", func() { SumBackward(w, dx, y, 1) })
	}
}

// BenchmarkIgemmKernel runs each shift kernel alone on a resnet-like
// offset table (64 channels of a 34×34 padded plane, 3×3 taps), data in
// cache: the kernels' peak, in GFLOP per CPU-second.
func BenchmarkIgemmKernel(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const cg, psize = 64, 34 * 34
	offs := tapOffsets(cg)
	p := randSlice(rng, cg*psize+1024)
	for _, k := range active.igemm {
		b.Run(fmt.Sprintf("%dx%d", k.mr, k.nv), func(b *testing.B) {
			a := randSlice(rng, len(offs)*k.mr)
			c := make([]float32, k.mr*k.cols())
			report(b, 2*float64(len(offs)*k.mr*k.cols()*(1024/k.cols())), func() {
				for q := 0; q+k.cols() <= 1024; q += k.cols() {
					k.fn(len(offs), &a[0], &p[q], &offs[0], &c[0], k.cols(), 0)
				}
			})
		})
	}
}

// BenchmarkDotKernel runs each dot kernel alone on the resnet class's
// shapes (one sample of 32 rows of 32 positions, dy planes of 1 024 floats,
// B the taps of padded 34×34 planes), data in cache: the kernels' peak, in
// GFLOP per CPU-second.
func BenchmarkDotKernel(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	const cg, pd, psize = 8, 34, 34 * 34
	offs := tapOffsets(cg)
	p := randSlice(rng, cg*psize+1024)
	for _, k := range active.dot {
		b.Run(fmt.Sprintf("%dx%d", k.mr, k.nr), func(b *testing.B) {
			a := randSlice(rng, 1024*k.mr)
			c := make([]float32, k.mr*k.nr)
			ntile := len(offs) / k.nr
			report(b, 2*float64(k.mr*k.nr*1024*ntile), func() {
				for j := 0; j+k.nr <= len(offs); j += k.nr {
					k.fn(1, 32, 2, 0, &a[0], 1024, 0, 0, &p[0], &offs[j], 4*(pd-32), 0, &c[0], k.nr, 0)
				}
			})
		})
	}
}

// tapOffsets returns the byte offsets of the 3×3 taps of cg channels of
// padded 34×34 planes, channel by channel: the shift and dot kernels'
// offset table for the benchmarks' resnet-like class.
func tapOffsets(cg int) []int {
	const pd, psize = 34, 34 * 34
	offs := make([]int, 0, 9*cg)
	for c := 0; c < cg; c++ {
		for kh := 0; kh < 3; kh++ {
			for kw := 0; kw < 3; kw++ {
				offs = append(offs, 4*(c*psize+kh*pd+kw))
			}
		}
	}
	return offs
}
