package checkpoint

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/gonox/gonox/shard"
	"github.com/stretchr/testify/require"
)

// TestHugeManifest: a sparse manifest.json of 1 GiB is refused from its
// size, before a byte of it is read, with an error naming the file.
func TestHugeManifest(t *testing.T) {
	dir := t.TempDir()
	savedState(t, dir, 3, 1)
	require.NoError(t, os.Truncate(filepath.Join(stepDir(dir, 3), manifestName), 1<<30))
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := Restore(dir, 3, zerosLike(newState(1)), nil)
	runtime.ReadMemStats(&after)
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "file manifest.json")
	require.ErrorContains(t, err, "1073741824 bytes is too large")
	require.ErrorContains(t, err, stepDir(dir, 3))
	require.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(16<<20), "the manifest must not be read")
	_, err = Metrics(dir, 3)
	require.ErrorContains(t, err, "too large")
}

// TestManifestErrorsNameManifest: a manifest that does not validate is
// reported as manifest.json of the step directory, also when the wrong
// field is a shard's (the data file it points to is not at fault).
func TestManifestErrorsNameManifest(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(m *manifest)
		msg    string
	}{
		{"shard shape", func(m *manifest) { entryOf(m, "Params.W").Shards[0].Shape = []int{8, 8} }, `shard 0 (data file "d0000.bin"): shape [8 8], the spec makes blocks of [4 4]`},
		{"shard raw size", func(m *manifest) { entryOf(m, "Params.W").Shards[1].Raw++ }, `shard 1 (data file "d0001.bin"): raw size`},
		{"tensor shape", func(m *manifest) { entryOf(m, "Params.B").Shape = []int{-1} }, "shape [-1] is negative"},
		{"unknown dtype", func(m *manifest) { entryOf(m, "Params.B").DType = "float8" }, `unknown dtype "float8"`},
		{"codec", func(m *manifest) { m.Codec = "gzip" }, `codec "gzip"`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			savedState(t, dir, 3, 1)
			m := loadManifest(t, dir, 3)
			c.break_(m)
			writeManifest(t, dir, 3, m)
			_, err := Restore(dir, 3, zerosLike(newState(1)), nil)
			require.ErrorIs(t, err, ErrCorrupt)
			require.ErrorContains(t, err, "checkpoint: restore step 3 ("+stepDir(dir, 3)+")")
			require.ErrorContains(t, err, "file manifest.json: ")
			require.NotContains(t, err.Error(), "file d0")
			require.ErrorContains(t, err, c.msg)
		})
	}
}

// TestSymlinkStepDir: a step directory that is a symlink to a step saved
// elsewhere is not listed and not restored, so listing and restoring agree
// and nothing outside dir is read.
func TestSymlinkStepDir(t *testing.T) {
	dir, elsewhere := t.TempDir(), t.TempDir()
	savedState(t, dir, 1, 1)
	savedState(t, elsewhere, 2, 2)
	require.NoError(t, os.Symlink(stepDir(elsewhere, 2), stepDir(dir, 2)))

	steps, err := Steps(dir)
	require.NoError(t, err)
	require.Equal(t, []int{1}, steps)
	_, err = Restore(dir, 2, zerosLike(newState(1)), nil)
	require.ErrorIs(t, err, ErrUnsafePath)
	require.EqualError(t, err, "checkpoint: restore step 2 ("+stepDir(dir, 2)+"): unsafe file name: the step directory is a symlink to "+stepDir(elsewhere, 2)+" (this package never writes one; restoring it would read outside "+dir+")")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, stepDir(dir, 2), e.File, "the file at fault is the step directory")
	_, err = Metrics(dir, 2)
	require.ErrorIs(t, err, ErrUnsafePath)
	got, step, err := RestoreLatest(dir, zerosLike(newState(1)), nil)
	require.NoError(t, err)
	require.Equal(t, 1, step)
	requireBitExact(t, newState(1), got)

	// A plain file where a step directory belongs is not a step either.
	require.NoError(t, os.WriteFile(stepDir(dir, 5), nil, 0o644))
	steps, err = Steps(dir)
	require.NoError(t, err)
	require.Equal(t, []int{1}, steps)
	_, err = Restore(dir, 5, zerosLike(newState(1)), nil)
	require.ErrorIs(t, err, ErrCorrupt)
	require.EqualError(t, err, "checkpoint: restore step 5 ("+stepDir(dir, 5)+"): corrupt checkpoint: the step directory is not a directory: it is a regular file")
	require.ErrorAs(t, err, &e)
	require.Equal(t, stepDir(dir, 5), e.File)
}

// TestEditedDTypeBlamesManifest: a manifest whose dtype was edited (or a
// program whose tree changed since the save) is reported as a mismatch
// with what manifest.json records, naming that file, not the data file.
func TestEditedDTypeBlamesManifest(t *testing.T) {
	dir := t.TempDir()
	savedState(t, dir, 3, 1)
	m := loadManifest(t, dir, 3)
	entryOf(m, "Params.W").DType = "int32"
	writeManifest(t, dir, 3, m)
	_, err := Restore(dir, 3, zerosLike(newState(1)), nil)
	require.ErrorIs(t, err, ErrMismatch)
	require.EqualError(t, err, "checkpoint: restore step 3 ("+stepDir(dir, 3)+"): tensor Params.W: file manifest.json: does not match: the manifest records i32[16,8], the tree to restore into has f32[16,8]")
	var e *Error
	require.ErrorAs(t, err, &e)
	require.Equal(t, manifestName, e.File)
}

// TestOnMeshNil: a nil mesh or nil specs is a programmer error, reported
// at once by a panic that says what to pass instead.
func TestOnMeshNil(t *testing.T) {
	require.PanicsWithValue(t, "checkpoint.OnMesh: nil mesh (checkpoint.OnHost() restores onto the host)", func() { OnMesh(nil, shard.P()) })
	mesh := shard.NewMesh([]int{2}, []string{"dp"})
	require.PanicsWithValue(t, "checkpoint.OnMesh: nil specs (shard.P() replicates every leaf on "+mesh.String()+")", func() { OnMesh(mesh, nil) })
}

// TestExportMode: an exported file gets the mode Save's files get (0644
// less the umask), not CreateTemp's 0600.
func TestExportMode(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "model.safetensors")
	require.NoError(t, ExportSafetensors(path, newState(1), nil))
	require.NoError(t, Save(dir, 1, newState(1)))
	got, err := os.Stat(path)
	require.NoError(t, err)
	want, err := os.Stat(filepath.Join(stepDir(dir, 1), manifestName))
	require.NoError(t, err)
	require.Equal(t, want.Mode().Perm(), got.Mode().Perm())
	require.NotZero(t, got.Mode().Perm()&0o044, "readable by group or others under the usual umask")
	require.Len(t, listDir(t, dir), 2, "no temporary file left")
}

// TestSyncDirFailsAfterRename: when the fsync of the checkpoint directory
// fails after the step was renamed into place, the save has succeeded (the
// step restores) and the failure goes to OnUnsynced; a failure to sync the
// temporary directory, before the rename, still fails the save.
func TestSyncDirFailsAfterRename(t *testing.T) {
	dir := t.TempDir()
	injected := errors.New("injected EIO")
	orig := syncDir
	t.Cleanup(func() { syncDir = orig })
	syncDir = func(d string) error {
		if d == dir {
			return injected
		}
		return orig(d)
	}
	var reported []error
	for _, overwrite := range []bool{false, true} {
		opts := []SaveOption{OnUnsynced(func(err error) { reported = append(reported, err) })}
		if overwrite {
			opts = append(opts, Overwrite())
		}
		require.NoError(t, Save(dir, 1, newState(uint64(len(reported)+1)), opts...))
		got, err := Restore(dir, 1, zerosLike(newState(1)), nil)
		require.NoError(t, err)
		requireBitExact(t, newState(uint64(len(reported))), got)
	}
	require.Len(t, reported, 2)
	require.ErrorIs(t, reported[0], injected)
	require.ErrorContains(t, reported[0], "checkpoint: save step 1")
	require.ErrorContains(t, reported[0], "step saved, but syncing "+dir)

	// The Manager passes its OnUnsynced on.
	var mgrReported error
	mgr, err := NewManager(dir, ManagerOptions{OnUnsynced: func(err error) { mgrReported = err }})
	require.NoError(t, err)
	saved, err := mgr.Save(2, newState(2), nil)
	require.NoError(t, err)
	require.True(t, saved)
	require.ErrorIs(t, mgrReported, injected)
	require.NoError(t, mgr.Close())

	// Before the rename a failed sync is a failed save, and leaves nothing.
	syncDir = func(d string) error {
		if d != dir {
			return injected
		}
		return nil
	}
	err = Save(dir, 3, newState(3))
	require.ErrorIs(t, err, injected)
	steps, err := Steps(dir)
	require.NoError(t, err)
	require.Equal(t, []int{1, 2}, steps)
}

// TestUnreadableDataFile: a data file this process may not read is an
// error of the environment, not an unsafe name or a damaged step.
func TestUnreadableDataFile(t *testing.T) {
	r := &reader{step: 3}
	err := r.openFailure("W", "d0000.bin", &fs.PathError{Op: "openat", Path: "d0000.bin", Err: fs.ErrPermission})
	require.ErrorIs(t, err, fs.ErrPermission)
	require.False(t, errors.Is(err, ErrUnsafePath) || errors.Is(err, ErrCorrupt), "%v", err)
	require.EqualError(t, err, "checkpoint: restore step 3: tensor W: file d0000.bin: openat d0000.bin: permission denied")
	require.ErrorIs(t, r.openFailure("W", "d0000.bin", fs.ErrNotExist), ErrCorrupt)
	require.ErrorIs(t, r.openFailure("W", "d0000.bin", errors.New("path escapes from parent")), ErrUnsafePath)

	if os.Geteuid() == 0 {
		t.Skip("root reads files whatever their mode; the classification is checked above")
	}
	dir := t.TempDir()
	savedState(t, dir, 1, 1)
	m := loadManifest(t, dir, 1)
	name := filepath.Join(stepDir(dir, 1), entryOf(m, "Params.W").Shards[0].File)
	require.NoError(t, os.Chmod(name, 0))
	_, err = Restore(dir, 1, zerosLike(newState(1)), nil)
	require.ErrorIs(t, err, fs.ErrPermission)
	require.False(t, errors.Is(err, ErrUnsafePath))
}
