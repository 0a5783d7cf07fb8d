package gemm

import (
	"unsafe"
)

// kernFn is the micro-kernel signature shared by the assembly and Go
// kernels. It computes one mr×nr tile of C, where mr is fixed by the
// function and nr is at most its width:
//
//	C[i*ldc+j] = alpha * Σ_{p<k} A(i,p)·b[p*bs+j] + beta*C[i*ldc+j]
//
// C is not read when beta == 0. The kernel reads its full width of b in every
// row, so b must hold that many readable columns (zero padding of a packed
// strip, or real columns of B past nr). A(i,p) is a[i+p*as] for the
// column-contiguous flavour (flavC) and a[i*as+p] for the row-contiguous one
// (flavR). All strides are in elements. k ≥ 1.
type kernFn[T elem] func(k int, a *T, as int, b *T, bs int, c *T, ldc int, alpha, beta T, nr int)

// A operand flavours: how the kernel walks A.
const (
	flavC = 0 // A(i,p) = a[i + p*as]: op(A) = Aᵀ as stored, or a packed panel
	flavR = 1 // A(i,p) = a[i*as + p]: op(A) = A as stored
)

// kernelSet is one implementation of the micro-kernel layer with its
// blocking parameters, for elements of type T.
type kernelSet[T elem] struct {
	name       string
	mr         int               // rows of the largest kernel
	nr         int               // columns of a wide kernel
	nrHalf     int               // columns of a narrow kernel (== nr if there is one width)
	kern       [2][2][]kernFn[T] // kern[flavour][wide][mr], mr in 1..mr
	kc, nc     int               // k block (A strip and B block depth), n block (B block width)
	directMaxM int               // use B in place (no packing) when op(B) = B and C has at most this many rows
	// directAliasMaxM, if not 0, replaces directMaxM when B's rows are a
	// multiple of an L1 way apart (see readsBInPlace).
	directAliasMaxM int
	oneVectorM      bool           // C with nrHalf rows may be computed as its transpose (useTransposed)
	packA           bool           // copy A strips into contiguous panels (kernP) when B is packed
	kernP           [2][]kernFn[T] // kernP[wide][mr]: kernels for a packed A panel (stride mr) and a packed B strip
	// packATStrips, if packA is not set, packs each mr-row strip of op(A)
	// = Aᵀ as stored into one panel just before the kernels of its row read
	// it, for C wide enough (see stripsAT).
	packATStrips bool
	// kernT[flavour][wide][mr], if not nil, are kernels that store their
	// tile of Cᵀ transposed into C (runTransposed without a tile buffer).
	kernT [2][2][]kernFn[T]
	// packA4 packs 4·kc4 k steps of an mr-row strip of A as stored (op(A) =
	// A) into a panel (dst[q*mr+i] = src[i*lda+q]); nil: Go code.
	packA4 func(dst *T, src *T, lda int, kc4 int)
	// packAT packs ns full mr-row strips of op(A) = Aᵀ as stored, walking
	// its rows; nil: Go code.
	packAT func(dst *T, src *T, lda int, kc int, ns int)
	// l1Sets and l1Ways describe the L1 data cache (64-byte lines), for
	// packAPays; 0 if unknown (then 64 sets of 8 ways).
	l1Sets, l1Ways int
	// packBn packs ns full nr-wide strips of B as stored (op(B) = B),
	// walking its rows, prefetching pf rows ahead; nil: Go code.
	packBn    func(dst *T, src *T, ldb int, kc int, ns int, pf int)
	transpose transposeFunc[T] // packs transposed B strips
	pools     *pools[T]        // the workspaces and jobs of this element type
}

// transposeFunc stores dst[j*ldd+i] = src[i*lds+j] for i < rows, j < cols.
type transposeFunc[T elem] func(dst []T, ldd int, src []T, lds int, rows, cols int)

// problem is one Sgemm or Dgemm call, shared read-only by the goroutines that
// compute it.
type problem[T elem] struct {
	transA, transB bool
	m, n, k        int
	alpha, beta    T
	a, b, c        []T
	lda, ldb, ldc  int
	// sharedA, if not nil, holds the A panels of the whole problem, packed
	// once by whichever goroutine needs them first (parallel calls that
	// split C by columns; see sharedPanels).
	sharedA *sharedPanels[T]
	// sharedB, if not nil, holds op(B) packed once for the goroutines of a
	// parallel call that splits C by rows (see sharedB).
	sharedB *sharedB[T]
}

// workspace holds one goroutine's packing buffers. Buffers are aligned to 64
// bytes and reused through the pools of their element type (pools.ws), so
// steady-state calls do not allocate.
type workspace[T elem] struct {
	b    []T // packed B block, or the packed edge strip when B is used in place
	a    []T // packed A block (kernelSet.packA)
	tile []T // one tile of Cᵀ (runTransposed)
}

// bufB returns a buffer of at least n floats, aligned to 64 bytes.
func (w *workspace[T]) bufB(n int) []T {
	if cap(w.b) < n {
		w.b = alignedFloats[T](n)
	}
	return w.b[:n]
}

// bufA returns a buffer of at least n floats, aligned to 64 bytes.
func (w *workspace[T]) bufA(n int) []T {
	if cap(w.a) < n {
		w.a = alignedFloats[T](n)
	}
	return w.a[:n]
}

// bufTile returns the buffer for one transposed tile of C.
func (w *workspace[T]) bufTile(n int) []T {
	if cap(w.tile) < n {
		w.tile = alignedFloats[T](n)
	}
	return w.tile[:n]
}

// alignedFloats returns a zeroed slice of n elements starting on a 64-byte
// boundary.
func alignedFloats[T elem](n int) []T {
	size := int(unsafe.Sizeof(T(0)))
	buf := make([]T, n+64/size)
	off := 0
	if r := uintptr(unsafe.Pointer(&buf[0])) % 64; r != 0 {
		off = int(64-r) / size
	}
	return buf[off : off+n : off+n]
}

// run computes rows [i0,i1) and columns [j0,j1) of C on the calling
// goroutine: the blocked GotoBLAS/BLIS loop nest around the micro-kernel.
//
//	for pc over k by kc:            beta applies to the first k block only
//	  for jc over [j0,j1) by nc:    B block kc×nc: packed strips of nr columns (L2), or in place
//	    for ir over [i0,i1) by mr:  A strip mr×kc read in place (stays in L1)
//	      for jr over nc by nr:     micro-kernel on one mr×nr tile of C
func (ks *kernelSet[T]) run(p *problem[T], i0, i1, j0, j1 int, ws *workspace[T]) {
	// Choices of method depend on the whole problem, not on the block, so
	// that every element of C is computed the same way (bit for bit) however
	// C is split across goroutines.
	if ks.useTransposed(p) {
		ks.runTransposed(p, i0, i1, j0, j1, ws)
		return
	}
	MR, NR, KC, NC := ks.mr, ks.nr, ks.kc, ks.nc
	fl := flavR
	if p.transA {
		fl = flavC
	}
	kern := &ks.kern[fl]
	direct := ks.readsBInPlace(p)
	packA := !direct && ks.packAPays(p)
	stripA := !direct && !packA && ks.stripsAT(p, j1-j0)
	var panel []T // stripA: the current strip of op(A), packed
	if stripA {
		panel = ws.bufA(MR * min(KC, p.k))
	}
	if p.transB && p.m <= ks.directMaxM {
		// Few rows of C use each packed strip of Bᵀ: pack one strip at a
		// time, so it is still in L1 when the kernels read it.
		NC = NR
	}
	for pc := 0; pc < p.k; pc += KC {
		kc := min(KC, p.k-pc)
		beta := p.beta
		if pc > 0 {
			beta = 1
		}
		var pa []T
		sh := p.sharedA
		switch {
		case packA && sh != nil:
			pa = sh.block(pc)
		case packA:
			pa = ws.bufA((i1 - i0 + MR) * kc)
			ks.packABlock(pa, p, i0, i1, pc, kc)
		}
		for jc := j0; jc < j1; jc += NC {
			nc := min(NC, j1-jc)
			var packed []T
			kin := kc // rows of the last strip read in place (direct mode)
			if direct {
				// The last strip may be narrower than its kernel, which then
				// reads columns past n. That is harmless (those lanes are
				// never stored) as long as the reads stay inside b, which
				// fails only for the last row or few of B: only those rows
				// are packed, and the strip takes two kernel calls.
				last := (nc - 1) / NR * NR
				w := ks.width(nc - last)
				col := jc + last
				if avail := len(p.b) - col - w; avail < 0 {
					kin = 0
				} else {
					kin = min(kc, max(0, avail/p.ldb+1-pc))
				}
				if kin < kc {
					packed = ws.bufB((kc - kin) * w)
					packRows(packed, w, p.b[(pc+kin)*p.ldb+col:], p.ldb, kc-kin, min(w, p.n-col))
				}
			} else if p.sharedB != nil { // jc = 0, nc = n
				packed = p.sharedB.block(ks, p, pc, kc)
			} else {
				strips := (nc + NR - 1) / NR
				packed = ws.bufB(kc * strips * NR)
				ks.packBStrips(packed, p, pc, kc, jc, nc, 0, strips)
			}
			ready := 0 // rows of the shared panels known to be packed
			for ir, mr := i0, 0; ir < i1; ir += mr {
				mr = tileRows(MR, i1-ir)
				if packA && sh != nil && ir >= ready {
					ready = sh.ensure(ks, p, pc, kc, ir)
				}
				var ap *T
				as := p.lda
				switch {
				case packA:
					ap, as = &pa[(ir-i0)*kc], mr
				case stripA:
					ks.packATStrip(panel, p, ir, mr, pc, kc)
					ap, as = &panel[0], mr
				case p.transA:
					ap = &p.a[pc*p.lda+ir]
				default:
					ap = &p.a[ir*p.lda+pc]
				}
				for jr := 0; jr < nc; jr += NR {
					nr := min(NR, nc-jr)
					wide := 0
					if nr > ks.nrHalf {
						wide = 1
					}
					cp := &p.c[ir*p.ldc+jc+jr]
					switch {
					case packA || stripA:
						ks.kernP[wide][mr](kc, ap, as, &packed[jr*kc], ks.width(nr), cp, p.ldc, p.alpha, beta, nr)
					case !direct:
						kern[wide][mr](kc, ap, as, &packed[jr*kc], ks.width(nr), cp, p.ldc, p.alpha, beta, nr)
					case jr+NR < nc || kin == kc:
						kern[wide][mr](kc, ap, as, &p.b[pc*p.ldb+jc+jr], p.ldb, cp, p.ldc, p.alpha, beta, nr)
					default:
						// Last strip: kin rows in place, the rest packed.
						b2 := beta
						if kin > 0 {
							kern[wide][mr](kin, ap, as, &p.b[pc*p.ldb+jc+jr], p.ldb, cp, p.ldc, p.alpha, beta, nr)
							b2 = 1
						}
						var ap2 *T
						if p.transA {
							ap2 = &p.a[(pc+kin)*p.lda+ir]
						} else {
							ap2 = &p.a[ir*p.lda+pc+kin]
						}
						kern[wide][mr](kc-kin, ap2, as, &packed[0], ks.width(nr), cp, p.ldc, p.alpha, b2, nr)
					}
				}
			}
		}
	}
}

// useTransposed reports whether to compute C as its transpose (see
// runTransposed), for a C too narrow to fill the kernel's vectors. With
// op(A) = Aᵀ the transposed problem reads everything in place and wins up to
// n = MR; with op(A) = A its vector operand must be transposed into strips,
// which pays only when the plain kernel would waste most of its lanes
// (n ≤ 5/8 of the narrow width: 10 of 16 on AVX-512).
//
// It also computes op(A)·Bᵀ with few rows of C as Cᵀ = B·op(A)ᵀ: the plain
// method transposes all of B into strips for those few rows (a
// data-parallel device's input gradient dY·Wᵀ transposes the whole weight
// for its slice of the batch), while the transposed one reads B in place
// and transposes only the small op(A). It pays when the m rows fill the
// wide kernel's vectors, NRHalf < m ≤ NR: measured on Sapphire Rapids
// (AVX-512, GFLOP per CPU-second, medians of 5), m=32 n=k=1024 went from
// 100 to 116-120; at m=16 (the narrow kernel) one shape gained 23% and
// another lost 14%, and at m=128 it lost 17%.
//
// With oneVectorM, m equal to the narrow width (a batch of 16 on
// AVX-512: one vector of rows of C) takes both transposed paths too: a
// narrow C, and op(A)·Bᵀ wider than one strip (n > NR: at n = NR = 32,
// k = 128, one packed strip ran at 176 against 147 transposed; n = 36 and
// 48 won, 106 → 193 and 174 → 197). That set's kernT kernels store each
// tile of Cᵀ transposed in registers. Measured on AMD EPYC Zen 5 (GFLOP per
// CPU-second, alternated binaries, 2026-11-28), m=16 with Bᵀ, packed →
// transposed through a tile buffer → kernT: n=128, k=256 177 → 207 →
// 211; n=256, k=128 189 → 197 → 209; n=k=64 179 → 177 → 185; n=128,
// k=32 157 → 146 → 176; k=10 90 → 71 → 110 (the tile transposes lost
// below k=128); a 16×10 C from k=128 92 → 131 → 135. m=20 and m=24 lost
// (45 → 32, 99 → 77 through the buffer), as did m=8 with Bᵀ on the AVX2
// set (83 → 78), which has no kernT.
func (ks *kernelSet[T]) useTransposed(p *problem[T]) bool {
	one := ks.oneVectorM && p.m == ks.nrHalf
	if p.transB && (p.m > ks.nrHalf || one && p.n > ks.nr) && p.m <= smallMNT*ks.nr && p.n >= 2*ks.nrHalf {
		return true
	}
	if p.n > ks.mr || p.n >= ks.nrHalf || p.m < 2*ks.nrHalf && !one {
		return false
	}
	return p.transA || 8*p.n <= 5*ks.nrHalf
}

// smallMNT bounds, in kernel widths, the rows of C for which op(A)·Bᵀ is
// computed as its transpose (see useTransposed); 0 turns that off.
var smallMNT = 1

// runTransposed computes rows [i0,i1) and columns [j0,j1) of C through
// Cᵀ = op(B)ᵀ·op(A)ᵀ: the kernel's vectors span rows of C and its
// broadcasts walk op(B)ᵀ (columns of C, read in place), so a narrow C (a
// classifier's 4 or 10 outputs) uses whole vectors instead of a few lanes.
// The vector operand op(A)ᵀ is A as stored when op(A) = Aᵀ (read in place)
// and is otherwise transposed into strips. Each tile of Cᵀ goes through a
// small buffer and is added to C transposed.
func (ks *kernelSet[T]) runTransposed(p *problem[T], i0, i1, j0, j1 int, ws *workspace[T]) {
	MR, NR, KC := ks.mr, ks.nr, ks.kc
	// A' = op(B)ᵀ, n×k: A'(r,q) = op(B)(q,r).
	fl := flavC // b[q*ldb + r]
	if p.transB {
		fl = flavR // b[r*ldb + q]
	}
	kern := &ks.kern[fl]
	tile := ws.bufTile(MR * NR)
	for pc := 0; pc < p.k; pc += KC {
		kc := min(KC, p.k-pc)
		beta := p.beta
		if pc > 0 {
			beta = 1
		}
		// B' = op(A)ᵀ, k×m: B'(q,i) = op(A)(i,q).
		for ir := i0; ir < i1; ir += NR {
			nr := min(NR, i1-ir)
			w := ks.width(nr)
			var bp *T
			bs := p.lda
			switch {
			case !p.transA:
				// op(A)ᵀ(q,i) = a[i*lda + q]: transpose nr rows of A.
				packed := ws.bufB(kc * w)
				ks.transpose(packed, w, p.a[ir*p.lda+pc:], p.lda, nr, kc)
				if nr < w {
					for q := 0; q < kc; q++ {
						clear(packed[q*w+nr : q*w+w])
					}
				}
				bp, bs = &packed[0], w
			case ir+w > p.m:
				// A as stored, but the kernel's full width reaches past
				// column m (past the end of a in the last row): pack.
				packed := ws.bufB(kc * w)
				packRows(packed, w, p.a[pc*p.lda+ir:], p.lda, kc, nr)
				bp, bs = &packed[0], w
			default:
				bp = &p.a[pc*p.lda+ir] // A as stored: a[q*lda + i]
			}
			wide := 0
			if nr > ks.nrHalf {
				wide = 1
			}
			kernT := ks.kernT[fl][wide]
			tall := MR // the tallest tile of Cᵀ
			if kernT != nil && wide == 0 {
				// The narrow transposed-store kernels go to 16 rows:
				// every row of their 16×16 transposes is stored.
				tall = len(kernT) - 1
			}
			for jr, mr := j0, 0; jr < j1; jr += mr {
				mr = tileRows(tall, j1-jr)
				var ap *T
				if p.transB {
					ap = &p.b[jr*p.ldb+pc]
				} else {
					ap = &p.b[pc*p.ldb+jr]
				}
				if kernT != nil && (wide == 0 || mr >= kernTWideMinMR) {
					// C[ir+i][jr+j] for i < nr, j < mr: the kernel's
					// extent in C.
					_ = p.c[(ir+nr-1)*p.ldc+jr+mr-1]
					kernT[mr](kc, ap, p.ldb, bp, bs, &p.c[ir*p.ldc+jr], p.ldc, p.alpha, beta, nr)
					continue
				}
				kern[wide][mr](kc, ap, p.ldb, bp, bs, &tile[0], NR, p.alpha, 0, nr)
				// C[ir+i][jr+j] = tile[j][i] + beta*C[ir+i][jr+j]
				if beta == 0 {
					// A plain transpose: the set's blocked one.
					ks.transpose(p.c[ir*p.ldc+jr:], p.ldc, tile, NR, mr, nr)
					continue
				}
				for i := 0; i < nr; i++ {
					row := p.c[(ir+i)*p.ldc+jr : (ir+i)*p.ldc+jr+mr]
					for j := range row {
						row[j] = tile[j*NR+i] + beta*row[j]
					}
				}
			}
		}
	}
}

// kernTWideMinMR is the fewest rows of Cᵀ for which a 32-wide tile is
// stored by a kernT kernel: with fewer, transposing 16×16 blocks in
// registers costs more than the tile buffer's copy (a 128×4 C from k = 16
// ran at 23 GFLOP per CPU-second against 47; 128×10: 108 → 126; m = 32,
// n = k = 1024 with Bᵀ, 12-row tiles: 179 → 205; Zen 5, 4 alternated
// rounds). Both stores give the same bits, so mixing them is safe.
const kernTWideMinMR = 9

// tileRows is the height of the next row tile when rem rows are left: full
// tiles, except that a remainder between one and two tiles is split into two
// near-equal tiles (16 rows as 8+8 rather than 12+4), since a short tile has
// too few independent accumulators to hide the FMA latency.
func tileRows(MR, rem int) int {
	if rem <= MR {
		return rem
	}
	if rem < 2*MR {
		return (rem + 1) / 2
	}
	return MR
}

// width is the number of B columns the kernel for an nr-column tile reads.
func (ks *kernelSet[T]) width(nr int) int {
	if nr <= ks.nrHalf {
		return ks.nrHalf
	}
	return ks.nr
}

// readsBInPlace reports whether run reads op(B) = B in place, unpacked:
// when C has at most directMaxM rows, or at most directAliasMaxM if that is
// set and B's rows are a multiple of an L1 way (64-byte lines times the
// sets) apart, as a 1024-wide float32 B is, so that the in-place strip's
// rows all fall in the same few sets. Packing B costs one pass over it,
// amortized over the rows of C; in place, rows that collide read slower
// (see directAliasMaxM in kernels_amd64.go for the figures).
func (ks *kernelSet[T]) readsBInPlace(p *problem[T]) bool {
	if p.transB || p.m > ks.directMaxM {
		return false
	}
	if ks.directAliasMaxM == 0 || p.m <= ks.directAliasMaxM {
		return true
	}
	sets := ks.l1Sets
	if sets <= 0 {
		sets = 64
	}
	return p.ldb*int(unsafe.Sizeof(T(0)))%(64*sets) != 0
}

// packAPays reports whether the kernels should read A from packed panels
// (packABlock) rather than in place, when B is packed. A strip of A is
// read once per NR-wide strip of B; in place, its rows (op(A) = A) or its
// k steps (op(A) = Aᵀ, mr useful elements per 64-byte line) may map to so
// few L1 sets that they do not survive the B strip streaming past: with
// 1024×1024 operands on Zen 3 (32 KiB, 8-way L1d), the six rows of a strip
// are 4 KiB apart, all in the same 20 of 64 sets, where the B strip adds
// 5 lines to each set. Packing costs about one pass over A per k block, so
// it needs a few strips of B to pay (n ≥ 4·NR).
//
// Measured on AMD EPYC Zen 3 (AVX2 set, GFLOP per CPU-second, medians of
// interleaved runs in one process): 1024³ 63 → 71; Aᵀ·B with m=1024, n=128,
// k=256: 34 → 45; in-place A was as fast or faster where its rows do not
// collide (512³, k ≤ 128; 256×1024×784 where 9 lines share a set
// measured a wash) and where n ≤ 16 (A·B with m=256,
// n=10, k=1024: 39 in place, 24 packed).
func (ks *kernelSet[T]) packAPays(p *problem[T]) bool {
	if !ks.packA || p.n < 4*ks.nr {
		return false
	}
	sets, ways := ks.l1Sets, ks.l1Ways
	if sets <= 0 || ways <= 0 {
		sets, ways = 64, 8
	}
	kc := min(ks.kc, p.k)
	size := int(unsafe.Sizeof(T(0)))
	// Lines per set that the B strip streaming past occupies.
	bLines := (kc*ks.nr*size + 64*sets - 1) / (64 * sets)
	// The most lines of one A strip that map to one set.
	var occ [256]int
	if sets > len(occ) {
		return true
	}
	most := 0
	add := func(byteOff, bytes int) {
		for l := byteOff / 64; l <= (byteOff+bytes-1)/64; l++ {
			s := l % sets
			occ[s]++
			most = max(most, occ[s])
		}
	}
	if p.transA {
		for q := 0; q < kc; q++ {
			add(q*p.lda*size, ks.mr*size)
		}
	} else {
		for i := 0; i < ks.mr; i++ {
			add(i*p.lda*size, kc*size)
		}
	}
	// One line over the ways measured as a wash (lda=784: 4+5 lines in
	// the busiest sets of 8 ways).
	return most+bLines > ways+1
}

// stripsAT reports whether run packs each mr-row strip of op(A) = Aᵀ as
// stored into one panel just before the kernels of its row read it
// (kernelSet.packATStrips; B packed, A not packed by blocks): when the
// block of C a goroutine computes is at least stripATMinStrips strips of B
// wide (width columns), so that the panel, in L1, serves that many kernel
// calls. The kernel is the same either way (kernP is the column flavour),
// so the choice may depend on the block without changing any bits. In place, a strip's k steps are each mr floats of
// another row of A; with A's rows 4 KiB apart (a weight gradient Xᵀ·dY
// whose X is 1024 wide) all of them fall in one L1 set and come again from
// L2 for every strip of B, and even at 784 floats apart (4 lines a set)
// they compete with the B strip. A panel is 12 KiB (k = 256), read from
// L2 once. Unlike packing A by blocks (packABlock, a 1 MiB block for the
// weight gradient's 1024 rows: tried on this set and lost the kernel's gain
// to packing and L2 pressure), the packed A never leaves L1.
//
// Measured on a Sapphire Rapids VM (AVX-512 set, one core, GFLOP per
// CPU-second, BenchmarkSgemm dW_TN, alternated, 4 rounds, load 10-18),
// in place against panels: m=n=1024, k=256 119-131 / 141-152; m=784,
// n=1024, k=256 132-136 / 145-151; m=n=1024 with k=128 127-134 / 144-156,
// k=32 117-124 / 130-141. With n = 128 (4 strips) panels tied or lost up
// to 5%, n = 256 and 384 tied: hence 8 strips.
func (ks *kernelSet[T]) stripsAT(p *problem[T], width int) bool {
	if !ks.packATStrips || !p.transA {
		return false
	}
	switch stripATMode {
	case 1:
		return true
	case -1:
		return false
	}
	return width >= stripATMinStrips*ks.nr
}

// stripATMinStrips is the fewest strips of B for which stripsAT packs the
// strips of a transposed A.
const stripATMinStrips = 8

// stripATMode overrides the rule of stripsAT for tests and benchmarks: 1
// packs the strips of every transposed A (when B is packed), -1 none, 0
// follows the rule.
var stripATMode = 0

// packATStrip packs rows [ir, ir+mr) of op(A)[:, pc:pc+kc] = Aᵀ as stored
// into dst as one panel of the kernP kernels: dst[q*mr+i] =
// a[(pc+q)*lda+ir+i].
func (ks *kernelSet[T]) packATStrip(dst []T, p *problem[T], ir, mr, pc, kc int) {
	if mr == ks.mr && ks.packAT != nil {
		// Bounds: the last element read and the last written.
		_ = p.a[(pc+kc-1)*p.lda+ir+mr-1]
		_ = dst[kc*mr-1]
		ks.packAT(&dst[0], &p.a[pc*p.lda+ir], p.lda, kc, 1)
		return
	}
	for q := 0; q < kc; q++ {
		copy(dst[q*mr:q*mr+mr], p.a[(pc+q)*p.lda+ir:])
	}
}

// packABlock copies rows [i0,i1) of op(A)[:, pc:pc+kc] into dst as the
// panels the kernP kernels read: one per row tile (tileRows), the tile at
// row ir at dst[(ir-i0)*kc:], holding dst[q*mr+i] = op(A)(ir+i, pc+q).
func (ks *kernelSet[T]) packABlock(dst []T, p *problem[T], i0, i1, pc, kc int) {
	if p.transA {
		// op(A)(i, q) = a[q*lda + i]: walk the rows of a, each contiguous
		// over [i0, i1), and deal them out to the panels.
		ir := i0
		if ks.packAT != nil {
			ns := 0 // leading full-height tiles
			for ir < i1 && tileRows(ks.mr, i1-ir) == ks.mr {
				ir += ks.mr
				ns++
			}
			if ns > 0 {
				// Bounds: the last element read and the last written.
				_ = p.a[(pc+kc-1)*p.lda+ir-1]
				_ = dst[(ir-i0)*kc-1]
				ks.packAT(&dst[0], &p.a[pc*p.lda+i0], p.lda, kc, ns)
			}
		}
		for q := 0; q < kc && ir < i1; q++ {
			src := p.a[(pc+q)*p.lda+ir : (pc+q)*p.lda+i1]
			for jr, mr := ir, 0; jr < i1; jr += mr {
				mr = tileRows(ks.mr, i1-jr)
				off := (jr-i0)*kc + q*mr
				copy(dst[off:off+mr], src[jr-ir:])
			}
		}
		return
	}
	for ir, mr := i0, 0; ir < i1; ir += mr {
		mr = tileRows(ks.mr, i1-ir)
		d := dst[(ir-i0)*kc : (ir-i0+mr)*kc]
		q0 := 0
		if mr == ks.mr && ks.packA4 != nil && kc >= 4 {
			// Bounds: the last element read.
			_ = p.a[(ir+mr-1)*p.lda+pc+kc/4*4-1]
			ks.packA4(&d[0], &p.a[ir*p.lda+pc], p.lda, kc/4)
			q0 = kc / 4 * 4
		}
		for i := 0; i < mr; i++ {
			src := p.a[(ir+i)*p.lda+pc : (ir+i)*p.lda+pc+kc]
			for q := q0; q < kc; q++ {
				d[q*mr+i] = src[q]
			}
		}
	}
}

// packBRows copies ns whole NR-wide strips of B as stored, starting at
// src[0], into dst (strip s at dst[s*kc*NR:], kc rows of NR floats),
// walking B row by row.
func (ks *kernelSet[T]) packBRows(dst []T, src []T, ldb, kc, ns int) {
	NR := ks.nr
	if ns == 0 {
		return
	}
	if ks.packBn != nil {
		// Bounds: the last element read and the last written.
		_ = src[(kc-1)*ldb+ns*NR-1]
		_ = dst[ns*kc*NR-1]
		ks.packBn(&dst[0], &src[0], ldb, kc, ns, packBPrefetch)
		return
	}
	for q := 0; q < kc; q++ {
		row := src[q*ldb : q*ldb+ns*NR]
		for s := 0; s < ns; s++ {
			copy(dst[s*kc*NR+q*NR:s*kc*NR+q*NR+NR], row[s*NR:])
		}
	}
}

// packBStrips packs strips [s0, s1) of the block of op(B) at rows pc (kc
// of them) and columns jc (nc of them) into packed, strip s at s*NR*kc:
// whole strips row by row when B is not transposed (each row of the block
// is contiguous in B), the others through packB.
func (ks *kernelSet[T]) packBStrips(packed []T, p *problem[T], pc, kc, jc, nc, s0, s1 int) {
	NR := ks.nr
	if whole := min(s1, nc/NR); !p.transB && s0 < whole {
		ks.packBRows(packed[s0*NR*kc:], p.b[pc*p.ldb+jc+s0*NR:], p.ldb, kc, whole-s0)
		s0 = whole
	}
	for s := s0; s < s1; s++ {
		jr := s * NR
		nr := min(NR, nc-jr)
		ks.packB(packed[jr*kc:], ks.width(nr), p, pc, kc, jc+jr, nr)
	}
}

// packBPrefetch is how many rows ahead packBn prefetches B.
var packBPrefetch = 4

// packB copies op(B)[pc:pc+kc, j:j+nr] into dst as kc rows of w floats,
// zero-filling columns nr..w-1.
func (ks *kernelSet[T]) packB(dst []T, w int, p *problem[T], pc, kc, j, nr int) {
	dst = dst[:kc*w]
	if p.transB {
		// op(B)(q, j) = b[j*ldb + q]: a transpose of nr rows of b.
		ks.transpose(dst, w, p.b[j*p.ldb+pc:], p.ldb, nr, kc)
		if nr < w {
			for q := 0; q < kc; q++ {
				clear(dst[q*w+nr : q*w+w])
			}
		}
		return
	}
	packRows(dst, w, p.b[pc*p.ldb+j:], p.ldb, kc, nr)
}

// packRows copies src[q*ld : q*ld+nr] to dst[q*w : q*w+nr] for q < kc and
// zero-fills columns nr..w-1.
func packRows[T elem](dst []T, w int, src []T, ld, kc, nr int) {
	dst = dst[:kc*w]
	if nr == w {
		for q := 0; q < kc; q++ {
			copy(dst[q*w:q*w+w], src[q*ld:])
		}
		return
	}
	// An edge strip: rows are short, so clear once and copy element by
	// element rather than calling copy and clear for every row.
	clear(dst)
	for q := 0; q < kc; q++ {
		d := dst[q*w : q*w+nr]
		//lint:ignore S1001 rows of at most a few floats: the loop beats a call to copy
		for c, v := range src[q*ld : q*ld+nr] {
			d[c] = v
		}
	}
}

// transposeGo is the portable transposeFunc.
func transposeGo[T elem](dst []T, ldd int, src []T, lds int, rows, cols int) {
	// 4×4 blocks keep four source rows streaming and write whole groups.
	i := 0
	for ; i+4 <= rows; i += 4 {
		s0 := src[i*lds : i*lds+cols]
		s1 := src[(i+1)*lds : (i+1)*lds+cols]
		s2 := src[(i+2)*lds : (i+2)*lds+cols]
		s3 := src[(i+3)*lds : (i+3)*lds+cols]
		for j := range s0 {
			d := dst[j*ldd+i : j*ldd+i+4 : j*ldd+i+4]
			d[0], d[1], d[2], d[3] = s0[j], s1[j], s2[j], s3[j]
		}
	}
	for ; i < rows; i++ {
		s := src[i*lds : i*lds+cols]
		for j, v := range s {
			dst[j*ldd+i] = v
		}
	}
}
