package tensor

import (
	"fmt"

	"github.com/gonox/gonox/internal/kernels"
)

// KernelsEnv is the environment variable that chooses the compute kernels:
// GONOX_KERNELS=avx512, avx2 or go. See Kernels.
const KernelsEnv = kernels.Env

// Kernels reports the compute kernel set the ops use ("avx512", "avx2" or
// "go") and the sets this CPU and build support, best first.
//
// The set is chosen once, at start-up: the best the CPU runs, unless the
// environment variable GONOX_KERNELS names another. Naming a narrower set
// makes every kernel behave as on a CPU that has only that set, which is how
// tests on an AVX-512 machine prove what an AVX2-only machine computes:
//
//	GONOX_KERNELS=avx2 go test ./tensor/...
//	GONOX_KERNELS=go go test ./...   // pure Go, like -tags noasm
//
// Results differ between sets only in the summation order of matrix
// products (rounding); elementwise kernels and reductions give the same bits
// on every set.
//
// The go command's test cache does not see GONOX_KERNELS (it is read when
// the program starts, before tests run): use -count=1 when switching sets,
// or go test may report a cached result of another set.
//
// err is non-nil if GONOX_KERNELS is not a set this machine runs (an
// unknown word, avx512 on an AVX2 CPU, an assembly set in a noasm build); it
// names what the CPU supports. The ops do not fall back silently: the first
// op applied panics with the same message. A program that wants a clean
// error checks Kernels at start-up.
func Kernels() (active string, supported []string, err error) {
	for _, s := range kernels.Supported() {
		supported = append(supported, s.String())
	}
	if err := kernels.Err(); err != nil {
		return "", supported, err
	}
	return kernels.Active().String(), supported, nil
}

// kernelsErr is the message the first op panics with when GONOX_KERNELS is
// invalid; nil otherwise.
var kernelsErr = kernels.Err()

// checkKernels panics if GONOX_KERNELS named a kernel set this machine
// cannot run.
func checkKernels(op *Op) {
	if kernelsErr != nil {
		panic(fmt.Sprintf("tensor: op %s: %v", op.Name, kernelsErr))
	}
}
