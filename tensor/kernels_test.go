package tensor_test

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// TestKernelsEnv runs this test binary again with GONOX_KERNELS set to each
// value and checks what the child reports: the set chosen, or the error and
// the panic of the first op.
func TestKernelsEnv(t *testing.T) {
	if os.Getenv("GONOX_KERNELS_CHILD") != "" {
		kernelsChild()
		return
	}
	_, supported, err := tensor.Kernels()
	if os.Getenv(tensor.KernelsEnv) == "" {
		require.NoError(t, err)
	}
	type tc struct{ env, want string }
	var tests []tc
	for _, s := range supported {
		tests = append(tests, tc{s, "active " + s + "\nsum 6\n"})
	}
	best := "go"
	if len(supported) > 0 {
		best = supported[0]
	}
	tests = append(tests, tc{"", "active " + best + "\nsum 6\n"})
	tests = append(tests, tc{"sse4", "error GONOX_KERNELS=\"sse4\": unknown kernel set (want avx512, avx2 or go); this machine supports " + strings.Join(supported, ", ") + "\n" +
		"panic tensor: op add: GONOX_KERNELS=\"sse4\": unknown kernel set (want avx512, avx2 or go); this machine supports " + strings.Join(supported, ", ") + "\n"})
	for _, s := range []string{"avx512", "avx2"} {
		if !strings.Contains(strings.Join(supported, ","), s) {
			tests = append(tests, tc{s, "GONOX_KERNELS=" + s + ": "})
		}
	}
	for _, tc := range tests {
		t.Run("env="+tc.env, func(t *testing.T) {
			cmd := exec.Command(os.Args[0], "-test.run=^TestKernelsEnv$")
			cmd.Env = append(os.Environ(), "GONOX_KERNELS_CHILD=1", tensor.KernelsEnv+"="+tc.env)
			out, err := cmd.CombinedOutput()
			require.NoError(t, err, "%s", out)
			got := string(out)
			if i := strings.Index(got, "PASS"); i >= 0 {
				got = got[:i]
			}
			if strings.HasSuffix(tc.want, ": ") { // unsupported set: message depends on the CPU
				assert.Contains(t, got, "error "+tc.want)
				assert.Contains(t, got, "supports "+strings.Join(supported, ", "))
				assert.Contains(t, got, "panic tensor: op add: "+tc.want)
				return
			}
			assert.Equal(t, tc.want, got)
		})
	}
}

func kernelsChild() {
	active, _, err := tensor.Kernels()
	if err != nil {
		println("error", err.Error())
	} else {
		println("active", active)
	}
	defer func() {
		if r := recover(); r != nil {
			println("panic", r.(string))
		}
	}()
	x := tensor.Add(tensor.FromFloat32([]float32{1, 2}, 2), tensor.FromFloat32([]float32{1, 2}, 2))
	println("sum", int(tensor.Sum(x).Item()))
}
