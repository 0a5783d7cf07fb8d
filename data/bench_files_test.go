package data

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// BenchmarkTokenWindows reads shuffled batches of 32 windows of 64 tokens
// (examples/moe's default batch) at every offset (stride 1) of a token
// file, through a Stream without prefetch: the cost of a batch on the
// consumer's goroutine, in batches/s. The files: 16 MiB of tokens written
// whole, and a sparse file of 20 GB (10^10 uint16 tokens, costing no disk)
// whose every window lands on pages never read before. bench/data.sh sets
// it beside the training step of examples/moe it feeds:
//
//	go test ./data -run '^$' -bench TokenWindows
func BenchmarkTokenWindows(b *testing.B) {
	dir := b.TempDir()
	ids := make([]int32, 8<<20)
	for i := range ids {
		ids[i] = int32(uint32(i*2654435761) % 50257)
	}
	dense := writeTokens(b, dir, "dense.tok", Uint16, 50257, ids)
	sparse := filepath.Join(dir, "sparse.tok")
	const tokens = 10_000_000_000
	if err := os.WriteFile(sparse, tokenHeader(Uint16, 50257, tokens), 0o644); err != nil {
		b.Fatal(err)
	}
	if err := os.Truncate(sparse, tokenHeaderSize+2*tokens); err != nil {
		b.Fatal(err)
	}
	for _, c := range []struct{ name, path string }{{"file=16MiB", dense}, {"file=20GB-sparse", sparse}} {
		b.Run(c.name, func(b *testing.B) {
			d, err := OpenTokenWindows([]string{c.path}, 64, 1)
			if err != nil {
				b.Fatal(err)
			}
			defer d.Close()
			s := &Stream{Dataset: d, BatchSize: 32, Shuffle: true, Key: tensor.NewKey(0)}
			r := s.Open(context.Background(), 0)
			defer r.Close()
			for b.Loop() {
				if _, err := r.Next(); err != nil {
					b.Fatal(err)
				}
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(b.N)/secs, "batches/s")
			b.ReportMetric(secs/float64(b.N)*1e6, "µs/batch")
		})
	}
}
