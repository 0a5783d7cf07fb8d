//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// helperEnv makes the test binary run one failure scenario instead of the
// tests (TestFailuresEndTheJob starts it under mpirun).
const helperEnv = "GONOX_MPI_TEST_HELPER"

func runHelper(kind string) int {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	m := shard.NewMesh([]int{len(shard.Devices())}, []string{"d"})
	rank := mpi.Rank()
	x := tensor.Ones(tensor.Float32, len(shard.Devices()), 4)
	psum := func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor { return c.Psum(b, "d") }
	switch kind {
	case "ok":
		y := shard.Map(m, shard.P("d"), shard.P(), psum)(x)
		fmt.Printf("process %d: %v\n", rank, shard.Gather(y).Float32s())
	case "panic":
		shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			if c.Device().Process() == 1 {
				panic("boom")
			}
			return c.Psum(b, "d")
		})(x)
	case "exit":
		if rank == 1 {
			os.Exit(3)
		}
		shard.Map(m, shard.P("d"), shard.P(), psum)(x)
	case "hang":
		if rank != 1 {
			shard.Map(m, shard.P("d"), shard.P(), psum)(x)
		}
		time.Sleep(time.Minute)
	case "mismatch":
		shard.Map(m, shard.P("d"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			if c.Device().Process() == 1 {
				return c.Pmax(b, "d")
			}
			return c.Psum(b, "d")
		})(x)
	case "sizes":
		// Without GONOX_DEBUG: process 1 sums 5000 times as much as
		// process 0, so it asks for a larger shared window.
		rows := 1
		if rank == 1 {
			rows = 5000
		}
		y := tensor.Ones(tensor.Float32, len(shard.Devices()), 4*rows)
		shard.Map(m, shard.P("d"), shard.P(), psum)(y)
	case "save", "restore":
		if err := checkpointHelper(kind); err != nil {
			fmt.Fprintf(os.Stderr, "process %d: %v\n", rank, err)
			return 1
		}
		fmt.Printf("process %d: %s ok\n", rank, kind)
	case "put":
		shard.Put(tensor.Full(tensor.Float32, float64(rank), 4), shard.NewSharding(m, shard.P()))
	case "localput":
		// A mesh of this process's devices: its host tensors need not
		// equal other processes' (the debug check leaves it alone).
		mine := shard.NewMeshOn(shard.LocalDevices(), []int{len(shard.LocalDevices())}, []string{"mine"})
		y := shard.Put(tensor.Full(tensor.Float32, float64(rank), 4), shard.NewSharding(mine, shard.P()))
		fmt.Printf("process %d: local put %v\n", rank, shard.Gather(y).Float32s())
	default:
		asyncHelper(kind, m, x) // async_test.go
	}
	mpi.Finalize()
	return 0
}

// TestFailuresEndTheJob starts small jobs under mpirun in which one
// process fails, and checks that the whole job ends quickly with an error
// naming the process.
func TestFailuresEndTheJob(t *testing.T) {
	if underLauncher() {
		t.Skip("starts its own jobs; run it without mpirun")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found")
	}
	for _, tc := range []struct {
		kind  string
		env   []string
		ok    bool
		want  []string
		rank1 []string // environment of process 1 only
	}{
		{"ok", nil, true, []string{"process 0: [2 2 2 2]", "process 1: [2 2 2 2]"}, nil},
		{"panic", nil, false, []string{"gonox: process 1: shard.Map: device 1 [1]: boom"}, nil},
		{"exit", nil, false, []string{"exited with non-zero status", "],1]", "exit code:    3"}, nil},
		{"hang", []string{"GONOX_TIMEOUT=2s"}, false, []string{"gonox: process 0 waited more than 2s in shard.Map: collective #0 psum(f32[1,4] over d)"}, nil},
		{"mismatch", []string{"GONOX_DEBUG=1"}, false, []string{"issued different collectives", "psum", "pmax"}, nil},
		{"sizes", nil, false, []string{"the processes issued different collectives", "process 0: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: collective #0 psum(f32[1,4] over d)", "process 1: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: collective #0 psum(f32[1,20000] over d)"}, nil},
		// Disagreements caught in the default mode (agree_test.go).
		{"agree_mesh_order", nil, false, []string{"shard.NewMesh: process 1 made mesh('d': 2) of devices [1 0], process 0 made mesh('d': 2) of devices [0 1]"}, nil},
		{"agree_pmax", nil, false, []string{"issued different collectives", "process 0: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: collective #0 psum(f32[1,4] over d)", "process 1: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: collective #0 pmax(f32[1,4] over d"}, nil},
		{"agree_dtype", nil, false, []string{"issued different collectives", "process 0: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: collective #0 psum(f32[1,4] over d)", "process 1: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: collective #0 psum(i32[1,4] over d)"}, nil},
		{"agree_shape", nil, false, []string{"issued different collectives", "psum(f32[1,4] over d)", "psum(f32[1,3] over d)"}, nil},
		{"agree_gather_order", []string{"GONOX_DEBUG=1"}, false, []string{"shard.gather: the processes issued different collectives", "process 0: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: shard.Gather of f32[2,4] (array placed from the host #1)", "process 1: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: shard.Gather of f32[2,4] (array placed from the host #2)"}, nil},
		{"agree_gather_computed", nil, false, []string{"shard.gather: the processes issued different collectives", "process 0: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: shard.Gather of f32[2,4] (array #1)", "process 1: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: shard.Gather of f32[2,4] (array #2)"}, nil},
		{"agree_reshard_order", nil, false, []string{"shard.reshard: the processes issued different collectives", "process 0: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: reshard of f32[2,4] (array #1)", "process 1: operation #1 among processes [0 1] on mesh('d': 2) of devices [0 1]: reshard of f32[2,4] (array #2)"}, nil},
		{"agree_same_order", nil, true, []string{"process 0: [2 2 2 2 2 2 2 2] [4 4 4 4 4 4 4 4]", "process 1: [2 2 2 2 2 2 2 2] [4 4 4 4 4 4 4 4]"}, nil},
		{"put", []string{"GONOX_DEBUG=1"}, false, []string{"shard.Put: f32[4]: the host tensor differs between processes"}, nil},
		{"localput", []string{"GONOX_DEBUG=1"}, true, []string{"process 1: local put [1 1 1 1]"}, nil},
		// Around a started collective (async_test.go's helpers).
		{"async_panic", nil, false, []string{"gonox: process 1: shard.Map: device 1 [1]: boom after the start"}, nil},
		{"async_hang", []string{"GONOX_TIMEOUT=2s"}, false, []string{"gonox: process 0 waited more than 2s in shard.Map: collective #0 ppermute(f32[1,4] over d, perm [[0 1] [1 0]], async)"}, nil},
		{"async_mismatch", []string{"GONOX_DEBUG=1"}, false, []string{"issued different collectives", "perm [[0 1] [1 0]], async"}, nil},
		{"async_unwaited", nil, false, []string{"asynchronous collective(s) never waited for"}, nil},
		// Settings that must agree, refused by mpi.Init on every process.
		{"ok", nil, false, []string{`mpi.Init: GONOX_DEBUG differs between processes: unset on process 0, "1" on process 1; give every process the same (mpirun -x GONOX_DEBUG)`}, []string{"GONOX_DEBUG=1"}},
		{"ok", nil, false, []string{`mpi.Init: GONOX_TIMEOUT differs between processes: unset on process 0, "1m" on process 1`}, []string{"GONOX_TIMEOUT=1m"}},
		{"ok", nil, false, []string{`mpi.Init: GONOX_MPI_SHM differs between processes`}, []string{"GONOX_MPI_SHM=0"}},
		{"ok", nil, false, []string{`mpi.Init: GONOX_KERNELS differs between processes: unset (`, `"go" (go) on process 1`}, []string{"GONOX_KERNELS=go"}},
		{"ok", nil, false, []string{`mpi.Init: process 1: shard: GONOX_ASYNC_PROGRESS="abc": want a duration`}, []string{"GONOX_ASYNC_PROGRESS=abc"}},
		{"ok", []string{"GONOX_ASYNC_PROGRESS=-1"}, false, []string{`mpi.Init: process 0: shard: GONOX_ASYNC_PROGRESS="-1": want a duration such as 100us, from 0 to 1s (and processes [1] have refused settings too)`}, nil},
		{"ok", []string{"GONOX_DEBUG=true"}, false, []string{`mpi.Init: process 0: shard: GONOX_DEBUG="true": want 0 or 1`}, nil},
		{"ok", []string{"GONOX_DEVICES=99999999999"}, false, []string{`mpi.Init: process 0: shard: GONOX_DEVICES="99999999999": at most 4096 simulated devices`}, nil},
		{"ok", []string{"GONOX_DEVICES=2147483647"}, false, []string{`GONOX_DEVICES="2147483647": at most 4096 simulated devices`}, nil},
		{"ok", nil, false, []string{`mpi.Init: GONOX_DEVICES differs between processes: "1" on process 0, "2" on process 1`}, []string{"GONOX_DEVICES=2"}},
	} {
		name := tc.kind
		if len(tc.env)+len(tc.rank1) > 0 {
			name += "/" + strings.Join(append(slices.Clone(tc.env), tc.rank1...), ",")
		}
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			args := []string{"-np", "2", "--oversubscribe", os.Args[0]}
			if tc.rank1 != nil {
				// MPMD: process 0 with the common environment, process
				// 1 with tc.rank1 on top.
				args = append([]string{"--oversubscribe", "-np", "1", os.Args[0], ":", "-np", "1", "env"}, append(tc.rank1, os.Args[0])...)
			}
			cmd := exec.CommandContext(ctx, mpirun, args...)
			// The settings the cases compare start unset on every
			// process, whatever the caller exported (ci.sh sets
			// GONOX_TIMEOUT); the context above bounds a hang.
			base := slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "GONOX_") })
			cmd.Env = append(base, helperEnv+"="+tc.kind, "GONOX_DEVICES=1",
				"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
			cmd.Env = append(cmd.Env, tc.env...)
			start := time.Now()
			out, err := cmd.CombinedOutput()
			took := time.Since(start)
			require.NoError(t, ctx.Err(), "the job hung:\n%s", out)
			if tc.ok {
				require.NoError(t, err, "%s", out)
			} else {
				require.Error(t, err, "%s", out)
			}
			for _, w := range tc.want {
				assert.Contains(t, strings.ToLower(string(out)), strings.ToLower(w))
			}
			assert.Less(t, took, 30*time.Second)
			t.Logf("%s: ended in %v", tc.kind, took.Round(time.Millisecond))
		})
	}
}
