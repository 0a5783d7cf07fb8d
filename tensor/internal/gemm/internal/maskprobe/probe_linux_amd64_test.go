package maskprobe

import (
	"fmt"
	"syscall"
	"testing"
	"unsafe"

	"github.com/stretchr/testify/require"
	"golang.org/x/sys/cpu"
)

const (
	page  = 4096
	iters = 1 << 12
)

// pages maps three pages of anonymous memory; the first is touched, the
// second only if touch, the third is PROT_NONE.
func pages(tb testing.TB, touch bool) []byte {
	tb.Helper()
	if !cpu.X86.HasAVX512F {
		tb.Skip("no AVX-512")
	}
	mem, err := syscall.Mmap(-1, 0, 3*page, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	require.NoError(tb, err)
	tb.Cleanup(func() { _ = syscall.Munmap(mem) })
	require.NoError(tb, syscall.Mprotect(mem[2*page:], syscall.PROT_NONE))
	mem[0] = 1
	if touch {
		mem[page] = 1
	}
	return mem
}

func at(mem []byte, off int) *float32 { return (*float32)(unsafe.Pointer(&mem[off])) }

// TestMaskedOffLanesDoNotFault: the probes' masked accesses whose
// masked-off lanes reach a PROT_NONE page complete (the fault is
// suppressed), and the masked stores leave the bytes of masked-off lanes
// alone.
func TestMaskedOffLanesDoNotFault(t *testing.T) {
	mem := pages(t, true)
	p := at(mem, 2*page-24) // lanes 0-5 in page 2, lanes 6-15 in the PROT_NONE page
	for _, f := range []probe{zmask1, fmak1, mstore1} {
		f(p, 1, 0x3f)
	}
	mem[page-4] = 7 // lane 14 of a store at page-60, masked off
	mstore1(at(mem, page-60), 1, 0x3fff)
	require.Equal(t, byte(7), mem[page-4], "a masked store wrote a masked-off lane")
}

func report(b *testing.B, f probe, p *float32, m uint16, ops int) {
	for i := 0; i < b.N; i++ {
		f(p, iters, m)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(iters*ops), "ns/vec")
}

// BenchmarkL1 times the forms on L1-resident data at a line-aligned
// address (off=0), 4 bytes past it (off=4: every access splits two lines)
// and 16 bytes past it, with all lanes, the first 10 (a 10-wide row's
// tail) or none enabled.
func BenchmarkL1(b *testing.B) {
	mem := pages(b, true)
	cases := []struct {
		name string
		f    probe
		m    uint16
	}{
		{"load", full, 0xffff},
		{"zload_all", zmask, 0xffff}, {"zload_10", zmask, 0x3ff}, {"zload_none", zmask, 0},
		{"mload_all", mmask, 0xffff}, {"mload_10", mmask, 0x3ff},
		{"load+regz_10", regmask, 0x3ff},
		{"store", fullstore, 0xffff}, {"mstore_all", mstore, 0xffff}, {"mstore_10", mstore, 0x3ff},
		{"fma_mem", fmamem, 0xffff}, {"fma_mem_k_all", fmamemk, 0xffff}, {"fma_mem_k_10", fmamemk, 0x3ff},
	}
	for _, off := range []int{0, 4, 16} {
		for _, c := range cases {
			b.Run(fmt.Sprintf("off=%d/%s", off, c.name), func(b *testing.B) { report(b, c.f, at(mem, off), c.m, 8) })
		}
	}
}

// BenchmarkPageCross times accesses whose vector starts 24 bytes before a
// page's end (lanes 0-5 in one page, 6-15 in the next), the next page
// present (touched) or not, with the first 6 lanes, none, or alternate
// lanes enabled; "line" is the same split across two lines of one page.
func BenchmarkPageCross(b *testing.B) {
	masks := []struct {
		name string
		m    uint16
	}{{"all", 0xffff}, {"first6", 0x3f}, {"none", 0}, {"alt", 0x5555}}
	probes := []struct {
		name string
		f    probe
	}{{"zload", zmask1}, {"fma_k", fmak1}, {"mstore", mstore1}, {"store", store1}}
	for _, next := range []string{"present", "absent", "protnone", "line"} {
		for _, m := range masks {
			for _, f := range probes {
				b.Run(fmt.Sprintf("%s/%s/%s", next, m.name, f.name), func(b *testing.B) {
					if next == "protnone" && f.name == "store" || next != "line" && next != "present" && m.m&0xffc0 != 0 {
						b.Skip("would fault")
					}
					mem := pages(b, next == "present" || next == "line")
					off := page - 24
					switch next {
					case "protnone":
						off = 2*page - 24
					case "line":
						off = page/2 - 24
					}
					report(b, f.f, at(mem, off), m.m, 8)
				})
			}
		}
	}
}

// BenchmarkForward times a store followed by a reload of the same vector:
// unmasked, zero-masked with all lanes, zero-masked with 10.
func BenchmarkForward(b *testing.B) {
	mem := pages(b, true)
	b.Run("load", func(b *testing.B) { report(b, fwdf, at(mem, 0), 0xffff, 1) })
	b.Run("zload_all", func(b *testing.B) { report(b, fwdz, at(mem, 0), 0xffff, 1) })
	b.Run("zload_10", func(b *testing.B) { report(b, fwdz, at(mem, 0), 0x3ff, 1) })
}

// TestCmpForms: both ReLU-gradient forms give y > 0 ? g : 0.
func TestCmpForms(t *testing.T) {
	if !cpu.X86.HasAVX512F {
		t.Skip("no AVX-512")
	}
	g, y := make([]float32, 64), make([]float32, 64)
	want := make([]float32, 64)
	for i := range g {
		g[i], y[i] = float32(i+1), float32(i%3-1)
		if y[i] > 0 {
			want[i] = g[i]
		}
	}
	for _, f := range []func(d, g, y *float32, n int){cmpzload, cmpregz} {
		d := make([]float32, 64)
		f(&d[0], &g[0], &y[0], 4)
		require.Equal(t, want, d)
	}
}

// BenchmarkCmpMask times the ReLU gradient's two forms in the calls of the
// ResNet block's channel-affine backward: 256 floats (a stage) a call into
// a stack-sized buffer, over 128 KB (L2) or 8 MB of g and y with random
// signs.
func BenchmarkCmpMask(b *testing.B) {
	if !cpu.X86.HasAVX512F {
		b.Skip("no AVX-512")
	}
	for _, n := range []int{1 << 15, 1 << 21} {
		g, y := make([]float32, n), make([]float32, n)
		for i := range g {
			h := uint32(i) * 2654435761
			g[i], y[i] = float32(h>>8)/(1<<24)-0.5, float32(h>>16&0xff)/256-0.5
		}
		cmpMask(b, g, y)
	}
}

func cmpMask(b *testing.B, g, y []float32) {
	const stage = 256
	n := len(g)
	var d [stage]float32
	for _, f := range []struct {
		name string
		f    func(d, g, y *float32, n int)
	}{{"zload", cmpzload}, {"load+regz", cmpregz}} {
		b.Run(fmt.Sprintf("kb=%d/%s", 4*n>>10, f.name), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				for j := 0; j < n; j += stage {
					f.f(&d[0], &g[j], &y[j], stage/16)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n/16), "ns/vec")
		})
	}
}

// BenchmarkStream reads 512 KB (L2), 16 MB or 64 MB (memory) once a
// round, a stream read only by unmasked loads, only by zero-masked loads
// (all lanes), or by zero-masked loads with a software prefetch 1 KB
// ahead; three rounds alternate the forms.
func BenchmarkStream(b *testing.B) {
	if !cpu.X86.HasAVX512F {
		b.Skip("no AVX-512")
	}
	for _, kb := range []int{512, 16 << 10, 64 << 10} {
		n := kb << 4 // vectors
		mem, err := syscall.Mmap(-1, 0, 64*n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
		require.NoError(b, err)
		for i := range mem {
			mem[i] = byte(i)
		}
		for r := 0; r < 3; r++ {
			for _, f := range []struct {
				name string
				f    probe
			}{{"load", streamf}, {"zload", streamz}, {"zload+prefetch", streamzp}} {
				b.Run(fmt.Sprintf("kb=%d/%s", kb, f.name), func(b *testing.B) {
					for i := 0; i < b.N; i++ {
						f.f(at(mem, 0), n, 0xffff)
					}
					b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/vec")
				})
			}
		}
		require.NoError(b, syscall.Munmap(mem))
	}
}
