package main

import (
	"testing"

	"github.com/gonox/gonox/tensor"
)

// BenchmarkTrainStep measures one training step of the default model
// (4 layers, width 128, 8 experts of 256, top-2) on a batch of 32×64
// characters, per strategy: µs/step and characters/s. Run with
//
//	go test ./examples/moe -run '^$' -bench TrainStep -benchtime 5x
func BenchmarkTrainStep(b *testing.B) {
	cfg, err := parseFlags(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	c, err := loadCorpus("")
	if err != nil {
		b.Fatal(err)
	}
	mc := modelConfig{vocab: c.size, context: cfg.context, dim: cfg.dim, layers: cfg.layers, heads: cfg.heads,
		experts: cfg.experts, hidden: cfg.hidden, topK: cfg.topK, capacity: cfg.capacity}
	model := newModel(tensor.NewKey(0), mc)
	starts := make([]int, cfg.batch)
	for i := range starts {
		starts[i] = i * 1000
	}
	x, y := windows(c.train, starts, cfg.context)
	for _, s := range []strategy{single, epOnly, dpEP, fsdpEP} {
		b.Run(s.String(), func(b *testing.B) {
			tr, err := build(cfg, model, s)
			if err != nil {
				b.Fatal(err)
			}
			for b.Loop() {
				if _, err := tr.trainStep(x, y); err != nil {
					b.Fatal(err)
				}
			}
			secs := b.Elapsed().Seconds() / float64(b.N)
			b.ReportMetric(secs*1e6, "µs/step")
			b.ReportMetric(float64(cfg.batch*cfg.context)/secs, "chars/s")
		})
	}
}
