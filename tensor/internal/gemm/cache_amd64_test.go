//go:build amd64 && !noasm

package gemm

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// sysfsCache reads the size of cpu0's cache of the given level and type
// ("Data" or "Unified") from Linux's sysfs, or 0.
func sysfsCache(level int, typ string) int {
	for i := 0; i < 8; i++ {
		dir := "/sys/devices/system/cpu/cpu0/cache/index" + strconv.Itoa(i) + "/"
		lv, err1 := os.ReadFile(dir + "level")
		ty, err2 := os.ReadFile(dir + "type")
		sz, err3 := os.ReadFile(dir + "size")
		if err1 != nil || err2 != nil || err3 != nil {
			break
		}
		if strings.TrimSpace(string(lv)) != strconv.Itoa(level) || strings.TrimSpace(string(ty)) != typ {
			continue
		}
		s := strings.TrimSpace(string(sz))
		mult := 1
		switch {
		case strings.HasSuffix(s, "K"):
			mult, s = 1<<10, strings.TrimSuffix(s, "K")
		case strings.HasSuffix(s, "M"):
			mult, s = 1<<20, strings.TrimSuffix(s, "M")
		}
		n, err := strconv.Atoi(s)
		if err != nil {
			return 0
		}
		return n * mult
	}
	return 0
}

// TestDetectCPU checks the CPUID cache sizes against what the kernel
// reports in sysfs (computed by Linux from the same leaves, independently).
func TestDetectCPU(t *testing.T) {
	ci := detectCPU()
	t.Logf("%+v", ci)
	require.NotEmpty(t, ci.vendor)
	l1, l2 := sysfsCache(1, "Data"), sysfsCache(2, "Unified")
	if l1 == 0 || l2 == 0 {
		t.Skip("no cache sizes in sysfs")
	}
	assert.Equal(t, l1, ci.l1d, "L1d")
	assert.Equal(t, l2, ci.l2, "L2")
	if w, err := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/ways_of_associativity"); err == nil {
		ty, _ := os.ReadFile("/sys/devices/system/cpu/cpu0/cache/index0/type")
		if strings.TrimSpace(string(ty)) == "Data" {
			assert.Equal(t, strings.TrimSpace(string(w)), strconv.Itoa(ci.l1Ways), "L1d ways")
		}
	}
	kc, nc := blocking(avx512Set.mr, avx512Set.nr, 4, ci.l1d, ci.l2, 256, 512)
	assert.Equal(t, [2]int{kc, nc}, [2]int{avx512Set.kc, avx512Set.nc}, "the AVX-512 set uses this CPU's blocking")
	kc, nc = blocking(avx2Set.mr, avx2Set.nr, 4, ci.l1d, ci.l2, 256, 512)
	assert.Equal(t, [2]int{kc, nc}, [2]int{avx2Set.kc, avx2Set.nc}, "the AVX2 set uses this CPU's blocking")
	assert.Equal(t, ci.l1Ways, avx2Set.l1Ways, "the AVX2 set knows the L1d ways")
	for _, s := range []*kernelSet[float64]{avx512Set64, avx2Set64} {
		kc, nc = blocking(s.mr, s.nr, 8, ci.l1d, ci.l2, 256, 256)
		assert.Equal(t, [2]int{kc, nc}, [2]int{s.kc, s.nc}, "the float64 %s set uses this CPU's blocking", s.name)
	}
}
