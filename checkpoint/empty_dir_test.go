package checkpoint

import (
	"os"
	"testing"

	"github.com/stretchr/testify/require"
)

// An empty directory name (an unset flag or environment variable) is an
// error naming it. Before, Save failed with "mkdir : no such file or
// directory", Steps and RestoreLatest reported no steps, as for a fresh
// directory, so a run would silently start over, and Restore read the step
// from the current directory.
func TestEmptyDirectoryName(t *testing.T) {
	t.Chdir(t.TempDir())
	require.NoError(t, Save(".", 1, newState(1))) // "." is the current directory
	const cause = `the checkpoint directory is "" (use "." for the current directory)`
	err := Save("", 2, newState(2))
	require.EqualError(t, err, "checkpoint: save step 2: "+cause)
	_, err = Restore("", 1, zerosLike(newState(1)), nil)
	require.EqualError(t, err, "checkpoint: restore step 1: "+cause)
	_, _, err = RestoreLatest("", zerosLike(newState(1)), nil)
	require.EqualError(t, err, "checkpoint: steps: "+cause)
	_, err = Steps("")
	require.EqualError(t, err, "checkpoint: steps: "+cause)
	_, _, err = LatestStep("")
	require.EqualError(t, err, "checkpoint: steps: "+cause)
	_, err = Metrics("", 1)
	require.EqualError(t, err, "checkpoint: restore step 1: "+cause)
	_, err = NewManager("", ManagerOptions{})
	require.EqualError(t, err, "checkpoint: manager: "+cause)
	var ce *Error
	require.ErrorAs(t, err, &ce)

	// Nothing was written; step 1 in "." is intact.
	ents, err := os.ReadDir(".")
	require.NoError(t, err)
	require.Len(t, ents, 1)
	got, err := Restore(".", 1, zerosLike(newState(1)), nil)
	require.NoError(t, err)
	requireBitExact(t, newState(1), got)
}
