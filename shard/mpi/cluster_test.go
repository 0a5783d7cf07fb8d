//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
)

// TestLinkDownEndsTheJob runs a job on 2 simulated hosts of one process
// (cluster.sh) and takes host 1's link down while the processes psum:
// process 0 waits GONOX_TIMEOUT in the psum and aborts naming process 1,
// and the whole job ends (mpirun gives up on the cut-off host within
// seconds, cluster.sh tunes its TCP). It needs root and network
// namespaces and takes about 15 s: it runs with GONOX_TEST_CLUSTER=1
// (ci.sh sets it).
func TestLinkDownEndsTheJob(t *testing.T) {
	if os.Getenv("GONOX_TEST_CLUSTER") != "1" || underLauncher() {
		t.Skip("needs GONOX_TEST_CLUSTER=1 (root and network namespaces), without mpirun")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// The link goes down once process 0 has printed step 100 (not after a
	// fixed sleep: on a loaded machine mpirun may take longer to start).
	script := `log=$(mktemp)
$GONOX_CLUSTER_MPIRUN -x GONOX_MPI_TEST_HELPER=steps -x GONOX_TIMEOUT=3s -x GONOX_DEVICES=1 "$0" >"$log" 2>&1 &
pid=$!
i=0
until grep -q 'process 0: step 100:' "$log" || [ $i -ge 600 ]; do sleep 0.1; i=$((i+1)); done
$GONOX_CLUSTER_LINK 1 down
echo "link down"
wait $pid
rc=$?
cat "$log"
rm -f "$log"
exit $rc`
	cmd := exec.CommandContext(ctx, "./cluster.sh", "-n", "2", "-p", "1", "--", "sh", "-c", script, os.Args[0])
	var down time.Time
	out := &lineWatch{on: "link down", seen: func() { down = time.Now() }}
	cmd.Stdout, cmd.Stderr = out, out
	err := cmd.Run()
	ended := time.Now()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 77 {
		t.Skip("cluster.sh: network namespaces are forbidden here")
	}
	require.NoError(t, ctx.Err(), "the job hung:\n%s", out)
	require.Error(t, err, "%s", out)
	assert.Contains(t, out.String(), "process 0: step 100: [2 2 2 2]", "the job ran before the link went down")
	assert.Contains(t, out.String(), "gonox: process 0 waited more than 3s in shard.Map: collective #0 psum(f32[1,4] over d) for processes [1]; one of them never issued it, failed, or cannot be reached")
	require.False(t, down.IsZero(), "%s", out)
	t.Logf("the job ended %v after the link went down (GONOX_TIMEOUT=3s)", ended.Sub(down).Round(100*time.Millisecond))
	assert.Less(t, ended.Sub(down), 30*time.Second)
}

// TestCheckpointOnSharedDirectory: 2 simulated hosts of 2 processes
// (cluster.sh) write a sharded checkpoint into a directory bind-mounted
// into both (cluster.sh --shared, as NFS would be), each process the
// blocks of its own devices; then one process on one host restores it
// onto its 8 devices, and this process reads it on the host, both bit for
// bit. The path the hosts write to is empty outside them, so the files
// reached the directory through the bind mount. It needs root and network
// namespaces and takes about 10 s: it runs with GONOX_TEST_CLUSTER=1
// (ci.sh sets it).
func TestCheckpointOnSharedDirectory(t *testing.T) {
	if os.Getenv("GONOX_TEST_CLUSTER") != "1" || underLauncher() {
		t.Skip("needs GONOX_TEST_CLUSTER=1 (root and network namespaces), without mpirun")
	}
	dir := t.TempDir()
	job := func(hosts, procs int, kind string) string {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		script := fmt.Sprintf(`$GONOX_CLUSTER_MPIRUN -x %s=%s -x GONOX_CKPT_DIR="$GONOX_CLUSTER_SHARED" -x GONOX_DEVICES=%d "$0" &&
ls -A "$GONOX_CLUSTER_SHARED" | sed 's/^/shared: /'`, helperEnv, kind, 8/(hosts*procs))
		cmd := exec.CommandContext(ctx, "./cluster.sh", "-n", fmt.Sprint(hosts), "-p", fmt.Sprint(procs), "--shared", dir, "--", "sh", "-c", script, os.Args[0])
		out, err := cmd.CombinedOutput()
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 77 {
			t.Skip("cluster.sh: network namespaces are forbidden here")
		}
		require.NoError(t, ctx.Err(), "the job hung:\n%s", out)
		require.NoError(t, err, "%s", out)
		for p := range hosts * procs {
			require.Contains(t, string(out), fmt.Sprintf("process %d: %s ok", p, kind), "%s", out)
		}
		return string(out)
	}
	out := job(2, 2, "save")
	assert.Contains(t, out, "shared: 00000001", "the hosts see the step in the shared directory")
	files, err := filepath.Glob(filepath.Join(dir, "00000001", "d*.bin"))
	require.NoError(t, err)
	assert.Len(t, files, 8, "one data file per device, written by 4 processes on 2 hosts")

	job(1, 1, "restore")
	want := wantState()
	got, err := checkpoint.Restore(dir, 1, want, checkpoint.OnHost())
	require.NoError(t, err)
	sameBits(t, want, got)
}

// lineWatch collects output and calls seen when a line containing on
// first arrives.
type lineWatch struct {
	strings.Builder
	on   string
	seen func()
	done bool
}

func (w *lineWatch) Write(p []byte) (int, error) {
	if !w.done && strings.Contains(string(p), w.on) {
		w.done = true
		w.seen()
	}
	return w.Builder.Write(p)
}
