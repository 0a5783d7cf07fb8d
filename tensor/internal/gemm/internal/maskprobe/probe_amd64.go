package maskprobe

// The probes of probe_amd64.s: func(p, n, m) runs n iterations of eight
// vector accesses at p with K1 = m.
type probe func(p *float32, n int, m uint16)

// full: unmasked loads at p..p+448.
func full(p *float32, n int, m uint16)

// zmask: zero-masked loads (VMOVUPS.Z (mem), K1, Z) at p..p+448.
func zmask(p *float32, n int, m uint16)

// mmask: merge-masked loads (VMOVUPS (mem), K1, Z) at p..p+448.
func mmask(p *float32, n int, m uint16)

// regmask: unmasked loads, then zero-masking in a register.
func regmask(p *float32, n int, m uint16)

// fullstore: unmasked stores at p..p+448.
func fullstore(p *float32, n int, m uint16)

// mstore: masked stores (VMOVUPS Z, K1, (mem)) at p..p+448.
func mstore(p *float32, n int, m uint16)

// fmamem: FMAs with an unmasked memory operand at p..p+448.
func fmamem(p *float32, n int, m uint16)

// fmamemk: merge-masked FMAs with a memory operand at p..p+448.
func fmamemk(p *float32, n int, m uint16)

// zmask1: eight zero-masked loads of p.
func zmask1(p *float32, n int, m uint16)

// mstore1: eight masked stores to p.
func mstore1(p *float32, n int, m uint16)

// fmak1: eight merge-masked FMAs with memory operand p.
func fmak1(p *float32, n int, m uint16)

// store1: eight unmasked stores to p.
func store1(p *float32, n int, m uint16)

// fwdz: a store to p, then a zero-masked load of p (one a iteration).
func fwdz(p *float32, n int, m uint16)

// fwdf: a store to p, then an unmasked load of p.
func fwdf(p *float32, n int, m uint16)

// cmpzload: dst = y > 0 ? g : 0 over n vectors (n even), the mask from a
// compare of y just before a zero-masked load of g.
func cmpzload(dst, gp, y *float32, n int)

// cmpregz: cmpzload with g loaded whole and zero-masked in a register.
func cmpregz(dst, gp, y *float32, n int)

// streamf: n consecutive unmasked vector loads from p.
func streamf(p *float32, n int, m uint16)

// streamz: n consecutive zero-masked vector loads from p.
func streamz(p *float32, n int, m uint16)

// streamzp: streamz with a software prefetch 1 KB ahead.
func streamzp(p *float32, n int, m uint16)
