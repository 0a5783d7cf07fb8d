package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
)

type skip struct {
	step int
	err  error
}

// TestSkipCorrupt: RestoreLatest with SkipCorrupt restores the newest
// step that restores, reporting the damaged ones newest first with their
// errors; without it, a damaged newest step is an error as before.
func TestSkipCorrupt(t *testing.T) {
	dir := t.TempDir()
	for step := 1; step <= 5; step++ {
		require.NoError(t, Save(dir, step, tinyAt(step), withChunkBytes(256), WithMetadata(runSchema, newRunConfig())))
	}
	// 5: a flipped bit in a chunk; 4: a manifest cut short; 3: a data file
	// gone.
	data := filepath.Join(stepDir(dir, 5), "h0000.bin")
	b, err := os.ReadFile(data)
	require.NoError(t, err)
	b[len(b)/2] ^= 0x10
	require.NoError(t, os.WriteFile(data, b, 0o644))
	man := filepath.Join(stepDir(dir, 4), manifestName)
	b, err = os.ReadFile(man)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(man, b[:len(b)/2], 0o644))
	require.NoError(t, os.Remove(filepath.Join(stepDir(dir, 3), "h0000.bin")))

	_, step, err := RestoreLatest(dir, tinyAt(0), nil)
	require.ErrorIs(t, err, ErrCorrupt, "the default is unchanged")
	require.Equal(t, 5, step)

	var skipped []skip
	got, step, err := RestoreLatest(dir, tinyAt(0), nil, SkipCorrupt(func(step int, err error) {
		skipped = append(skipped, skip{step, err})
	}))
	require.NoError(t, err)
	require.Equal(t, 2, step)
	requireBitExact(t, tinyAt(2), got)
	require.Len(t, skipped, 3)
	for i, want := range []struct {
		step       int
		file, text string
	}{
		{5, "h0000.bin", "checksum mismatch"},
		{4, manifestName, "unexpected EOF"},
		{3, "h0000.bin", "data file is missing"},
	} {
		require.Equal(t, want.step, skipped[i].step)
		require.ErrorIs(t, skipped[i].err, ErrCorrupt)
		var e *Error
		require.ErrorAs(t, skipped[i].err, &e)
		require.Equal(t, want.step, e.Step)
		require.Equal(t, want.file, e.File)
		require.ErrorContains(t, skipped[i].err, want.text)
	}
	// A nil report is allowed; CheckMetadata applies to the step restored.
	var saved runConfig
	_, step, err = RestoreLatest(dir, tinyAt(0), nil, SkipCorrupt(nil), CheckMetadata(runSchema, &saved, nil))
	require.NoError(t, err)
	require.Equal(t, 2, step)
	require.Equal(t, "abcz", saved.Vocab)
}

// TestSkipCorruptStops: a step that does not fit the tree or the
// program's check is not skipped; when every step is damaged the error
// says so and wraps each.
func TestSkipCorruptStops(t *testing.T) {
	dir := t.TempDir()
	for step := 1; step <= 2; step++ {
		require.NoError(t, Save(dir, step, tinyAt(step), WithMetadata(runSchema, newRunConfig())))
	}
	calls := 0
	report := func(int, error) { calls++ }

	other := tiny{W: tensor.Zeros(tensor.Float32, 16, 32), Step: tinyAt(0).Step}
	_, step, err := RestoreLatest(dir, other, nil, SkipCorrupt(report))
	require.ErrorIs(t, err, ErrMismatch)
	require.Equal(t, 2, step)

	errNo := errors.New("no")
	var saved runConfig
	_, _, err = RestoreLatest(dir, tinyAt(0), nil, SkipCorrupt(report), CheckMetadata(runSchema, &saved, func(MetadataInfo) error { return errNo }))
	require.ErrorIs(t, err, errNo)
	_, _, err = RestoreLatest(dir, tinyAt(0), nil, SkipCorrupt(report), CheckMetadata(Schema{"other", 1}, &saved, nil))
	require.ErrorIs(t, err, ErrMismatch)
	// Even a check that blames corruption is the program's word: not skipped.
	_, _, err = RestoreLatest(dir, tinyAt(0), nil, SkipCorrupt(report), CheckMetadata(runSchema, &saved, func(MetadataInfo) error { return ErrCorrupt }))
	require.ErrorIs(t, err, ErrCorrupt)
	require.Zero(t, calls)

	// Every step damaged.
	for step := 1; step <= 2; step++ {
		require.NoError(t, os.WriteFile(filepath.Join(stepDir(dir, step), manifestName), []byte("{"), 0o644))
	}
	_, _, err = RestoreLatest(dir, tinyAt(0), nil, SkipCorrupt(report))
	require.ErrorIs(t, err, ErrCorrupt)
	require.ErrorContains(t, err, "checkpoint: restore: none of the 2 steps of "+dir+" restores:\ncheckpoint: restore step 2 (")
	require.ErrorContains(t, err, "\ncheckpoint: restore step 1 (")
	require.Equal(t, 2, calls)

	// Restore is given its step: SkipCorrupt makes no sense there.
	_, err = Restore(dir, 1, tinyAt(0), nil, SkipCorrupt(nil))
	require.ErrorContains(t, err, "SkipCorrupt applies to RestoreLatest")
	// No step at all.
	_, _, err = RestoreLatest(t.TempDir(), tinyAt(0), nil, SkipCorrupt(nil))
	require.ErrorIs(t, err, ErrNotFound)
}
