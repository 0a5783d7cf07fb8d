package data

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/gonox/gonox/tensor"
)

// benchLoader consumes b.N shuffled batches (over as many epochs as that
// takes) and reports batches/s and the GB/s of batch data (X and Y) handed
// to the consumer.
func benchLoader(b *testing.B, d Dataset, batchSize, prefetch int) {
	l := &Loader{Dataset: d, BatchSize: batchSize, Shuffle: true, Key: tensor.NewKey(0), DropLast: true, Prefetch: prefetch}
	var nbytes int64
	b.ResetTimer()
	for n, epoch := 0, 0; n < b.N; epoch++ {
		for batch, err := range l.Epoch(epoch) {
			if err != nil {
				b.Fatal(err)
			}
			nbytes += int64(batch.X.Bytes() + batch.Y.Bytes())
			if n++; n == b.N {
				break
			}
		}
	}
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(b.N)/s, "batches/s")
	b.ReportMetric(float64(nbytes)/s/1e9, "GB/s")
}

func BenchmarkLoaderDigits(b *testing.B) {
	d := Digits()
	for _, bs := range []int{32, 256} {
		for _, prefetch := range []int{0, 2} {
			b.Run(fmt.Sprintf("batch=%d/prefetch=%d", bs, prefetch), func(b *testing.B) { benchLoader(b, d, bs, prefetch) })
		}
	}
}

func BenchmarkLoader60000x784(b *testing.B) {
	key := tensor.NewKey(1)
	kx, ky := key.Split2()
	d := FromTensors(tensor.Uniform(kx, 60000, 784), tensor.RandInt(ky, 0, 10, 60000))
	for _, bs := range []int{128, 1024} {
		for _, prefetch := range []int{0, 2} {
			b.Run(fmt.Sprintf("batch=%d/prefetch=%d", bs, prefetch), func(b *testing.B) { benchLoader(b, d, bs, prefetch) })
		}
	}
}

// BenchmarkReadIDX measures decoding a gzipped MNIST-sized image file
// (60000x28x28 bytes) from memory.
func BenchmarkReadIDX(b *testing.B) {
	pix := make([]byte, 60000*28*28)
	for i := range pix {
		pix[i] = byte(i * 7 % 251)
	}
	in := gz(b, idxBytes(0x08, []uint32{60000, 28, 28}, pix))
	b.SetBytes(int64(len(pix)))
	for b.Loop() {
		if _, err := decodeIDX(bytes.NewReader(in), "bench"); err != nil {
			b.Fatal(err)
		}
	}
}
