package checkpoint

import (
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/klauspost/compress/huff0"
	"github.com/klauspost/compress/zstd"
)

// benchModel is 256 MiB of normally distributed float32 weights: eight
// f32[2048,4096] matrices sharded P("dp","tp") on a dp=4,tp=2 mesh.
type benchModel struct{ Layers []*tensor.Tensor }

const benchBytes = 8 * 2048 * 4096 * 4

var benchOnce = sync.OnceValue(func() benchModel {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	s := shard.NewSharding(mesh, shard.P("dp", "tp"))
	var m benchModel
	for _, k := range tensor.NewKey(42).Split(8) {
		m.Layers = append(m.Layers, shard.Put(tensor.MulScalar(tensor.Normal(k, 2048, 4096), 0.02), s))
	}
	return m
})

// reportThroughput reports GB/s of wall time and GB per CPU-second: the
// machine is shared, so wall time depends on the other sessions' load;
// CPU time much less.
func reportThroughput(b *testing.B, cpu0 time.Duration) {
	total := float64(benchBytes) * float64(b.N)
	b.ReportMetric(total/b.Elapsed().Seconds()/1e9, "GB/s")
	if cpu := cputime.Used() - cpu0; cpu > 0 {
		b.ReportMetric(total/cpu.Seconds()/1e9, "GB/cpu-s")
	}
}

func storedBytes(b *testing.B, dir string, step int) int64 {
	root, m, err := readManifest(dir, step)
	if err != nil {
		b.Fatal(err)
	}
	root.Close()
	var n int64
	for _, e := range m.Tensors {
		for _, s := range e.Shards {
			n += s.Size
		}
	}
	return n
}

// BenchmarkSave measures Save of the 256 MiB model on 8 devices, fsyncs
// included, into a fresh step each time.
func BenchmarkSave(b *testing.B) {
	model := benchOnce()
	dir := b.TempDir()
	b.SetBytes(benchBytes)
	b.ResetTimer()
	cpu0 := cputime.Used()
	for i := 0; i < b.N; i++ {
		if err := Save(dir, i, model); err != nil {
			b.Fatal(err)
		}
		if i == 0 {
			b.StopTimer()
			b.ReportMetric(float64(benchBytes)/float64(storedBytes(b, dir, 0)), "ratio")
			b.StartTimer()
		}
		b.StopTimer()
		if i > 0 {
			os.RemoveAll(stepDir(dir, i-1))
		}
		b.StartTimer()
	}
	reportThroughput(b, cpu0)
}

// BenchmarkStoreBF16 is BenchmarkSave with StoreFloatsAs(AsBFloat16):
// "ratio" is the float32 bytes over the bytes stored.
func BenchmarkStoreBF16(b *testing.B) {
	model := benchOnce()
	dir := b.TempDir()
	b.SetBytes(benchBytes)
	b.ResetTimer()
	cpu0 := cputime.Used()
	for i := 0; i < b.N; i++ {
		if err := Save(dir, i, model, StoreFloatsAs(AsBFloat16)); err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		if i == 0 {
			b.ReportMetric(float64(benchBytes)/float64(storedBytes(b, dir, 0)), "ratio")
		} else {
			os.RemoveAll(stepDir(dir, i-1))
		}
		b.StartTimer()
	}
	reportThroughput(b, cpu0)
}

// BenchmarkRestore measures Restore of the 256 MiB model (read from the
// page cache, as right after a save) onto the same mesh, onto 2 devices
// with another spec, and onto the host.
func BenchmarkRestore(b *testing.B) {
	model := benchOnce()
	dir := b.TempDir()
	if err := Save(dir, 1, model); err != nil {
		b.Fatal(err)
	}
	two := shard.NewMesh([]int{2}, []string{"dp"})
	for _, c := range []struct {
		name string
		to   Placement
	}{
		{"same-mesh", AsLike()},
		{"dp=2-cols", OnMesh(two, shard.P(nil, "dp"))},
		{"host", OnHost()},
	} {
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(benchBytes)
			cpu0 := cputime.Used()
			for i := 0; i < b.N; i++ {
				if _, err := Restore(dir, 1, model, c.to); err != nil {
					b.Fatal(err)
				}
			}
			reportThroughput(b, cpu0)
		})
	}
}

// BenchmarkCodec compares compressing 1 MiB chunks of normally distributed
// float32 weights plainly, byte-shuffled in one zstd frame, and
// byte-shuffled with one zstd frame per byte plane, at zstd's fastest and
// default levels, and as Save does it (mode "save": one entropy-coded zstd
// frame per plane, the level does not apply), on one goroutine: the ratio
// and the speed.
func BenchmarkCodec(b *testing.B) {
	x := tensor.MulScalar(tensor.Normal(tensor.NewKey(1), 16<<20), 0.02) // 64 MiB
	ws, _ := words(x)
	raw := make([]byte, 4*len(ws))
	for i, v := range ws {
		raw[4*i], raw[4*i+1], raw[4*i+2], raw[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	const chunk = defaultChunkBytes
	for _, lvl := range []zstd.EncoderLevel{zstd.SpeedFastest, zstd.SpeedDefault} {
		enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(lvl), zstd.WithEncoderConcurrency(1))
		for _, mode := range []string{"plain", "shuffled", "shuffled-per-plane", "save"} {
			shuffled := mode != "plain"
			b.Run(fmt.Sprintf("%v/%s", lvl, mode), func(b *testing.B) {
				scratch := make([]byte, chunk)
				var hs huff0.Scratch
				var out []byte
				b.SetBytes(int64(len(raw)))
				var stored int
				for i := 0; i < b.N; i++ {
					stored = 0
					for off := 0; off < len(raw); off += chunk {
						src := raw[off : off+chunk]
						if shuffled {
							shuffle4(scratch, ws[off/4:(off+chunk)/4])
							src = scratch
						}
						if mode == "save" {
							out = encodeChunk(out[:0], scratch, &hs, true, ws[off/4:(off+chunk)/4], nil)
						} else if mode == "shuffled-per-plane" {
							out = out[:0]
							for p := 0; p < 4; p++ {
								out = enc.EncodeAll(src[p*chunk/4:(p+1)*chunk/4], out)
							}
						} else {
							out = enc.EncodeAll(src, out[:0])
						}
						stored += len(out)
					}
				}
				b.ReportMetric(float64(len(raw))/float64(stored), "ratio")
			})
		}
	}
}

// BenchmarkStorageRatio measures what StoreFloatsAs saves: 16 MiB of
// normally distributed float32 weights (σ = 0.02) in 1 MiB chunks, coded
// as Save codes them with float32, bfloat16 and float16 storage, on one
// goroutine. Metrics: "x-f32raw" is the float32 bytes over the stored
// bytes (what a checkpoint shrinks by), "x-own" the format's own raw
// bytes over the stored bytes (what compression adds to the narrowing);
// the anchor "zstd-shuffled" codes bfloat16 the common way, its two byte
// planes shuffled into one zstd frame at the fastest level.
func BenchmarkStorageRatio(b *testing.B) {
	x := tensor.MulScalar(tensor.Normal(tensor.NewKey(1), 4<<20), 0.02)
	ws, _ := words(x)
	enc, _ := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1))
	for _, mode := range []string{"f32", "bf16", "f16", "bf16/zstd-shuffled"} {
		b.Run(mode, func(b *testing.B) {
			s := map[string]FloatStorage{"f32": AsFloat32, "bf16": AsBFloat16, "f16": AsFloat16, "bf16/zstd-shuffled": AsBFloat16}[mode]
			epc := defaultChunkBytes / 4 // float32 elements per chunk, as Save with float32
			if s != AsFloat32 {
				epc = defaultChunkBytes / 2
			}
			scratch := make([]byte, defaultChunkBytes)
			var hs huff0.Scratch
			var out []byte
			var stored int
			b.SetBytes(int64(4 * len(ws)))
			for i := 0; i < b.N; i++ {
				stored = 0
				for k := 0; k < len(ws); k += epc {
					w := ws[k:min(len(ws), k+epc)]
					switch mode {
					case "f32":
						out = encodeChunk(out[:0], scratch, &hs, true, w, nil)
					case "bf16/zstd-shuffled":
						n := len(w)
						for j, v := range w {
							h := widen16Inverse(s, v)
							scratch[j], scratch[n+j] = byte(h), byte(h>>8)
						}
						out = enc.EncodeAll(scratch[:2*n], out[:0])
					default:
						out = encodeChunkHalf(out[:0], scratch, &hs, s, w)
					}
					stored += len(out)
				}
			}
			b.ReportMetric(float64(4*len(ws))/float64(stored), "x-f32raw")
			b.ReportMetric(float64(s.size()*len(ws))/float64(stored), "x-own")
		})
	}
}
