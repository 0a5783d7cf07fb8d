//go:build linux

package checkpoint

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// withTimeout runs f and fails the test if it has not returned within a
// few seconds (a FIFO blocks an open for reading until a writer comes).
func withTimeout(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%s blocked on a FIFO", what)
		return nil
	}
}

// TestFIFORefused: a FIFO named like the manifest or a data file is
// refused without being opened, so nothing blocks.
func TestFIFORefused(t *testing.T) {
	t.Run("manifest", func(t *testing.T) {
		dir := t.TempDir()
		savedState(t, dir, 1, 1)
		savedState(t, dir, 2, 2)
		name := filepath.Join(stepDir(dir, 2), manifestName)
		require.NoError(t, os.Remove(name))
		require.NoError(t, syscall.Mkfifo(name, 0o644))

		err := withTimeout(t, "Restore", func() error {
			_, err := Restore(dir, 2, zerosLike(newState(1)), nil)
			return err
		})
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "file manifest.json: ")
		require.ErrorContains(t, err, "not a regular file")
		err = withTimeout(t, "Metrics", func() error { _, err := Metrics(dir, 2); return err })
		require.ErrorIs(t, err, ErrCorrupt)
		// Not a step, so the latest one is 1; a Manager opens the directory.
		var step int
		require.NoError(t, withTimeout(t, "RestoreLatest", func() error {
			var err error
			_, step, err = RestoreLatest(dir, zerosLike(newState(1)), nil)
			return err
		}))
		require.Equal(t, 1, step)
		require.NoError(t, withTimeout(t, "NewManager", func() error { _, err := NewManager(dir, ManagerOptions{}); return err }))
	})
	t.Run("data file", func(t *testing.T) {
		dir := t.TempDir()
		savedState(t, dir, 1, 1)
		m := loadManifest(t, dir, 1)
		file := entryOf(m, "Params.W").Shards[0].File
		name := filepath.Join(stepDir(dir, 1), file)
		require.NoError(t, os.Remove(name))
		require.NoError(t, syscall.Mkfifo(name, 0o644))
		err := withTimeout(t, "Restore", func() error {
			_, err := Restore(dir, 1, zerosLike(newState(1)), nil)
			return err
		})
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "tensor Params.W: file "+file+": ")
		require.ErrorContains(t, err, "not a regular file: it is a named pipe (FIFO)")
	})
	t.Run("symlink to a FIFO", func(t *testing.T) {
		dir := t.TempDir()
		savedState(t, dir, 1, 1)
		m := loadManifest(t, dir, 1)
		file := entryOf(m, "Params.W").Shards[0].File
		name := filepath.Join(stepDir(dir, 1), file)
		require.NoError(t, syscall.Mkfifo(filepath.Join(stepDir(dir, 1), "fifo"), 0o644))
		require.NoError(t, os.Remove(name))
		require.NoError(t, os.Symlink("fifo", name))
		err := withTimeout(t, "Restore", func() error {
			_, err := Restore(dir, 1, zerosLike(newState(1)), nil)
			return err
		})
		require.ErrorIs(t, err, ErrCorrupt)
		require.ErrorContains(t, err, "not a regular file")
	})
}

// TestImportFIFO: ImportSafetensors refuses a FIFO, or a symlink to one,
// without blocking; a symlink to a regular file (a download cache's) is
// read.
func TestImportFIFO(t *testing.T) {
	dir := t.TempDir()
	like := map[string]*tensor.Tensor{"w": tensor.Zeros(tensor.Float32, 2)}
	fifo := filepath.Join(dir, "model.safetensors")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	link := filepath.Join(dir, "link.safetensors")
	require.NoError(t, os.Symlink("model.safetensors", link))
	for _, path := range []string{fifo, link} {
		err := withTimeout(t, "ImportSafetensors", func() error {
			_, _, err := ImportSafetensors(path, like)
			return err
		})
		require.ErrorIs(t, err, errNotRegular)
		require.EqualError(t, err, "checkpoint: import: file "+path+": not a regular file: it is a named pipe (FIFO)")
	}
	real := filepath.Join(dir, "real.safetensors")
	require.NoError(t, ExportSafetensors(real, map[string]*tensor.Tensor{"w": tensor.FromFloat32([]float32{1, 2}, 2)}, nil))
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink("real.safetensors", link))
	got, _, err := ImportSafetensors(link, like)
	require.NoError(t, err)
	require.Equal(t, []float32{1, 2}, got["w"].Float32s())
}

// TestCheckpointDirFIFO: a FIFO where the checkpoint directory belongs
// is an error for everything that lists steps, not a hang.
func TestCheckpointDirFIFO(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	require.NoError(t, syscall.Mkfifo(dir, 0o644))
	for name, f := range map[string]func() error{
		"Steps":         func() error { _, err := Steps(dir); return err },
		"LatestStep":    func() error { _, _, err := LatestStep(dir); return err },
		"RestoreLatest": func() error { _, _, err := RestoreLatest(dir, tinyAt(0), nil); return err },
		"NewManager":    func() error { _, err := NewManager(dir, ManagerOptions{}); return err },
		"Save":          func() error { return Save(dir, 1, tinyAt(1)) },
	} {
		err := withTimeout(t, name, f)
		require.ErrorContains(t, err, "not a directory", name)
	}
	_, err := Steps(dir)
	require.EqualError(t, err, "checkpoint: steps: "+dir+" is not a directory: it is a named pipe (FIFO)")
}

// TestOpenRegularFIFO: the open itself refuses a FIFO without blocking,
// for one swapped in between the Lstat and the open.
func TestOpenRegularFIFO(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "file"), []byte("x"), 0o644))
	root, err := os.OpenRoot(dir)
	require.NoError(t, err)
	defer root.Close()
	err = withTimeout(t, "openRegular", func() error {
		f, err := openRegular(root, "fifo")
		if f != nil {
			f.Close()
		}
		return err
	})
	require.ErrorIs(t, err, errNotRegular)
	f, err := openRegular(root, "file")
	require.NoError(t, err)
	b := make([]byte, 2)
	n, _ := f.ReadAt(b, 0)
	require.Equal(t, "x", string(b[:n]))
	require.NoError(t, f.Close())
}
