package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"

	"github.com/gonox/gonox/shard"
)

// ManagerOptions configures a Manager. The zero value saves every step
// given to Save, synchronously, and keeps everything.
type ManagerOptions struct {
	// SaveEvery saves only steps that are multiples of it (0 or 1: every
	// step given to Save). Steps are counted by the caller.
	SaveEvery int
	// KeepLatest keeps the KeepLatest most recent steps (0: no limit of
	// its own).
	KeepLatest int
	// KeepBest keeps the KeepBest best steps by the metric named Metric
	// (0: none kept for being best). Steps saved without that metric are
	// never among the best.
	KeepBest int
	// Metric names the metric KeepBest ranks by; HigherIsBetter says which
	// way (a loss: false; an accuracy: true).
	Metric         string
	HigherIsBetter bool
	// Async makes Save return once the blocks to write are chosen (tensors
	// are immutable, so holding them is a snapshot); compression and writes
	// go on in a background goroutine while training continues. An error of
	// a background save is returned by the next Save, Wait or Close.
	Async bool
	// OnUnsynced, if not nil, is given to every Save (see the SaveOption
	// OnUnsynced): it is called when a step is in place but the fsync of
	// the directory after its rename failed, on the goroutine that saves
	// (with Async, the background one).
	OnUnsynced func(err error)
	// Metadata, if not nil, is saved with every step as a record of
	// MetadataSchema (see WithMetadata): the run's configuration, say. It
	// is encoded when Save is called, so a pointer saves the values it
	// points to at that moment; NewManager checks that it encodes.
	Metadata       any
	MetadataSchema Schema
}

// Manager saves a series of steps into one directory and prunes old ones,
// like orbax's CheckpointManager: every SaveEvery steps, keeping the latest
// KeepLatest and the best KeepBest by a metric, optionally in the
// background. When both KeepLatest and KeepBest are set, a step is kept if
// either keeps it; when neither is, every step is kept. The most recent
// step is always kept, so training can resume.
//
// A Manager's methods are safe for concurrent use. One Manager (or one
// process) should write a directory at a time. Restore a step with
// Restore(m.Dir(), step, ...) or RestoreLatest(m.Dir(), ...), given
// SkipCorrupt to fall back past a damaged step and CheckMetadata to
// compare the record of ManagerOptions.Metadata first.
type Manager struct {
	dir  string
	opts ManagerOptions

	mu      sync.Mutex
	steps   map[int]map[string]float64 // committed steps and their metrics
	pending chan struct{}              // closed when the background save ends; nil if none
	pendErr error                      // its error, read after pending is closed
	closed  bool
}

// NewManager opens (creating it if needed) a checkpoint directory and
// reads the steps already there, with their metrics.
func NewManager(dir string, opts ManagerOptions) (*Manager, error) {
	if err := checkDir("manager", -1, dir); err != nil {
		return nil, err
	}
	if opts.SaveEvery < 0 || opts.KeepLatest < 0 || opts.KeepBest < 0 {
		return nil, &Error{Op: "manager", Step: -1, Err: errors.New("negative SaveEvery, KeepLatest or KeepBest")}
	}
	if opts.KeepBest > 0 && opts.Metric == "" {
		return nil, &Error{Op: "manager", Step: -1, Err: errors.New("KeepBest needs a Metric")}
	}
	if opts.Metadata != nil {
		if _, err := newRecord(opts.MetadataSchema, opts.Metadata); err != nil {
			return nil, &Error{Op: "manager", Step: -1, Err: err}
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, &Error{Op: "manager", Step: -1, Err: err}
	}
	steps, err := Steps(dir)
	if err != nil {
		return nil, err
	}
	m := &Manager{dir: dir, opts: opts, steps: map[int]map[string]float64{}}
	for _, s := range steps {
		mt, err := Metrics(dir, s)
		if err != nil {
			mt = nil // a damaged step has no metrics; it may still be pruned
		}
		m.steps[s] = mt
	}
	return m, nil
}

// Dir returns the checkpoint directory.
func (m *Manager) Dir() string { return m.dir }

// ShouldSave reports whether Save would save step (by SaveEvery).
func (m *Manager) ShouldSave(step int) bool {
	return m.opts.SaveEvery <= 1 || step%m.opts.SaveEvery == 0
}

// Save saves tree as step if ShouldSave(step), with metrics stored in the
// manifest, and prunes the steps the retention options no longer keep; it
// reports whether it saved. A step that exists is replaced.
//
// With Async, Save first waits for the previous background save; if that
// failed, Save returns its error and does not save step. Otherwise it
// takes the snapshot, starts writing in the background and returns. For a
// step it does not save, Save never waits; it returns the error of a
// background save that has already failed.
func (m *Manager) Save(step int, tree any, metrics map[string]float64) (bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return false, &Error{Op: "manager", Step: step, Err: errors.New("Save after Close")}
	}
	if !m.ShouldSave(step) {
		// Do not wait for a background save on the steps in between; only
		// report one that has already failed.
		return false, m.pollLocked()
	}
	if err := m.waitLocked(); err != nil {
		return false, err
	}
	opts := []SaveOption{WithMetrics(metrics), Overwrite()}
	if m.opts.OnUnsynced != nil {
		opts = append(opts, OnUnsynced(m.opts.OnUnsynced))
	}
	if m.opts.Metadata != nil {
		opts = append(opts, WithMetadata(m.opts.MetadataSchema, m.opts.Metadata))
	}
	p, err := prepare(step, tree, opts)
	if err != nil {
		return false, err
	}
	metricsCopy := p.cfg.metrics
	if !m.opts.Async {
		if err := p.commit(m.dir); err != nil {
			return false, err
		}
		return true, m.committedLocked(step, metricsCopy)
	}
	done := make(chan struct{})
	m.pending = done
	go func() {
		err := p.commit(m.dir)
		m.mu.Lock()
		if err == nil {
			err = m.committedLocked(step, metricsCopy)
		}
		m.pendErr = err
		m.mu.Unlock()
		close(done)
	}()
	return true, nil
}

// committedLocked records a committed step and prunes.
func (m *Manager) committedLocked(step int, metrics map[string]float64) error {
	m.steps[step] = metrics
	var errs []error
	for _, s := range m.pruneLocked() {
		if shard.ProcessIndex() != 0 {
			delete(m.steps, s) // in a job of several processes, process 0 deletes
			continue
		}
		gone, err := removeStep(m.dir, s)
		if gone {
			delete(m.steps, s)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return &Error{Op: "manager", Step: step, Err: fmt.Errorf("pruning: %w", errors.Join(errs...))}
	}
	return nil
}

// removeAll is os.RemoveAll; tests replace it to fail part way.
var removeAll = os.RemoveAll

// removeStep deletes a step directory. It first renames it to a temporary
// name, so that a crash or an error part way through the deletion never
// leaves a step with its manifest but without some of its data, which
// Steps and RestoreLatest would take for a complete one; what is left of
// it is removed by the next Save's cleanup. gone reports whether the step
// is no longer a step, even if its contents could not all be removed.
func removeStep(dir string, step int) (gone bool, err error) {
	trash := filepath.Join(dir, tmpPrefix+stepName(step)+"-pruned")
	if err := removeAll(trash); err != nil {
		return false, err
	}
	if err := os.Rename(filepath.Join(dir, stepName(step)), trash); err != nil {
		return false, err
	}
	return true, removeAll(trash)
}

// pruneLocked returns the steps the retention options drop.
func (m *Manager) pruneLocked() []int {
	o := m.opts
	if o.KeepLatest == 0 && o.KeepBest == 0 {
		return nil
	}
	all := make([]int, 0, len(m.steps))
	for s := range m.steps {
		all = append(all, s)
	}
	sort.Ints(all)
	keep := map[int]bool{all[len(all)-1]: true}
	if o.KeepLatest > 0 {
		for _, s := range all[max(0, len(all)-o.KeepLatest):] {
			keep[s] = true
		}
	}
	if o.KeepBest > 0 {
		var ranked []int
		for _, s := range all {
			if _, ok := m.steps[s][o.Metric]; ok {
				ranked = append(ranked, s)
			}
		}
		sort.SliceStable(ranked, func(a, b int) bool {
			x, y := m.steps[ranked[a]][o.Metric], m.steps[ranked[b]][o.Metric]
			if x != y {
				return (x > y) == o.HigherIsBetter
			}
			return ranked[a] > ranked[b] // ties: the later step
		})
		for _, s := range ranked[:min(len(ranked), o.KeepBest)] {
			keep[s] = true
		}
	}
	var drop []int
	for _, s := range all {
		if !keep[s] {
			drop = append(drop, s)
		}
	}
	return drop
}

// waitLocked waits for the background save, if any, and returns its error
// once (later calls return nil). m.mu is released while waiting.
func (m *Manager) waitLocked() error {
	for m.pending != nil {
		p := m.pending
		m.mu.Unlock()
		<-p
		m.mu.Lock()
		if m.pending == p {
			m.pending = nil
			err := m.pendErr
			m.pendErr = nil
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// pollLocked returns the error of a background save that has ended, once,
// without waiting for one that has not.
func (m *Manager) pollLocked() error {
	if m.pending == nil {
		return nil
	}
	select {
	case <-m.pending:
		return m.waitLocked()
	default:
		return nil
	}
}

// Wait waits for the background save, if any, and returns its error.
func (m *Manager) Wait() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.waitLocked()
}

// Close waits for the background save and returns its error; no goroutine
// of the Manager outlives it. Later Saves fail; the other methods still
// work.
func (m *Manager) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	return m.waitLocked()
}

// Steps returns the committed steps, oldest first (a background save in
// progress is not one yet).
func (m *Manager) Steps() []int {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make([]int, 0, len(m.steps))
	for s := range m.steps {
		out = append(out, s)
	}
	sort.Ints(out)
	return out
}

// Latest returns the most recent committed step, and false if there is none.
func (m *Manager) Latest() (int, bool) {
	s := m.Steps()
	if len(s) == 0 {
		return 0, false
	}
	return s[len(s)-1], true
}

// Best returns the best committed step by the Metric option, and false if
// no step has that metric.
func (m *Manager) Best() (int, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	best, found := 0, false
	var bv float64
	for s, mt := range m.steps {
		v, ok := mt[m.opts.Metric]
		if !ok || m.opts.Metric == "" {
			continue
		}
		better := !found || (v != bv && (v > bv) == m.opts.HigherIsBetter) || (v == bv && s > best)
		if better {
			best, bv, found = s, v, true
		}
	}
	return best, found
}

// Metrics returns the metrics a committed step was saved with (nil if none).
func (m *Manager) Metrics(step int) (map[string]float64, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	mt, ok := m.steps[step]
	return maps(mt), ok
}

func maps(m map[string]float64) map[string]float64 {
	if m == nil {
		return nil
	}
	out := make(map[string]float64, len(m))
	for k, v := range m {
		out[k] = v
	}
	return out
}

// Steps returns the complete steps in dir, oldest first: the step
// directories that have a manifest. Temporary directories of saves in
// progress or interrupted are not steps, and neither is a symlink to a
// step directory or one whose manifest.json is not a regular file:
// Restore refuses those, so what Steps lists is what Restore and
// RestoreLatest read.
func Steps(dir string) ([]int, error) {
	if err := checkDir("steps", -1, dir); err != nil {
		return nil, err
	}
	ents, err := readDir(dir)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, nil
		}
		return nil, &Error{Op: "steps", Step: -1, Err: err}
	}
	var out []int
	for _, e := range ents {
		s, ok := parseStepName(e.Name())
		if !ok || e.Type()&fs.ModeSymlink != 0 || !e.IsDir() {
			continue
		}
		// Lstat, as readManifest does: never open what might be a FIFO.
		if fi, err := os.Lstat(filepath.Join(dir, e.Name(), manifestName)); err == nil && fi.Mode().IsRegular() {
			out = append(out, s)
		}
	}
	slices.Sort(out)
	return out, nil
}

// LatestStep returns the most recent complete step in dir, and false if
// there is none.
func LatestStep(dir string) (int, bool, error) {
	s, err := Steps(dir)
	if err != nil || len(s) == 0 {
		return 0, false, err
	}
	return s[len(s)-1], true, nil
}

// Metrics returns the metrics step of dir was saved with.
func Metrics(dir string, step int) (map[string]float64, error) {
	root, m, err := readManifest(dir, step)
	if err != nil {
		return nil, err
	}
	root.Close()
	return m.Metrics, nil
}

// RestoreLatest restores the most recent complete step of dir (see
// Restore) and returns it with its step number; it returns an error
// wrapping ErrNotFound if dir has no step.
//
// By default a newest step that fails to restore is an error. With
// SkipCorrupt, RestoreLatest falls back to the newest step that restores.
func RestoreLatest[T any](dir string, like T, to Placement, opts ...RestoreOption) (T, int, error) {
	var zero T
	var cfg restoreConfig
	for _, o := range opts {
		o(&cfg)
	}
	steps, err := Steps(dir)
	if err != nil {
		return zero, 0, err
	}
	if len(steps) == 0 {
		return zero, 0, &Error{Op: "restore", Step: -1, Err: fmt.Errorf("%w: no step in %s", ErrNotFound, dir)}
	}
	if !cfg.skip {
		step := steps[len(steps)-1]
		out, err := Restore(dir, step, like, to, opts...)
		return out, step, err
	}
	once := append(slices.Clone(opts), func(c *restoreConfig) { c.skip = false })
	var errs []error
	for i := len(steps) - 1; i >= 0; i-- {
		out, err := Restore(dir, steps[i], like, to, once...)
		if err == nil {
			return out, steps[i], nil
		}
		if !damaged(err) {
			return zero, steps[i], err
		}
		if cfg.skipped != nil {
			cfg.skipped(steps[i], err)
		}
		errs = append(errs, err)
	}
	return zero, 0, &Error{Op: "restore", Step: -1, Err: fmt.Errorf("none of the %d steps of %s restores:\n%w", len(steps), dir, errors.Join(errs...))}
}

// SkipCorrupt makes RestoreLatest restore the newest step that restores,
// instead of failing when the newest is damaged: a step that fails with
// an error wrapping ErrCorrupt (a manifest that does not parse, a data
// file missing, truncated or failing its checksums), ErrUnsafePath or
// ErrNotFound (removed meanwhile) is skipped, and the step before it
// tried. skipped, if not nil, is called with each step skipped and its
// error, newest first, before the next one is tried. A step is checked as
// it is restored, so a step skipped is one whose restore failed, and
// RestoreLatest returns the step it restored.
//
// A mismatch between the step and the tree (ErrMismatch, CheckMetadata's
// refusal) is not skipped: it is returned, since an older step of the
// same run would not fit better. If every step is damaged, the error
// wraps the error of each (errors.Is(err, ErrCorrupt) holds).
//
// Restore (given one step) refuses this option.
func SkipCorrupt(skipped func(step int, err error)) RestoreOption {
	return func(c *restoreConfig) { c.skip, c.skipped = true, skipped }
}

// damaged reports whether a restore failed because the step is damaged
// (and an older one may restore), not because it does not fit.
func damaged(err error) bool {
	var r *refusal
	if errors.As(err, &r) || errors.Is(err, ErrMismatch) {
		return false
	}
	return errors.Is(err, ErrCorrupt) || errors.Is(err, ErrUnsafePath) || errors.Is(err, ErrNotFound)
}
