package checkpoint

import (
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/gonox/gonox/internal/testlong"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// killEnv, when set, makes TestKillChild the child process of
// TestKillDuringSave: it saves into the directory it names until killed.
const killEnv = "GONOX_CHECKPOINT_KILL_DIR"

type killTree struct {
	W    *tensor.Tensor // f32[512,1024], 2 MiB, sharded over 4 devices
	B    *tensor.Tensor // f32[1024], host
	Step *tensor.Tensor // i32[]
}

func killTreeAt(step int) killTree {
	k := tensor.NewKey(uint64(step)).Split(2)
	mesh := shard.NewMesh([]int{2, 2}, []string{"dp", "tp"})
	return killTree{
		W:    shard.Put(tensor.Normal(k[0], 512, 1024), shard.NewSharding(mesh, shard.P("dp", "tp"))),
		B:    tensor.Normal(k[1], 1024),
		Step: tensor.ScalarInt(int32(step)),
	}
}

// TestKillChild is the child of TestKillDuringSave; run alone it does
// nothing. It saves steps latest+1, latest+2, ... and every third step
// also overwrites the previous one with the same values, so that kills
// land in fresh saves and in overwrites alike.
func TestKillChild(t *testing.T) {
	dir := os.Getenv(killEnv)
	if dir == "" {
		t.Skip("child process of TestKillDuringSave")
	}
	parent := os.Getppid()
	deadline := time.Now().Add(30 * time.Second) // never outlive a dead parent for long
	latest, ok, err := LatestStep(dir)
	if err != nil {
		t.Fatal(err)
	}
	step := 1
	if ok {
		step = latest + 1
	}
	for ; time.Now().Before(deadline) && os.Getppid() == parent; step++ {
		if err := Save(dir, step, killTreeAt(step)); err != nil {
			t.Fatal(err)
		}
		if step%3 == 0 {
			if err := Save(dir, step-1, killTreeAt(step-1), Overwrite()); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// leftovers returns the temporary and moved-aside directories in dir.
func leftovers(t *testing.T, dir string) []string {
	var out []string
	for _, name := range listDir(t, dir) {
		if strings.HasPrefix(name, tmpPrefix) || strings.HasPrefix(name, oldPrefix) {
			out = append(out, name)
		}
	}
	return out
}

// TestKillDuringSave kills a process that saves checkpoints at random
// moments, many times, and checks after each kill that the latest complete
// step restores bit for bit, and that what a killed save left behind is
// gone once a later save has completed.
func TestKillDuringSave(t *testing.T) {
	if os.Getenv(killEnv) != "" {
		t.Skip("in the child")
	}
	// A few kills by default; GONOX_TEST_LONG=1 (CI) runs the exhaustive 40.
	kills := 6
	if testlong.Enabled() {
		kills = 40
	}
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(7, uint64(time.Now().UnixNano())))
	latest := 0
	var pending []string // leftovers seen after the previous kill
	interrupted := 0
	for i := 0; i < kills; i++ {
		cmd := exec.Command(os.Args[0], "-test.run=^TestKillChild$", "-test.count=1")
		cmd.Env = append(os.Environ(), killEnv+"="+dir)
		require.NoError(t, cmd.Start())
		if i == 0 {
			// Let the first child complete a save (starting the test
			// binary can take longer than the kill windows, under -race
			// or on a loaded machine), so that every run checks restores.
			for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if _, ok, _ := LatestStep(dir); ok {
					break
				}
			}
		}
		time.Sleep(time.Duration(30+rng.IntN(400)) * time.Millisecond)
		require.NoError(t, cmd.Process.Kill())
		_ = cmd.Wait()

		steps, err := Steps(dir)
		require.NoError(t, err)
		now := 0
		if len(steps) > 0 {
			now = steps[len(steps)-1]
			got, err := Restore(dir, now, zerosLike(killTreeAt(0)), nil)
			require.NoError(t, err, "kill %d: latest step %d", i, now)
			requireBitExact(t, killTreeAt(now), got)
			// An older step, possibly one that was being overwritten.
			old := steps[rng.IntN(len(steps))]
			got, err = Restore(dir, old, zerosLike(killTreeAt(0)), nil)
			require.NoError(t, err, "kill %d: step %d", i, old)
			requireBitExact(t, killTreeAt(old), got)
		}
		require.GreaterOrEqual(t, now, latest, "steps never disappear")
		left := leftovers(t, dir)
		if now > latest {
			// A save completed in this run, after cleaning up.
			for _, name := range pending {
				require.NotContains(t, left, name, "kill %d: leftover of an earlier kill survived a completed save", i)
			}
		}
		if len(left) > 0 {
			interrupted++
		}
		pending = append(pending[:0], left...)
		latest = now
	}
	t.Logf("%d kills, %d left an interrupted save behind, latest step %d", kills, interrupted, latest)
	require.Positive(t, latest, "the child never completed a save")
	require.NoError(t, Save(dir, latest+1, killTreeAt(latest+1)))
	require.Empty(t, leftovers(t, dir), "the next save cleans up")
}
