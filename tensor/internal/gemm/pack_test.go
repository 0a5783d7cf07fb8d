package gemm

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/internal/testlong"
)

// TestPackABlock checks the A panels every kernel set packs (its
// assembly packer where it has one) against their definition, for both
// op(A), row ranges that start inside A, edge tiles (tileRows splits) and k
// blocks that are not a multiple of the packers' 4 steps.
func TestPackABlock(t *testing.T) {
	for _, s := range kernelSets() {
		testPackABlock(t, s)
	}
	for _, s := range kernelSets64() {
		testPackABlock(t, s)
	}
}

func testPackABlock[T elem](t *testing.T, s *kernelSet[T]) {
	rng := rand.New(rand.NewPCG(31, 32))
	{
		for _, ta := range []bool{false, true} {
			for _, rows := range [][2]int{{0, 1}, {0, s.mr}, {3, 3 + 2*s.mr + 1}, {s.mr, 5*s.mr + 4}, {1, 40}} {
				for _, kc := range []int{1, 3, 4, 7, 64, 321} {
					t.Run(fmt.Sprintf("%T/%s/ta=%v/rows=%v/kc=%d", T(0), s.name, ta, rows, kc), func(t *testing.T) {
						i0, i1 := rows[0], rows[1]
						m, pc := i1+2, 5
						k := pc + kc + 3
						p := problem[T]{transA: ta, m: m, k: k}
						if ta {
							p.lda = m + rng.IntN(5)
							p.a = make([]T, k*p.lda)
						} else {
							p.lda = k + rng.IntN(5)
							p.a = make([]T, m*p.lda)
						}
						for i := range p.a {
							p.a[i] = T(rng.Float64())
						}
						opA := func(i, q int) T {
							if ta {
								return p.a[q*p.lda+i]
							}
							return p.a[i*p.lda+q]
						}
						dst := make([]T, (i1-i0+s.mr)*kc)
						for i := range dst {
							dst[i] = -1
						}
						s.packABlock(dst, &p, i0, i1, pc, kc)
						for ir, mr := i0, 0; ir < i1; ir += mr {
							mr = tileRows(s.mr, i1-ir)
							panel := dst[(ir-i0)*kc:]
							for q := 0; q < kc; q++ {
								for i := 0; i < mr; i++ {
									require.Equal(t, opA(ir+i, pc+q), panel[q*mr+i], "tile at row %d (%d rows): A(%d,%d)", ir, mr, ir+i, pc+q)
								}
							}
						}
						require.Equal(t, T(-1), dst[(i1-i0)*kc], "nothing written past the panels")
					})
				}
			}
		}
	}
}

// TestPackBRows checks the packing of whole strips of B as stored
// against the definition for every kernel set.
func TestPackBRows(t *testing.T) {
	for _, s := range kernelSets() {
		testPackBRows(t, s)
	}
	for _, s := range kernelSets64() {
		testPackBRows(t, s)
	}
}

func testPackBRows[T elem](t *testing.T, s *kernelSet[T]) {
	rng := rand.New(rand.NewPCG(33, 34))
	{
		for _, ns := range []int{0, 1, 3} {
			for _, kc := range []int{1, 5, 64} {
				NR := s.nr
				ldb := ns*NR + rng.IntN(7)
				src := make([]T, kc*ldb+3)
				for i := range src {
					src[i] = T(rng.Float64())
				}
				off := rng.IntN(3)
				dst := make([]T, ns*kc*NR+1)
				for i := range dst {
					dst[i] = -1
				}
				s.packBRows(dst, src[off:], ldb, kc, ns)
				for st := 0; st < ns; st++ {
					for q := 0; q < kc; q++ {
						for j := 0; j < NR; j++ {
							require.Equal(t, src[off+q*ldb+st*NR+j], dst[st*kc*NR+q*NR+j], "%s ns=%d kc=%d strip %d row %d col %d", s.name, ns, kc, st, q, j)
						}
					}
				}
				require.Equal(t, T(-1), dst[ns*kc*NR], "%s: nothing written past the strips", s.name)
			}
		}
	}
}

// TestPackAPays checks the choice between packed and in-place A on the
// geometry of a Zen 3 core (32 KiB 8-way L1d: 64 sets) with the AVX2
// tiles (6×16, kc=320), worked out by hand in packAPays's doc.
func TestPackAPays(t *testing.T) {
	ks := &kernelSet[float32]{mr: 6, nr: 16, kc: 320, packA: true, l1Sets: 64, l1Ways: 8}
	for _, c := range []struct {
		name    string
		ta      bool
		m, n, k int
		lda     int
		want    bool
	}{
		// Rows 4 KiB apart: 6 lines in each of 20 sets, +5 of the B strip.
		{"1024³: rows collide", false, 1024, 1024, 1024, 1024, true},
		// Rows 2 KiB apart: 3 lines per set + 5 = 8 ways, no eviction.
		{"512³: rows share sets two ways", false, 512, 512, 512, 512, false},
		// Rows 49 lines apart: at most 4 in a set, +5 = 9, one over.
		{"lda 784: rows spread", false, 256, 1024, 784, 784, false},
		{"k=128: short rows", false, 1024, 256, 128, 128, false},
		// Aᵀ: k steps 4 KiB apart, every one in the same set.
		{"Aᵀ with m=1024", true, 1024, 128, 256, 1024, true},
		{"too few strips of B", false, 1024, 48, 1024, 1024, false},
		{"Aᵀ, too few strips of B", true, 1024, 10, 256, 1024, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &problem[float32]{transA: c.ta, m: c.m, n: c.n, k: c.k, lda: c.lda}
			require.Equal(t, c.want, ks.packAPays(p))
			off := *ks
			off.packA = false
			require.False(t, off.packAPays(p), "a set without packA never packs")
		})
	}
}

// TestReadsBInPlace checks which products read B unpacked with the
// AVX-512 set's thresholds (128 rows, 96 when B's rows are a multiple of
// 4 KiB apart: 64 sets of 64-byte lines) and that a parallel call shares
// a packed B (sharesB) exactly when run packs whole blocks of it.
func TestReadsBInPlace(t *testing.T) {
	ks := &kernelSet[float32]{mr: 12, nr: 32, nrHalf: 16, kc: 256, nc: 4096, directMaxM: 128, directAliasMaxM: 96, l1Sets: 64, l1Ways: 12}
	for _, c := range []struct {
		name        string
		tb          bool
		m, ldb      int
		want, share bool
	}{
		{"rows 4 KiB apart, 96 rows", false, 96, 1024, true, false},
		{"rows 4 KiB apart, 97 rows", false, 97, 1024, false, true},
		{"rows 8 KiB apart, 128 rows", false, 128, 2048, false, true},
		{"rows 3 KiB apart, 128 rows", false, 128, 768, true, false},
		{"rows 784 floats apart, 128 rows", false, 128, 784, true, false},
		{"rows 3 KiB apart, 129 rows", false, 129, 768, false, true},
		{"Bᵀ, 97 rows: single strips", true, 97, 1024, false, false},
		{"Bᵀ, 129 rows: whole blocks", true, 129, 1024, false, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			p := &problem[float32]{transB: c.tb, m: c.m, n: 1024, k: 1024, ldb: c.ldb}
			require.Equal(t, c.want, ks.readsBInPlace(p))
			require.Equal(t, c.share, ks.sharesB(p), "sharesB")
			one := *ks
			one.directAliasMaxM = 0
			require.Equal(t, !c.tb && c.m <= 128, one.readsBInPlace(p), "without directAliasMaxM, directMaxM alone")
		})
	}
}

// TestSgemmSharedPanels runs parallel calls whose goroutines share one
// packing of A (sharedPanels: rows of A 4 KiB apart, C split by columns)
// and checks them against the reference and bit for bit against one
// goroutine. Run it with -race.
func TestSgemmSharedPanels(t *testing.T) { testSharedPanels[float32](t) }
func TestDgemmSharedPanels(t *testing.T) { testSharedPanels[float64](t) }

func testSharedPanels[T elem](t *testing.T) {
	forEachSet(t, func(t *testing.T) {
		rng := rand.New(rand.NewPCG(35, 36))
		s := activeSet[T]()
		for _, tr := range [][2]bool{{false, false}, {false, true}, {true, false}, {true, true}} {
			// m=148: the last group takes in rows 144-147 (tiles 6+5+5 from 132).
			shapes := [][3]int{{200, 300, 700}, {1000, 130, 300}, {148, 300, 600}}
			if is64[T]() && !testlong.Enabled() {
				shapes = shapes[2:] // the float32 test covers the driver's cases
			}
			for _, sh := range shapes {
				m, n, k := sh[0], sh[1], sh[2]
				ac := k
				if tr[0] {
					ac = m
				}
				g := newCaseT[T](rng, tr[0], tr[1], m, n, k, 1024-ac, 1, 0.5)
				p := problem[T]{transA: g.ta, transB: g.tb, m: m, n: n, k: k, lda: g.lda}
				if s.packA && s.l1Sets == 64 && s.l1Ways == 8 {
					require.True(t, s.sharesA(&p), "%v shares A", g)
				}
				var one []T
				if raceEnabled {
					one = g.run(1)
				} else {
					one = g.check(t, 1)
				}
				for _, threads := range []int{2, 3} {
					require.Equal(t, one, g.run(threads), "%v threads=%d differs from threads=1", g, threads)
				}
			}
		}
	})
}
