package checkpoint

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gonox/gonox/tensor"
	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"
)

// tiny is a small tree whose values depend on the step.
type tiny struct {
	W    *tensor.Tensor
	Step *tensor.Tensor
}

func tinyAt(step int) tiny {
	return tiny{W: tensor.Normal(tensor.NewKey(uint64(step)), 32, 16), Step: tensor.ScalarInt(int32(step))}
}

func TestManagerRetention(t *testing.T) {
	// Losses by step: the best (lowest) are 20 (0.1), 40 (0.2), 10 (0.3).
	loss := map[int]float64{10: 0.3, 20: 0.1, 30: 0.9, 40: 0.2, 50: 0.8, 60: 0.7}
	cases := []struct {
		name string
		opts ManagerOptions
		want []int
	}{
		{"keep all", ManagerOptions{}, []int{10, 20, 30, 40, 50, 60}},
		{"latest 2", ManagerOptions{KeepLatest: 2}, []int{50, 60}},
		{"best 2 by loss", ManagerOptions{KeepBest: 2, Metric: "loss"}, []int{20, 40, 60}}, // 60: the newest is always kept
		{"best 2 by accuracy", ManagerOptions{KeepBest: 2, Metric: "acc", HigherIsBetter: true}, []int{30, 50, 60}},
		{"latest 1 and best 2", ManagerOptions{KeepLatest: 1, KeepBest: 2, Metric: "loss"}, []int{20, 40, 60}},
		{"latest 3 and best 1", ManagerOptions{KeepLatest: 3, KeepBest: 1, Metric: "loss"}, []int{20, 40, 50, 60}},
		{"every 20, latest 2", ManagerOptions{SaveEvery: 20, KeepLatest: 2}, []int{40, 60}},
		{"async, latest 2 and best 1", ManagerOptions{KeepLatest: 2, KeepBest: 1, Metric: "loss", Async: true}, []int{20, 50, 60}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			m, err := NewManager(dir, c.opts)
			require.NoError(t, err)
			for step := 10; step <= 60; step += 10 {
				saved, err := m.Save(step, tinyAt(step), map[string]float64{"loss": loss[step], "acc": loss[step]})
				require.NoError(t, err)
				require.Equal(t, c.opts.SaveEvery <= 1 || step%c.opts.SaveEvery == 0, saved)
			}
			require.NoError(t, m.Close())
			require.Equal(t, c.want, m.Steps())
			onDisk, err := Steps(dir)
			require.NoError(t, err)
			require.Equal(t, c.want, onDisk)
			latest, ok := m.Latest()
			require.True(t, ok)
			require.Equal(t, 60, latest)
			if c.opts.Metric != "" {
				best, ok := m.Best()
				require.True(t, ok)
				if c.opts.HigherIsBetter {
					require.Equal(t, 30, best)
				} else {
					require.Equal(t, 20, best)
				}
			}
			mt, ok := m.Metrics(60)
			require.True(t, ok)
			require.Equal(t, 0.7, mt["loss"])

			// A new Manager on the directory finds the steps and metrics.
			m2, err := NewManager(dir, c.opts)
			require.NoError(t, err)
			require.Equal(t, c.want, m2.Steps())
			mt, _ = m2.Metrics(c.want[0])
			require.Equal(t, loss[c.want[0]], mt["loss"])
			got, step, err := RestoreLatest(dir, tinyAt(0), nil)
			require.NoError(t, err)
			require.Equal(t, 60, step)
			requireBitExact(t, tinyAt(60), got)
			require.NoError(t, m2.Close())
		})
	}
}

// TestManagerPruneFailsPartWay makes the deletion of a pruned step fail
// after removing one of its data files: the step must no longer be listed
// (on disk or by the Manager), the kept ones must restore, and the next
// Save must remove what was left.
func TestManagerPruneFailsPartWay(t *testing.T) {
	dir := t.TempDir()
	m, err := NewManager(dir, ManagerOptions{KeepLatest: 1})
	require.NoError(t, err)
	_, err = m.Save(1, tinyAt(1), nil)
	require.NoError(t, err)

	defer func(f func(string) error) { removeAll = f }(removeAll)
	broken := errors.New("injected: disk went away")
	removeAll = func(path string) error {
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil // nothing there
		}
		for _, e := range ents {
			if e.Name() != manifestName {
				require.NoError(t, os.Remove(filepath.Join(path, e.Name())))
				break
			}
		}
		return broken
	}
	_, err = m.Save(2, tinyAt(2), nil)
	require.ErrorIs(t, err, broken)
	removeAll = os.RemoveAll

	require.Equal(t, []int{2}, m.Steps())
	onDisk, err := Steps(dir)
	require.NoError(t, err)
	require.Equal(t, []int{2}, onDisk)
	got, step, err := RestoreLatest(dir, zerosLike(tinyAt(2)), nil)
	require.NoError(t, err)
	require.Equal(t, 2, step)
	requireBitExact(t, tinyAt(2), got)

	_, err = m.Save(3, tinyAt(3), nil)
	require.NoError(t, err)
	require.NoError(t, m.Close())
	require.Equal(t, []string{stepName(3)}, listDir(t, dir))
}

func TestManagerOptionsInvalid(t *testing.T) {
	_, err := NewManager(t.TempDir(), ManagerOptions{KeepBest: 1})
	require.ErrorContains(t, err, "needs a Metric")
	_, err = NewManager(t.TempDir(), ManagerOptions{KeepLatest: -1})
	require.Error(t, err)
	_, _, err = RestoreLatest(t.TempDir(), tinyAt(0), nil)
	require.ErrorIs(t, err, ErrNotFound)
}

func TestManagerAsync(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	m, err := NewManager(dir, ManagerOptions{Async: true, KeepLatest: 3})
	require.NoError(t, err)
	// Training goes on while saves run: the tree changes after each Save,
	// but the saved step holds the values given to Save.
	var wg sync.WaitGroup
	for step := 1; step <= 8; step++ {
		tree := tinyAt(step)
		_, err := m.Save(step, tree, nil)
		require.NoError(t, err)
		// Concurrent readers of the Manager while a save runs.
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.Steps()
			m.Latest()
		}()
	}
	wg.Wait()
	require.NoError(t, m.Wait())
	require.Equal(t, []int{6, 7, 8}, m.Steps())
	for _, s := range m.Steps() {
		got, err := Restore(dir, s, tinyAt(0), nil)
		require.NoError(t, err)
		requireBitExact(t, tinyAt(s), got)
	}
	require.NoError(t, m.Close())
	_, err = m.Save(9, tinyAt(9), nil)
	require.ErrorContains(t, err, "after Close")
}

func TestManagerConcurrentSaves(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	m, err := NewManager(dir, ManagerOptions{Async: true})
	require.NoError(t, err)
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for k := 0; k < 3; k++ {
				step := 1 + g*3 + k
				_, err := m.Save(step, tinyAt(step), nil)
				require.NoError(t, err)
			}
		}()
	}
	wg.Wait()
	require.NoError(t, m.Close())
	require.Len(t, m.Steps(), 12)
}

func TestManagerAsyncError(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	m, err := NewManager(dir, ManagerOptions{Async: true})
	require.NoError(t, err)
	// Make the background save fail: the checkpoint directory becomes a file.
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.WriteFile(dir, []byte("x"), 0o644))
	_, err = m.Save(1, tinyAt(1), nil)
	require.NoError(t, err, "the error comes later")
	// The next Save reports it and does not save.
	saved, err := m.Save(2, tinyAt(2), nil)
	require.False(t, saved)
	require.Error(t, err)
	var e *Error
	require.True(t, errors.As(err, &e))
	require.Equal(t, 1, e.Step)
	require.Empty(t, m.Steps())

	// Wait and Close report an error once.
	require.NoError(t, os.Remove(dir))
	require.NoError(t, os.MkdirAll(filepath.Dir(dir), 0o755))
	require.NoError(t, os.WriteFile(dir, []byte("x"), 0o644))
	_, err = m.Save(3, tinyAt(3), nil)
	require.NoError(t, err)
	require.Error(t, m.Close())
	require.NoError(t, m.Wait())
}

// A step the Manager does not save never waits for the background save,
// but reports its failure once it has happened, and only once.
func TestManagerSkippedStepReportsError(t *testing.T) {
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	dir := t.TempDir()
	m, err := NewManager(dir, ManagerOptions{Async: true, SaveEvery: 2})
	require.NoError(t, err)
	require.NoError(t, os.RemoveAll(dir))
	require.NoError(t, os.WriteFile(dir, []byte("x"), 0o644))
	saved, err := m.Save(2, tinyAt(2), nil)
	require.True(t, saved)
	require.NoError(t, err)
	deadline := time.Now().Add(20 * time.Second)
	var got error
	for got == nil && time.Now().Before(deadline) {
		saved, got = m.Save(3, tinyAt(3), nil)
		require.False(t, saved)
		time.Sleep(time.Millisecond)
	}
	require.Error(t, got, "the failure of step 2 surfaces on a skipped step")
	_, err = m.Save(5, tinyAt(5), nil)
	require.NoError(t, err, "and only once")
	require.NoError(t, m.Close())
}

// TestOverwriteSucceedsWhenOldCopyStays: once an overwrite has put the new
// step in place, failing to delete the old copy is not a failed save; the
// next Save removes the leftover.
func TestOverwriteSucceedsWhenOldCopyStays(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Save(dir, 1, tinyAt(1)))

	defer func(f func(string) error) { removeAll = f }(removeAll)
	removeAll = func(string) error { return errors.New("injected: cannot delete") }
	require.NoError(t, Save(dir, 1, tinyAt(2), Overwrite()))
	removeAll = os.RemoveAll

	got, err := Restore(dir, 1, zerosLike(tinyAt(2)), nil)
	require.NoError(t, err)
	requireBitExact(t, tinyAt(2), got)
	leftovers := func() (n int) {
		ents, err := os.ReadDir(dir)
		require.NoError(t, err)
		for _, e := range ents {
			if strings.HasPrefix(e.Name(), ".") {
				n++
			}
		}
		return n
	}
	require.Equal(t, 1, leftovers(), "the old copy is still there")
	require.NoError(t, Save(dir, 2, tinyAt(2)))
	require.Equal(t, 0, leftovers(), "the next Save removed it")
}
