package pytree_test

import (
	"testing"
	"time"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

type benchLinear struct {
	W, B    *tensor.Tensor
	In, Out int
}

type benchMLP struct {
	Layers []benchLinear
	Name   string
}

type benchMLPPtr struct {
	Layers []*benchLinear
	Name   string
}

func newBenchMLP(n int) (*benchMLP, *benchMLPPtr) {
	w, b := tensor.Zeros(tensor.Float32, 4, 4), tensor.Zeros(tensor.Float32, 4)
	m := &benchMLP{Name: "bench"}
	mp := &benchMLPPtr{Name: "bench"}
	for range n {
		m.Layers = append(m.Layers, benchLinear{W: w, B: b, In: 4, Out: 4})
		mp.Layers = append(mp.Layers, &benchLinear{W: w, B: b, In: 4, Out: 4})
	}
	return m, mp
}

func reportUS(b *testing.B) {
	b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "µs/op")
}

func reportCPU(b *testing.B, start time.Duration) {
	b.ReportMetric(float64((cputime.Used()-start).Nanoseconds())/1e3/float64(b.N), "cpu-µs/op")
}

// BenchmarkFlattenUnflatten300 measures Flatten + Unflatten of a model
// with 300 leaves (an MLP with 150 Linear{W, B} layers). Target: well
// under 20 µs.
func BenchmarkFlattenUnflatten300(b *testing.B) {
	m, mp := newBenchMLP(150)
	b.Run("values", func(b *testing.B) {
		b.ReportAllocs()
		start := cputime.Used()
		for b.Loop() {
			leaves, s := pytree.Flatten(m)
			_ = pytree.Unflatten[*benchMLP](s, leaves)
		}
		reportUS(b)
		reportCPU(b, start)
	})
	b.Run("pointers", func(b *testing.B) {
		b.ReportAllocs()
		start := cputime.Used()
		for b.Loop() {
			leaves, s := pytree.Flatten(mp)
			_ = pytree.Unflatten[*benchMLPPtr](s, leaves)
		}
		reportUS(b)
		reportCPU(b, start)
	})
}

func BenchmarkLeaves300(b *testing.B) {
	m, _ := newBenchMLP(150)
	b.ReportAllocs()
	start := cputime.Used()
	for b.Loop() {
		_ = pytree.Leaves(m)
	}
	reportUS(b)
	reportCPU(b, start)
}

func BenchmarkMap300(b *testing.B) {
	m, _ := newBenchMLP(150)
	b.ReportAllocs()
	start := cputime.Used()
	for b.Loop() {
		_ = pytree.Map(m, func(x *tensor.Tensor) *tensor.Tensor { return x })
	}
	reportUS(b)
	reportCPU(b, start)
}

func BenchmarkUnflatten300(b *testing.B) {
	m, _ := newBenchMLP(150)
	leaves, s := pytree.Flatten(m)
	b.ReportAllocs()
	start := cputime.Used()
	for b.Loop() {
		_ = pytree.Unflatten[*benchMLP](s, leaves)
	}
	reportUS(b)
	reportCPU(b, start)
}
