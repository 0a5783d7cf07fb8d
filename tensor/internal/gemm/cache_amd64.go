//go:build amd64 && !noasm

package gemm

// cpuid executes CPUID with EAX=leaf and ECX=sub.
func cpuid(leaf, sub uint32) (eax, ebx, ecx, edx uint32)

// cpuInfo is what the blocking depends on: the vendor and family (Zen
// generation) and the per-core data cache sizes in bytes (0 if the CPU does
// not report them).
type cpuInfo struct {
	vendor   string // "GenuineIntel", "AuthenticAMD", ...
	family   int    // display family (0x19 = Zen 3/4, 0x1A = Zen 5)
	model    int    // display model
	l1d, l2  int
	l1Ways   int  // associativity of the L1d (0 if unknown)
	fromCPUs bool // the sizes came from CPUID (not the defaults)
}

// detectCPU reads the vendor, family and the L1d and L2 sizes from CPUID:
// the deterministic cache parameters of leaf 4 (Intel) or 0x8000001D (AMD,
// with topology extensions), each subleaf one cache: type in EAX[4:0]
// (1 data, 3 unified), level in EAX[7:5], and size = ways · partitions ·
// line size · sets from EBX and ECX.
func detectCPU() cpuInfo {
	var ci cpuInfo
	maxLeaf, b, c, d := cpuid(0, 0)
	ci.vendor = string([]byte{
		byte(b), byte(b >> 8), byte(b >> 16), byte(b >> 24),
		byte(d), byte(d >> 8), byte(d >> 16), byte(d >> 24),
		byte(c), byte(c >> 8), byte(c >> 16), byte(c >> 24),
	})
	if maxLeaf >= 1 {
		a, _, _, _ := cpuid(1, 0)
		fam := int(a>>8) & 0xf
		model := int(a>>4) & 0xf
		if fam == 0xf {
			fam += int(a>>20) & 0xff
		}
		if fam == 0x6 || fam >= 0xf {
			model += int(a>>12) & 0xf0
		}
		ci.family, ci.model = fam, model
	}
	leaf := uint32(4)
	if ci.vendor == "AuthenticAMD" || ci.vendor == "HygonGenuine" {
		ext, _, _, _ := cpuid(0x80000000, 0)
		_, _, c1, _ := cpuid(0x80000001, 0)
		if ext < 0x8000001D || c1&(1<<22) == 0 { // no topology extensions
			return ci
		}
		leaf = 0x8000001D
	} else if maxLeaf < 4 {
		return ci
	}
	for sub := uint32(0); sub < 16; sub++ {
		a, b, c, _ := cpuid(leaf, sub)
		typ := a & 0x1f
		if typ == 0 {
			break
		}
		level := (a >> 5) & 7
		size := int((b>>22)&0x3ff+1) * int((b>>12)&0x3ff+1) * int(b&0xfff+1) * int(c+1)
		switch {
		case level == 1 && typ == 1:
			ci.l1d = size
			ci.l1Ways = int((b>>22)&0x3ff + 1)
		case level == 2 && (typ == 3 || typ == 1):
			ci.l2 = size
		}
	}
	ci.fromCPUs = ci.l1d > 0 && ci.l2 > 0
	return ci
}
