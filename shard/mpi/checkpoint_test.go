//go:build mpi

package mpi_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// state is what the checkpoint tests save: a weight sharded over both
// axes, a bias over one, a replicated table and a host counter.
type state struct {
	W, B, Table *tensor.Tensor
	Step        *tensor.Tensor
}

// wantState is the same on every process (a fixed seed).
func wantState() state {
	r := rand.New(rand.NewPCG(11, 11))
	return state{W: randT(r, 24, 8), B: randT(r, 8), Table: tensor.Reshape(tensor.Arange(24), 4, 6), Step: tensor.ScalarInt(42)}
}

var saveSpecs = shard.Specs{"W": shard.P("dp", "tp"), "B": shard.P("tp"), "Table": shard.P(), "Step": shard.P()}

// placeState puts the state on a mesh of every device of the job: dp over
// half the devices (or all), tp over 2 (or 1).
func placeState(s state) (state, *shard.Mesh) {
	n := len(shard.Devices())
	tp := 1
	if n%2 == 0 {
		tp = 2
	}
	m := shard.NewMesh([]int{n / tp, tp}, []string{"dp", "tp"})
	return state{
		W:     shard.Put(s.W, shard.NewSharding(m, shard.P("dp", "tp"))),
		B:     shard.Put(s.B, shard.NewSharding(m, shard.P("tp"))),
		Table: shard.Put(s.Table, shard.Replicated(m)),
		Step:  s.Step,
	}, m
}

// sameBits checks restored against want bit for bit.
func sameBits(t require.TestingT, want, got state) {
	for _, p := range [][2]*tensor.Tensor{{want.W, got.W}, {want.B, got.B}, {want.Table, got.Table}, {want.Step, got.Step}} {
		w, g := p[0], shard.Gather(p[1])
		require.Equal(t, w.Shape(), g.Shape())
		if w.DType() == tensor.Float32 {
			require.Equal(t, w.RawFloat32(), g.RawFloat32())
		} else {
			require.Equal(t, w.Ints(), g.Ints())
		}
	}
}

// sharedTempDir is a directory every process of the job sees: process 0
// makes it and tells the others.
func sharedTempDir(t *testing.T) string {
	var dir string
	if shard.ProcessIndex() == 0 {
		dir = t.TempDir()
	}
	return string(shard.AllGatherProcesses([]byte(dir))[0])
}

// TestCheckpointAcrossProcesses: every process writes its blocks; the
// step restores bit-exact onto another mesh of the job and onto the host.
func TestCheckpointAcrossProcesses(t *testing.T) {
	want := wantState()
	placed, m := placeState(want)
	dir := sharedTempDir(t)
	require.NoError(t, checkpoint.Save(dir, 3, placed))
	// Each process wrote the blocks of its own devices.
	if shard.ProcessIndex() == 0 {
		files, err := filepath.Glob(filepath.Join(dir, "00000003", "d*.bin"))
		require.NoError(t, err)
		assert.Len(t, files, len(shard.Devices()), "one data file per device")
	}
	// Onto the mesh transposed (tp major), and onto the host.
	mt := shard.NewMeshOn(m.Devices(), []int{m.Shape()[1], m.Shape()[0]}, []string{"tp", "dp"})
	got, err := checkpoint.Restore(dir, 3, want, checkpoint.OnMesh(mt, saveSpecs))
	require.NoError(t, err)
	assert.Equal(t, "float32[24@dp,8@tp]", got.W.Type())
	sameBits(t, want, got)
	host, err := checkpoint.Restore(dir, 3, want, checkpoint.OnHost())
	require.NoError(t, err)
	sameBits(t, want, host)

	// A Manager keeps the latest 2 steps, saving in the background.
	mg, err := checkpoint.NewManager(dir, checkpoint.ManagerOptions{KeepLatest: 2, Async: true})
	require.NoError(t, err)
	for step := 4; step <= 6; step++ {
		_, err := mg.Save(step, placed, nil)
		require.NoError(t, err)
	}
	require.NoError(t, mg.Close())
	shard.AllGatherProcesses(nil) // a barrier: process 0 has pruned
	mg2, err := checkpoint.NewManager(dir, checkpoint.ManagerOptions{})
	require.NoError(t, err)
	assert.Equal(t, []int{5, 6}, mg2.Steps())
	latest, step, err := checkpoint.RestoreLatest(dir, want, checkpoint.OnMesh(m, saveSpecs))
	require.NoError(t, err)
	assert.Equal(t, 6, step)
	sameBits(t, want, latest)
}

// TestCheckpointChangesProcessCount saves with 2 processes and restores in
// this one, then saves here and restores with 4 processes, bit-exact.
func TestCheckpointChangesProcessCount(t *testing.T) {
	if underLauncher() {
		t.Skip("starts its own jobs; run it without mpirun")
	}
	mpirun, err := exec.LookPath("mpirun")
	if err != nil {
		t.Skip("mpirun not found")
	}
	job := func(np int, kind, dir string) {
		ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, mpirun, "-np", fmt.Sprint(np), "--oversubscribe", os.Args[0])
		cmd.Env = append(os.Environ(), helperEnv+"="+kind, "GONOX_CKPT_DIR="+dir, fmt.Sprintf("GONOX_DEVICES=%d", 8/np),
			"OMPI_ALLOW_RUN_AS_ROOT=1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), kind+" ok")
	}
	want := wantState()
	// 2 processes -> 1.
	dir := t.TempDir()
	job(2, "save", dir)
	got, err := checkpoint.Restore(dir, 1, want, checkpoint.OnHost())
	require.NoError(t, err)
	sameBits(t, want, got)
	placed, m := placeState(want)
	got, err = checkpoint.Restore(dir, 1, want, checkpoint.OnMesh(m, saveSpecs))
	require.NoError(t, err)
	sameBits(t, want, got)
	// 1 -> 4.
	dir2 := t.TempDir()
	require.NoError(t, checkpoint.Save(dir2, 1, placed))
	job(4, "restore", dir2)
}

// checkpointHelper is the part of a helper job that saves or restores.
func checkpointHelper(kind string) error {
	dir := os.Getenv("GONOX_CKPT_DIR")
	want := wantState()
	placed, m := placeState(want)
	switch kind {
	case "save":
		return checkpoint.Save(dir, 1, placed)
	case "restore":
		got, err := checkpoint.Restore(dir, 1, want, checkpoint.OnMesh(m, saveSpecs))
		if err != nil {
			return err
		}
		var msg error
		func() {
			defer func() {
				if r := recover(); r != nil {
					msg = fmt.Errorf("%v", r)
				}
			}()
			sameBits(panicT{}, want, got)
		}()
		return msg
	}
	return fmt.Errorf("unknown helper %q", kind)
}

// panicT turns require failures into panics outside a test.
type panicT struct{}

func (panicT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (panicT) FailNow()                          { panic("failed") }

// TestCheckpointHalfAcrossProcesses: bfloat16 and float16 leaves sharded
// over every process are written by their owners as 16-bit planes and
// restore bit for bit, on the mesh transposed and on the host.
func TestCheckpointHalfAcrossProcesses(t *testing.T) {
	r := rand.New(rand.NewPCG(12, 12))
	w, b := tensor.Convert(randT(r, 24, 8), tensor.BFloat16), tensor.Convert(randT(r, 8), tensor.Float16)
	n := len(shard.Devices())
	tp := 1
	if n%2 == 0 {
		tp = 2
	}
	m := shard.NewMesh([]int{n / tp, tp}, []string{"dp", "tp"})
	type half struct{ W, B *tensor.Tensor }
	placed := half{W: shard.Put(w, shard.NewSharding(m, shard.P("dp", "tp"))), B: shard.Put(b, shard.NewSharding(m, shard.P("tp")))}
	dir := sharedTempDir(t)
	// A barrier before process 0's t.TempDir is removed: the others may
	// still be reading it.
	defer shard.AllGatherProcesses(nil)
	require.NoError(t, checkpoint.Save(dir, 1, placed))
	like := half{W: tensor.Zeros(tensor.BFloat16, 24, 8), B: tensor.Zeros(tensor.Float16, 8)}
	mt := shard.NewMeshOn(m.Devices(), []int{tp, n / tp}, []string{"tp", "dp"})
	for _, to := range []checkpoint.Placement{checkpoint.OnMesh(mt, shard.Specs{"W": shard.P("dp", "tp"), "B": shard.P("tp")}), checkpoint.OnHost()} {
		got, err := checkpoint.Restore(dir, 1, like, to)
		require.NoError(t, err)
		require.Equal(t, w.Bits16(), shard.Gather(got.W).Bits16())
		require.Equal(t, b.Bits16(), shard.Gather(got.B).Bits16())
		require.Equal(t, tensor.BFloat16, got.W.DType())
	}
}
