package main

import (
	"fmt"
	"io"
	"runtime"
	"runtime/metrics"
	"testing"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkTrainStep measures the gradient of one training batch of the
// default model (embedding 32, LSTM 256, batch 32) with the plain scan
// and with remat, for windows of the default 128 characters and of 1024:
// time per step, characters/s, and peak-MB, the peak of the live Go heap
// during the gradient above the heap before it (heapProbe). Run with
//
//	go test ./examples/charrnn -run '^$' -bench TrainStep -benchtime 5x
func BenchmarkTrainStep(b *testing.B) {
	c, err := loadCorpus("")
	if err != nil {
		b.Fatal(err)
	}
	for _, context := range []int{128, 1024} {
		cfg, err := parseFlags([]string{"-context", fmt.Sprint(context)}, io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		m := newModel(tensor.NewKey(0), modelConfig{vocab: c.vocab.Size(), embed: cfg.embed, hidden: cfg.hidden})
		bt := trainBatch(cfg, c, 0)
		for _, remat := range []bool{false, true} {
			name := fmt.Sprintf("T=%d/plain", context)
			if remat {
				name = fmt.Sprintf("T=%d/remat", context)
			}
			b.Run(name, func(b *testing.B) {
				grad := func(probe func(*tensor.Tensor) *tensor.Tensor) func(Model, batch) (*tensor.Tensor, Model) {
					return autodiff.ValueAndGradWith(func(m Model, b batch) *tensor.Tensor { return m.loss(b, remat, probe) })
				}
				hp := newHeapProbe(max(1, context/32))
				_, g := grad(hp.op())(m, bt)
				hp.sample()
				runtime.KeepAlive(g)
				f := grad(nil)
				b.ResetTimer()
				for range b.N {
					f(m, bt)
				}
				secs := b.Elapsed().Seconds() / float64(b.N)
				b.ReportMetric(float64(cfg.batch*context)/secs, "chars/s")
				b.ReportMetric(float64(hp.peak)/(1<<20), "peak-MB")
			})
		}
	}
}

// heapProbe measures the peak of the live Go heap during a computation
// that calls its op (an identity with a custom VJP on the LSTM's hidden
// state, so that it runs at every step of the forward pass, of remat's
// recomputation and of the backward pass): every stride-th call collects
// garbage on the computation's own goroutine and reads the live heap. It
// is autodiff's BenchmarkScanRemat probe.
type heapProbe struct {
	stride, calls int
	base, peak    uint64
}

func newHeapProbe(stride int) *heapProbe { return &heapProbe{stride: stride, base: liveHeap()} }

// liveHeap collects garbage and returns the bytes of the live heap.
func liveHeap() uint64 {
	runtime.GC()
	s := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func (p *heapProbe) sample() {
	if v := liveHeap(); v > p.base {
		p.peak = max(p.peak, v-p.base)
	}
}

func (p *heapProbe) tick() {
	if p.calls++; p.calls%p.stride == 0 {
		p.sample()
	}
}

func (p *heapProbe) op() func(*tensor.Tensor) *tensor.Tensor {
	return autodiff.CustomVJP("heap_probe",
		func(h *tensor.Tensor) (*tensor.Tensor, struct{}) { p.tick(); return h, struct{}{} },
		func(_ struct{}, g *tensor.Tensor) *tensor.Tensor { p.tick(); return g })
}
