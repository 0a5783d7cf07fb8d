//go:build mpi

package checkpoint_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

// TestMain runs the package's tests inside an MPI job when started by
// mpirun, as a world of one process otherwise:
//
//	go test -tags mpi -c -o ckpt.test ./checkpoint
//	mpirun -np 2 ./ckpt.test -test.run AcrossProcesses
func TestMain(m *testing.M) {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	code := m.Run()
	if err := mpi.Finalize(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 2
	}
	os.Exit(code)
}

// sharedDir is a directory every process of the job sees.
func sharedDir(t *testing.T) string {
	var dir string
	if shard.ProcessIndex() == 0 {
		dir = t.TempDir()
	}
	return string(shard.AllGatherProcesses([]byte(dir))[0])
}

type mpState struct{ W, Step *tensor.Tensor }

// TestMetadataAcrossProcesses: in a job of several processes the record
// goes into the one manifest process 0 commits, with a Manager's
// background saves too; processes that pass different records fail
// together and leave nothing behind.
func TestMetadataAcrossProcesses(t *testing.T) {
	n := len(shard.Devices())
	mesh := shard.NewMesh([]int{n}, []string{"dp"})
	st := mpState{
		W:    shard.Put(tensor.Reshape(tensor.AsType(tensor.Arange(8*n), tensor.Float32), 2*n, 4), shard.NewSharding(mesh, shard.P("dp"))),
		Step: tensor.ScalarInt(3),
	}
	like := mpState{W: tensor.Zeros(tensor.Float32, 2*n, 4), Step: tensor.ScalarInt(0)}
	cfg := RunConfig{Layers: []int{4}, Vocab: "ab", LR: 0.1, Steps: 10}
	dir := sharedDir(t)

	require.NoError(t, checkpoint.Save(dir, 3, st, checkpoint.WithMetadata(runSchema, cfg)))
	var saved RunConfig
	info, err := checkpoint.ReadMetadata(dir, 3, runSchema, &saved)
	require.NoError(t, err)
	require.Equal(t, cfg, saved)
	require.Equal(t, runSchema, info.Schema)
	got, err := checkpoint.Restore(dir, 3, like, checkpoint.OnMesh(mesh, shard.Specs{"W": shard.P("dp"), "": shard.P()}))
	require.NoError(t, err)
	require.Equal(t, shard.Gather(st.W).Float32s(), shard.Gather(got.W).Float32s())

	m, err := checkpoint.NewManager(dir, checkpoint.ManagerOptions{Async: true, Metadata: &cfg, MetadataSchema: runSchema})
	require.NoError(t, err)
	for step := 4; step <= 5; step++ {
		cfg.Steps = 10 * step
		_, err := m.Save(step, st, nil)
		require.NoError(t, err)
	}
	require.NoError(t, m.Close())
	shard.AllGatherProcesses(nil) // process 0 has committed
	_, err = checkpoint.ReadMetadata(dir, 5, runSchema, &saved)
	require.NoError(t, err)
	require.Equal(t, 50, saved.Steps)

	// A record that differs between processes: every process fails.
	other := cfg
	other.Vocab = fmt.Sprint("process ", shard.ProcessIndex())
	err = checkpoint.Save(dir, 6, st, checkpoint.WithMetadata(runSchema, other))
	if shard.ProcessCount() > 1 {
		require.ErrorContains(t, err, "process 1 saves another tree, sharding or metadata record than process 0")
		shard.AllGatherProcesses(nil)
		_, err = os.Stat(filepath.Join(dir, "00000006"))
		require.ErrorIs(t, err, os.ErrNotExist)
		left, _ := filepath.Glob(filepath.Join(dir, ".tmp-*"))
		require.Empty(t, left)
	} else {
		require.NoError(t, err)
	}
}
