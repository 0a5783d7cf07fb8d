package main

import (
	"testing"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkTrainStep measures one training step of the default model
// (4 layers, width 128, 8 experts of 256, top-2) on a batch of 32×64
// characters, per strategy, and of the dense variant on one device
// (dense: -ffn dense -hidden 512, a 128-512-128 MLP in every block):
// µs/step and characters/s; -benchmem adds the bytes a step allocates.
// bench/compare.sh runs single and dense beside the same models in
// PyTorch (bench/anchors.py moe). Run with
//
//	go test ./examples/moe -run '^$' -bench TrainStep -benchtime 5x -benchmem
func BenchmarkTrainStep(b *testing.B) {
	c, err := loadCorpus("")
	if err != nil {
		b.Fatal(err)
	}
	starts := make([]int, 32)
	for i := range starts {
		starts[i] = i * 1000
	}
	run := func(b *testing.B, args []string, s strategy) {
		cfg, err := parseFlags(args, nil)
		if err != nil {
			b.Fatal(err)
		}
		x, y := windows(c.train, starts[:cfg.batch], cfg.context)
		tr, err := build(cfg, newModel(tensor.NewKey(0), cfg.model(c.size)), s)
		if err != nil {
			b.Fatal(err)
		}
		cpu0 := cputime.Used()
		for b.Loop() {
			if _, err := tr.trainStep(x, y); err != nil {
				b.Fatal(err)
			}
		}
		secs := b.Elapsed().Seconds() / float64(b.N)
		b.ReportMetric(secs*1e6, "µs/step")
		b.ReportMetric(float64(cfg.batch*cfg.context)/secs, "chars/s")
		// Per second of CPU time of the process: with one thread, what a
		// core does while it runs, which a busy machine distorts less.
		cpu := (cputime.Used() - cpu0).Seconds() / float64(b.N)
		b.ReportMetric(float64(cfg.batch*cfg.context)/cpu, "chars/cpu-s")
	}
	for _, s := range []strategy{single, epOnly, dpEP, fsdpEP} {
		b.Run(s.String(), func(b *testing.B) { run(b, nil, s) })
	}
	b.Run("dense", func(b *testing.B) { run(b, []string{"-ffn", "dense", "-hidden", "512", "-strategy", "single"}, single) })
	// single_bf16 and dense_bf16 are single and dense in bf16 mixed
	// precision (-dtype bf16).
	b.Run("single_bf16", func(b *testing.B) { run(b, []string{"-dtype", "bf16", "-strategy", "single"}, single) })
	b.Run("dense_bf16", func(b *testing.B) {
		run(b, []string{"-ffn", "dense", "-hidden", "512", "-strategy", "single", "-dtype", "bf16"}, single)
	})
}
