package autodiff_test

import (
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkScanRemat is the gradient of a 4096-step GRU scan (hidden 64,
// batch 8, input 64; the loss is the sum of the last hidden state) with
// respect to the cell's parameters and the initial state: the plain scan,
// which keeps every step's intermediate values until backward, against
// ScanRemat(0), which keeps every 64th carry and recomputes the steps
// between. Besides the time per gradient it reports peak-MB, the peak of
// the live Go heap during one gradient above the live heap before it
// (all tensor storage is Go heap), as heapProbe measures it. Run it as
//
//	go test ./autodiff -run '^$' -bench ScanRemat -benchtime 3x -count 3
func BenchmarkScanRemat(b *testing.B) {
	const steps, batch, in, hidden = 4096, 8, 64, 64
	key := tensor.NewKey(30)
	k := key.Split(3)
	cell := nn.NewGRUCell(k[0], in, hidden, nn.RNNOptions{})
	xs := tensor.Normal(k[1], steps, batch, in) // data: not traced
	h0 := tensor.MulScalar(tensor.Normal(k[2], batch, hidden), 0.1)
	type params struct {
		Cell nn.GRUCell
		H0   *tensor.Tensor
	}
	for _, c := range []struct {
		name string
		opts []autodiff.ScanOption
	}{
		{"plain", nil},
		{"remat", []autodiff.ScanOption{autodiff.ScanRemat(0)}},
	} {
		b.Run(c.name, func(b *testing.B) {
			grad := func(probe func(*tensor.Tensor) *tensor.Tensor) func(params) params {
				return autodiff.Grad(func(p params) *tensor.Tensor {
					step := func(h, x *tensor.Tensor) (*tensor.Tensor, struct{}) {
						h = p.Cell.Forward(x, h)
						if probe != nil {
							h = probe(h)
						}
						return h, struct{}{}
					}
					h, _ := autodiff.Scan(step, p.H0, xs, c.opts...)
					return tensor.Sum(h)
				})
			}
			p := params{cell, h0}
			hp := newHeapProbe(64)
			g := grad(hp.op())(p)
			hp.sample()
			runtime.KeepAlive(g)
			f := grad(nil)
			b.ResetTimer()
			for range b.N {
				f(p)
			}
			b.StopTimer()
			b.ReportMetric(float64(hp.peak)/(1<<20), "peak-MB")
		})
	}
}

// heapProbe measures the peak of the live Go heap during a computation
// that calls its op: an identity with a custom VJP, which the step of a
// scan applies to its carry, so that it runs at every step of the forward
// pass, of remat's recomputation and of the backward pass. Every stride-th
// call collects garbage (runtime.GC) and reads the live heap
// (runtime/metrics' /gc/heap/live:bytes). The collection runs on the
// computation's own goroutine, between two steps, with nothing else
// allocating: the figure is what is reachable then, not a sampler's
// estimate inflated by the garbage a busy computation makes while a
// concurrent collection marks. Peaks inside one step (a product's
// scratch) are not seen.
type heapProbe struct {
	stride, calls int
	base, peak    uint64
}

func newHeapProbe(stride int) *heapProbe {
	p := &heapProbe{stride: stride}
	p.base = liveHeap()
	return p
}

// liveHeap collects garbage and returns the bytes of the live heap.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// sample records the live heap now.
func (p *heapProbe) sample() {
	if v := liveHeap(); v > p.base {
		p.peak = max(p.peak, v-p.base)
	}
}

func (p *heapProbe) tick() {
	p.calls++
	if p.calls%p.stride == 0 {
		p.sample()
	}
}

// op returns the probing identity.
func (p *heapProbe) op() func(*tensor.Tensor) *tensor.Tensor {
	return autodiff.CustomVJP("heap_probe",
		func(h *tensor.Tensor) (*tensor.Tensor, struct{}) { p.tick(); return h, struct{}{} },
		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor { p.tick(); return g })
}
