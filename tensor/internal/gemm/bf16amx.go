package gemm

import "sync"

// amxReady asks the OS for the AMX tile state the first time it is called
// (not at start-up: a program that never multiplies bfloat16 matrices
// never asks) and reports whether it was granted.
var amxReady = sync.OnceValue(amxPermitted)

// The AMX path of Bgemm (Intel Sapphire Rapids and later): a blocked loop
// around amxKernel32x32, which computes a 32×32 block of C with four
// 16×16 float32 tiles. A is packed into row-major panels of 32 rows, B
// into the k-pair strips of 32 columns the AVX-512 kernel uses (the layout
// TDPBF16PS wants for B), both zero-padded to whole blocks of 32 k.
// TDPBF16PS flushes subnormal inputs and results to zero and rounds its
// sums to nearest even, so the results are those of float32 accumulation
// (within the bounds the tests check), not bit for bit Sgemm's.

const (
	amxMR = 32
	amxNR = 32
	amxKC = 512 // k values per block: a multiple of 32
	amxNC = 1024
)

// amxConfig is the tile configuration (palette 1; tmm0-7 all 16 rows of
// 64 bytes), built once and only read.
var amxConfig = func() *[64]byte {
	var c [64]byte
	c[0] = 1 // palette
	for t := 0; t < 8; t++ {
		c[16+2*t] = 64 // bytes per row
		c[48+t] = 16   // rows
	}
	return &c
}()

// amxWorkspace holds one goroutine's panels.
type amxWorkspace struct {
	a    []uint16
	b    []uint32
	tile [amxMR * amxNR]float32
}

var amxPool = sync.Pool{New: func() any { return new(amxWorkspace) }}

// runAMX computes rows [i0,i1) and columns [j0,j1) of C with AMX.
func (p *bproblem) runAMX(i0, i1, j0, j1 int) {
	ws := amxPool.Get().(*amxWorkspace)
	defer amxPool.Put(ws)
	for jc := j0; jc < j1; jc += amxNC {
		nc := min(amxNC, j1-jc)
		strips := (nc + amxNR - 1) / amxNR
		for pc := 0; pc < p.k; pc += amxKC {
			kc := min(amxKC, p.k-pc)
			kpad := (kc + 31) &^ 31
			kp := kpad / 2 // pair-rows per strip
			if cap(ws.b) < strips*kp*amxNR {
				ws.b = make([]uint32, strips*kp*amxNR)
			}
			pb := ws.b[:strips*kp*amxNR]
			for s := 0; s < strips; s++ {
				strip := pb[s*kp*amxNR : (s+1)*kp*amxNR]
				p.packB(strip, pc, kc, jc+s*amxNR, min(amxNR, nc-s*amxNR))
				clear(strip[(kc+1)/2*amxNR:])
			}
			if cap(ws.a) < amxMR*kpad {
				ws.a = make([]uint16, amxMR*kpad)
			}
			pa := ws.a[:amxMR*kpad]
			acc := 0
			if pc > 0 {
				acc = 1
			}
			for ir := i0; ir < i1; ir += amxMR {
				mr := min(amxMR, i1-ir)
				p.packAMX(pa, kpad, pc, kc, ir, mr)
				for s := 0; s < strips; s++ {
					col := jc + s*amxNR
					nr := min(amxNR, nc-s*amxNR)
					bs := &pb[s*kp*amxNR]
					if mr == amxMR && nr == amxNR {
						amxKernel32x32(kpad/32, &pa[0], kpad, bs, &p.c[ir*p.ldc+col], p.ldc, &amxConfig[0], acc)
						continue
					}
					amxKernel32x32(kpad/32, &pa[0], kpad, bs, &ws.tile[0], amxNR, &amxConfig[0], 0)
					p.storeTile(ws.tile[:], amxNR, ir, col, mr, nr, acc)
				}
			}
		}
	}
}

// packAMX packs rows [ir, ir+mr) of op(A), k values [pc, pc+kc), into a
// row-major panel of 32 rows of kpad values: dst[i*kpad+kk] = A(ir+i,
// pc+kk), zero past the edges.
func (p *bproblem) packAMX(dst []uint16, kpad, pc, kc, ir, mr int) {
	if mr < amxMR || kc < kpad {
		clear(dst)
	}
	a, lda := p.a, p.lda
	if !p.transA {
		for i := 0; i < mr; i++ {
			copy(dst[i*kpad:i*kpad+kc], a[(ir+i)*lda+pc:(ir+i)*lda+pc+kc])
		}
		return
	}
	for kk := 0; kk < kc; kk++ {
		src := a[(pc+kk)*lda+ir : (pc+kk)*lda+ir+mr]
		for i, v := range src {
			dst[i*kpad+kk] = v
		}
	}
}
