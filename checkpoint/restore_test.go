package checkpoint

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

// savedState saves newState(seed) as step with W sharded over dp=4,tp=2,
// in small frames, and returns it.
func savedState(t *testing.T, dir string, step int, seed uint64) state {
	t.Helper()
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	st := newState(seed)
	st.Params.W = shard.Put(st.Params.W, shard.NewSharding(mesh, shard.P("dp", "tp")))
	require.NoError(t, Save(dir, step, st, withChunkBytes(64)))
	return st
}

func loadManifest(t *testing.T, dir string, step int) *manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(stepDir(dir, step), manifestName))
	require.NoError(t, err)
	m, err := parseManifest(data)
	require.NoError(t, err)
	return m
}

func writeManifest(t *testing.T, dir string, step int, m *manifest) {
	t.Helper()
	data, err := json.MarshalIndent(m, "", " ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(stepDir(dir, step), manifestName), data, 0o644))
}

func entryOf(m *manifest, path string) *tensorEntry {
	for _, e := range m.Tensors {
		if e.Path == path {
			return e
		}
	}
	return nil
}

// snapshot records every file under dir with its size and modification
// time, to check that a failed restore changed nothing.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	require.NoError(t, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		require.NoError(t, err)
		fi, err := d.Info()
		require.NoError(t, err)
		out[p] = fi.ModTime().String() + " " + fi.Mode().String() + " " + string(rune(fi.Size()))
		return nil
	}))
	return out
}

func TestCorruption(t *testing.T) {
	cases := []struct {
		name   string
		break_ func(t *testing.T, dir string, m *manifest)
		kind   error
		path   string // the tensor the error must name
		file   int    // which shard of W must be named by its file (-1: none)
		msg    string
	}{
		{"flipped byte", func(t *testing.T, dir string, m *manifest) {
			s := entryOf(m, "Params.W").Shards[1]
			name := filepath.Join(stepDir(dir, 3), s.File)
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			data[s.Pos+s.Size/2] ^= 0x40
			require.NoError(t, os.WriteFile(name, data, 0o644))
		}, ErrCorrupt, "Params.W", 1, "checksum mismatch"},
		{"truncated shard", func(t *testing.T, dir string, m *manifest) {
			s := entryOf(m, "Params.W").Shards[0]
			require.NoError(t, os.Truncate(filepath.Join(stepDir(dir, 3), s.File), s.Pos+s.Size-1))
		}, ErrCorrupt, "Params.W", 0, "truncated"},
		{"deleted shard", func(t *testing.T, dir string, m *manifest) {
			s := entryOf(m, "Params.W").Shards[2]
			require.NoError(t, os.Remove(filepath.Join(stepDir(dir, 3), s.File)))
		}, ErrCorrupt, "Params.W", 2, "missing"},
		{"garbled manifest", func(t *testing.T, dir string, m *manifest) {
			require.NoError(t, os.WriteFile(filepath.Join(stepDir(dir, 3), manifestName), []byte(`{"format": "gonox-checkpoint", "version": 1, "tens`), 0o644))
		}, ErrCorrupt, "", -1, "manifest.json"},
		{"deleted manifest", func(t *testing.T, dir string, m *manifest) {
			require.NoError(t, os.Remove(filepath.Join(stepDir(dir, 3), manifestName)))
		}, ErrCorrupt, "", -1, "manifest.json"},
		{"future version", func(t *testing.T, dir string, m *manifest) {
			m.Version = 5
			writeManifest(t, dir, 3, m)
		}, ErrCorrupt, "", -1, "format version 5, this package reads versions 1 to 4"},
		{"wrong crc in manifest", func(t *testing.T, dir string, m *manifest) {
			entryOf(m, "Params.B").Shards[0].Chunks[0].CRC32C++
			writeManifest(t, dir, 3, m)
		}, ErrCorrupt, "Params.B", -1, "checksum mismatch"},
		{"shard shape lies", func(t *testing.T, dir string, m *manifest) {
			entryOf(m, "Params.W").Shards[0].Shape = []int{8, 8}
			writeManifest(t, dir, 3, m)
		}, ErrCorrupt, "Params.W", -1, `shard 0 (data file "d0000.bin"): shape [8 8]`},
		{"missing block", func(t *testing.T, dir string, m *manifest) {
			e := entryOf(m, "Params.W")
			e.Shards = e.Shards[1:]
			writeManifest(t, dir, 3, m)
		}, ErrCorrupt, "Params.W", -1, "7 shards"},
		{"dotdot file name", func(t *testing.T, dir string, m *manifest) {
			entryOf(m, "Params.W").Shards[0].File = "../d0000.bin"
			writeManifest(t, dir, 3, m)
		}, ErrUnsafePath, "Params.W", -1, "../d0000.bin"},
		{"absolute file name", func(t *testing.T, dir string, m *manifest) {
			entryOf(m, "Params.W").Shards[0].File = "/etc/passwd"
			writeManifest(t, dir, 3, m)
		}, ErrUnsafePath, "Params.W", -1, "/etc/passwd"},
		{"subdirectory file name", func(t *testing.T, dir string, m *manifest) {
			entryOf(m, "Params.W").Shards[0].File = "sub/d0000.bin"
			writeManifest(t, dir, 3, m)
		}, ErrUnsafePath, "Params.W", -1, "sub/d0000.bin"},
		{"symlink leaving the directory", func(t *testing.T, dir string, m *manifest) {
			s := entryOf(m, "Params.W").Shards[0]
			name := filepath.Join(stepDir(dir, 3), s.File)
			outside := filepath.Join(t.TempDir(), "outside.bin")
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(outside, data, 0o644))
			require.NoError(t, os.Remove(name))
			require.NoError(t, os.Symlink(outside, name))
		}, ErrUnsafePath, "Params.W", 0, "symlink"},
		{"relative symlink leaving the directory", func(t *testing.T, dir string, m *manifest) {
			s := entryOf(m, "Params.W").Shards[0]
			name := filepath.Join(stepDir(dir, 3), s.File)
			data, err := os.ReadFile(name)
			require.NoError(t, err)
			require.NoError(t, os.WriteFile(filepath.Join(dir, "stolen.bin"), data, 0o644))
			require.NoError(t, os.Remove(name))
			require.NoError(t, os.Symlink("../stolen.bin", name))
		}, ErrUnsafePath, "Params.W", 0, "symlink"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			savedState(t, dir, 3, 1)
			m := loadManifest(t, dir, 3)
			var file string
			if c.file >= 0 {
				file = entryOf(m, "Params.W").Shards[c.file].File
			}
			c.break_(t, dir, m)
			before := snapshot(t, dir)
			_, err := Restore(dir, 3, zerosLike(newState(1)), nil)
			require.Error(t, err)
			require.ErrorIs(t, err, c.kind)
			require.Contains(t, err.Error(), c.msg)
			if c.path != "" {
				require.Contains(t, err.Error(), "tensor "+c.path)
			}
			if c.file >= 0 {
				require.Contains(t, err.Error(), "file "+file)
			}
			require.Equal(t, before, snapshot(t, dir), "a failed restore must not touch the disk")
		})
	}
}

func TestRestoreMismatch(t *testing.T) {
	dir := t.TempDir()
	st := savedState(t, dir, 3, 1)
	wrongShape := zerosLike(st)
	wrongShape.Params.B = tensor.Zeros(tensor.Float32, 9)
	wrongDType := zerosLike(st)
	wrongDType.Loader = tensor.Zeros(tensor.Float32)
	extra := zerosLike(st)
	extra.Params.Emb = append(extra.Params.Emb, tensor.Zeros(tensor.Float32, 2))
	fewer := zerosLike(st)
	fewer.Params.Emb = fewer.Params.Emb[:1]
	mesh := shard.NewMesh([]int{4}, []string{"dp"})
	cases := []struct {
		name string
		do   func() error
		kind error
		msg  string
	}{
		{"missing step", func() error { _, err := Restore(dir, 4, zerosLike(st), nil); return err }, ErrNotFound, "no step 4 in " + dir + " (its one step is 3)"},
		{"wrong shape", func() error { _, err := Restore(dir, 3, wrongShape, nil); return err }, ErrMismatch, "tensor Params.B: file manifest.json: does not match: the manifest records f32[8], the tree to restore into has f32[9]"},
		{"wrong dtype", func() error { _, err := Restore(dir, 3, wrongDType, nil); return err }, ErrMismatch, "tensor Loader"},
		{"like has more", func() error { _, err := Restore(dir, 3, extra, nil); return err }, ErrMismatch, "tensor Params.Emb[2]"},
		{"like has fewer", func() error { _, err := Restore(dir, 3, fewer, nil); return err }, ErrMismatch, "tensor Params.Emb[1]"},
		{"spec does not divide", func() error {
			_, err := Restore(dir, 3, zerosLike(st), OnMesh(mesh, shard.SpecFunc(func(p pytree.Path, x *tensor.Tensor) shard.Spec {
				if p.String() == "Params.Emb[1]" {
					return shard.P(nil, "dp") // i32[4,2]: 2 columns over 4 devices
				}
				return shard.P()
			})))
			return err
		}, ErrMismatch, "tensor Params.Emb[1]: does not match: placement"},
		{"unknown axis", func() error {
			_, err := Restore(dir, 3, zerosLike(st), OnMesh(mesh, shard.P("tp")))
			return err
		}, ErrMismatch, "no axis"},
		{"nothing under prefix", func() error {
			_, err := Restore(dir, 3, zerosLike(st.Params), nil, Subtree("Model"))
			return err
		}, ErrMismatch, `does not match: nothing saved under "Model" (saved under Params, Opt, Step, Key, Loader)`},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := c.do()
			require.ErrorIs(t, err, c.kind)
			require.Contains(t, err.Error(), c.msg)
		})
	}
}

func TestPartialRestore(t *testing.T) {
	dir := t.TempDir()
	st := savedState(t, dir, 3, 5)
	mesh := shard.NewMesh([]int{2}, []string{"dp"})

	// The parameters of a training state, into a bare model on a mesh.
	params, err := Restore(dir, 3, zerosLike(st.Params), OnMesh(mesh, fitSpec(mesh, shard.P("dp"))), Subtree("Params"))
	require.NoError(t, err)
	requireBitExact(t, st.Params, params)
	_, ok := shard.ShardingOf(params.W)
	require.True(t, ok)

	// A deeper prefix, and a single leaf.
	mu, err := Restore(dir, 3, zerosLike(st.Opt.Mu), nil, Subtree("Opt.Mu"))
	require.NoError(t, err)
	requireBitExact(t, st.Opt.Mu, mu)
	step, err := Restore(dir, 3, tensor.Zeros(tensor.Int32), nil, Subtree("Step"))
	require.NoError(t, err)
	require.Equal(t, []int32{5}, step.Int32s())

	// A filtered tree: only the float leaves, the others nil.
	floats := pytree.Filter(zerosLike(st), pytree.IsInexact)
	got, err := Restore(dir, 3, floats, nil, Partial())
	require.NoError(t, err)
	require.Nil(t, got.Step)
	require.Nil(t, got.Params.Mask)
	requireBitExact(t, pytree.Filter(st, pytree.IsInexact), got)
	_, err = Restore(dir, 3, floats, nil)
	require.ErrorIs(t, err, ErrMismatch)

	// The key survives bit for bit.
	require.Equal(t, tensor.NewKey(5+7), TensorKey(got2(t, dir).Key))
}

func got2(t *testing.T, dir string) state {
	s, err := Restore(dir, 3, zerosLike(newState(5)), nil)
	require.NoError(t, err)
	return s
}

func TestSaveExistsAndOverwrite(t *testing.T) {
	dir := t.TempDir()
	savedState(t, dir, 3, 1)
	err := Save(dir, 3, newState(2))
	require.ErrorIs(t, err, ErrExists)
	got, err := Restore(dir, 3, zerosLike(newState(1)), nil)
	require.NoError(t, err)
	requireBitExact(t, newState(1), got)

	require.NoError(t, Save(dir, 3, newState(2), Overwrite(), WithMetrics(map[string]float64{"loss": 0.5})))
	got, err = Restore(dir, 3, zerosLike(newState(1)), nil)
	require.NoError(t, err)
	requireBitExact(t, newState(2), got)
	mt, err := Metrics(dir, 3)
	require.NoError(t, err)
	require.Equal(t, map[string]float64{"loss": 0.5}, mt)
	require.Equal(t, []string{stepName(3)}, listDir(t, dir), "no leftovers")
}

func TestSaveCleansLeftovers(t *testing.T) {
	dir := t.TempDir()
	savedState(t, dir, 1, 1)
	// An interrupted save, and an interrupted overwrite that moved step 1
	// aside before the new one arrived.
	require.NoError(t, os.MkdirAll(filepath.Join(dir, ".tmp-00000002-123", "junk"), 0o755))
	require.NoError(t, os.Rename(stepDir(dir, 1), filepath.Join(dir, ".old-00000001-456")))
	steps, err := Steps(dir)
	require.NoError(t, err)
	require.Empty(t, steps, "temporary and old directories are not steps")

	require.NoError(t, Save(dir, 2, newState(2)))
	require.Equal(t, []string{stepName(1), stepName(2)}, listDir(t, dir))
	got, err := Restore(dir, 1, zerosLike(newState(1)), nil)
	require.NoError(t, err)
	requireBitExact(t, newState(1), got)
}

func TestSaveErrors(t *testing.T) {
	dir := t.TempDir()
	require.EqualError(t, Save(dir, -1, newState(1)), "checkpoint: save: step -1 is negative")
	// A tree without tensors is a mistake (a value instead of the state,
	// a model not yet built), not an empty checkpoint.
	require.EqualError(t, Save(dir, 1, 42), `checkpoint: save step 1: int holds no tensor, so there is nothing to save (nil tensors, unexported fields and fields tagged pytree:"static" are not leaves)`)
	require.ErrorContains(t, Save(dir, 1, tiny{}), "checkpoint.tiny holds no tensor")
	require.ErrorContains(t, Save(dir, 1, newState(1), WithMetrics(map[string]float64{"loss": 0 / zero()})), "finite")
	require.Empty(t, listDir(t, dir))
	// A file where the directory should be.
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	require.Error(t, Save(file, 1, newState(1)))
}

func zero() float64 { return 0 }

func TestReplaceFallback(t *testing.T) {
	dir := t.TempDir()
	savedState(t, dir, 1, 1)
	tmp := filepath.Join(dir, ".tmp-x")
	savedState(t, tmp, 1, 2)
	// What replaceDir does when no atomic exchange exists, done by hand.
	old := filepath.Join(dir, ".old-00000001-9")
	require.NoError(t, os.Rename(stepDir(dir, 1), old))
	require.NoError(t, os.Rename(stepDir(tmp, 1), stepDir(dir, 1)))
	require.NoError(t, cleanup(dir))
	require.Equal(t, []string{stepName(1)}, listDir(t, dir), "old step removed once the new one is in place")
	got, err := Restore(dir, 1, zerosLike(newState(1)), nil)
	require.NoError(t, err)
	requireBitExact(t, newState(2), got)
}

// TestMissingStepSaysWhichExist: asking for a step that is not there
// says which steps are, or why there are none.
func TestMissingStepSaysWhichExist(t *testing.T) {
	dir := t.TempDir()
	_, err := Restore(dir, 7, tinyAt(0), nil)
	require.ErrorIs(t, err, ErrNotFound)
	require.ErrorContains(t, err, "no step 7 in "+dir+" (it has no step)")
	gone := filepath.Join(dir, "nothing")
	_, err = Restore(gone, 7, tinyAt(0), nil)
	require.ErrorContains(t, err, "no step 7 in "+gone+" (the directory does not exist)")
	for _, s := range []int{10, 20} {
		require.NoError(t, Save(dir, s, tinyAt(s)))
	}
	_, err = ReadMetadata(dir, 7, runSchema, nil)
	require.EqualError(t, err, "checkpoint: metadata step 7 ("+stepDir(dir, 7)+"): not found: no step 7 in "+dir+" (its steps are 10, 20)")
	for _, s := range []int{30, 40, 50, 60} {
		require.NoError(t, Save(dir, s, tinyAt(s)))
	}
	_, err = Metrics(dir, 7)
	require.ErrorContains(t, err, "(its steps are 10, ..., 30, 40, 50, 60)")
}
