// Package kernels chooses the compute kernel set every assembly dispatch of
// the module uses: in package tensor the matrix multiplication
// (tensor/internal/gemm) and the elementwise and reduction kernels
// (tensor/internal/vec), in package shard the collectives' reduction (the
// sums of psum and psum_scatter). It is the one place that reads the CPU's
// feature flags and the GONOX_KERNELS environment variable; a new kernel
// family (bf16 conversion, a retuned gemm), in whatever package, asks it
// which set is active instead of reading feature flags itself. It lives
// at the module's internal/ rather than under tensor so that every package
// with assembly shares the one choice.
//
// The set is chosen once, when the program starts:
//
//   - GONOX_KERNELS unset or empty: the best set this CPU and build run
//     (avx512, else avx2, else go).
//   - GONOX_KERNELS=avx512, avx2 or go: that set, which must be one the CPU
//     supports. The choice caps the machine: with avx2 on an AVX-512 CPU,
//     every kernel behaves as on an AVX2-only CPU, so tests run there prove
//     what an AVX2 machine computes.
//
// An unknown word or a set the CPU cannot run is not silently replaced:
// Err reports it, naming what the CPU has, and package tensor panics with
// that message at the first op it applies.
//
// A kernel family dispatches with Has: `if kernels.Has(kernels.AVX512)`.
// Optional extensions within a set (AVX512-BF16, say) belong here too, as
// a function of the CPU flags (cpu_amd64.go) gated by Has of their set, so
// that GONOX_KERNELS=avx2 turns them off with the rest.
package kernels

import (
	"fmt"
	"os"
	"strings"
)

// Env is the environment variable that selects the kernel set.
const Env = "GONOX_KERNELS"

// Set names a kernel set. Larger values are wider instruction sets; a CPU
// that runs a set runs every smaller one.
type Set int

const (
	// Go is the portable pure-Go code, available everywhere.
	Go Set = iota
	// AVX2 is AVX2 with FMA (x86-64-v3: Intel Haswell, AMD Zen 1 and later).
	AVX2
	// AVX512 is AVX-512F with BMI2 (Intel Skylake-SP, AMD Zen 4 and later).
	AVX512
)

var setNames = [...]string{Go: "go", AVX2: "avx2", AVX512: "avx512"}

// String returns the set's name as GONOX_KERNELS spells it.
func (s Set) String() string {
	if s >= 0 && int(s) < len(setNames) {
		return setNames[s]
	}
	return fmt.Sprintf("kernels.Set(%d)", int(s))
}

// The choice, made once at start-up from the CPU and $GONOX_KERNELS.
var active, activeErr = choose(os.Getenv(Env), best())

// Active returns the kernel set in use. If GONOX_KERNELS is invalid (see
// Err) it returns Go: callers that must not compute with a set the user did
// not ask for check Err first.
func Active() Set { return active }

// Err reports an invalid GONOX_KERNELS: an unknown word, or a set this CPU
// or build cannot run. The message names what the CPU supports.
func Err() error { return activeErr }

// Supported lists the sets this CPU and build can run, best first; Go is
// always last. It does not depend on GONOX_KERNELS.
func Supported() []Set {
	var s []Set
	for k := best(); k >= Go; k-- {
		s = append(s, k)
	}
	return s
}

// Has reports whether the kernels of set s may be used: the CPU runs them
// and GONOX_KERNELS did not choose a narrower set.
func Has(s Set) bool { return activeErr == nil && s <= active }

// choose resolves the value of GONOX_KERNELS against the best set the
// machine runs.
func choose(env string, max Set) (Set, error) {
	env = strings.TrimSpace(env)
	if env == "" {
		return max, nil
	}
	for s, name := range setNames {
		if strings.EqualFold(env, name) {
			if Set(s) > max {
				return Go, fmt.Errorf("%s=%s: %s; it supports %s", Env, env, describe(Set(s)), names(max))
			}
			return Set(s), nil
		}
	}
	return Go, fmt.Errorf("%s=%q: unknown kernel set (want avx512, avx2 or go); this machine supports %s", Env, env, names(max))
}

// names lists the sets up to max, best first: "avx2, go".
func names(max Set) string {
	var b []string
	for k := max; k >= Go; k-- {
		b = append(b, k.String())
	}
	return strings.Join(b, ", ")
}
