package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/gonox/gonox/checkpoint"
)

// Setting says how a setting of a run's record (a checkpoint.Metadata
// record, the setting named by its path as checkpoint.DiffMetadata names
// it) may differ when the run resumes.
type Setting struct {
	// Flag is the flag that sets it ("-heads"), named in messages.
	Flag string
	// Changed, if not nil, allows the setting to change on resume and
	// returns the note printed about what follows ("the learning-rate
	// schedule now decays over 900 steps"); nil refuses a change.
	Changed func(d checkpoint.Difference) string
	// Refused, if not nil, words a refused change instead of "-flag:
	// the checkpoint was saved with X, this run has Y".
	Refused func(d checkpoint.Difference) string
}

// MismatchError is a resume refused because settings differ from the
// checkpoint's: a usage error (the flags, or the data they name, describe
// another run).
type MismatchError struct {
	Dir  string
	Step int
	What []string // one description per refused setting
}

// Error names the directory, the step and every refused setting, on one
// line.
func (e *MismatchError) Error() string {
	return fmt.Sprintf("-ckpt %s holds step %d of another run: %s (flags of the model, the data and the optimizer must match the run that saved it; start another -ckpt directory to train this one)",
		e.Dir, e.Step, strings.Join(e.What, "; "))
}

// CompareRun compares the saved record's settings with the current ones
// and returns the notes of the changes that are allowed, or a
// *MismatchError naming every refused one. A setting missing from
// settings is refused.
func CompareRun(dir string, step int, diffs []checkpoint.Difference, settings map[string]Setting) (notes []string, err error) {
	var refused []string
	for _, d := range diffs {
		s, ok := settings[d.Setting]
		switch {
		case ok && s.Changed != nil:
			if note := s.Changed(d); note != "" {
				notes = append(notes, note)
			}
		case ok && s.Refused != nil:
			refused = append(refused, s.Refused(d))
		case ok:
			refused = append(refused, fmt.Sprintf("%s: the checkpoint was saved with %s, this run has %s", s.Flag, show(d.Saved), show(d.Current)))
		default:
			refused = append(refused, d.String())
		}
	}
	if len(refused) > 0 {
		return nil, &MismatchError{Dir: dir, Step: step, What: refused}
	}
	return notes, nil
}

// show formats a setting's value as a command line would: strings bare
// unless empty, other values as JSON.
func show(v any) string {
	if s, ok := v.(string); ok && s != "" {
		return s
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	return string(b)
}

// Resumed describes a restore of the newest step of a checkpoint
// directory that verifies (see Restore).
type Resumed[T any] struct {
	State T
	Step  int
	Notes []string // steps skipped, allowed changes, a record missing
}

// Restore restores the newest step of dir that restores into like,
// placed as like is (with opts, such as checkpoint.Partial), after
// checking its metadata record of schema s: the record is decoded into
// saved, and compare returns the notes of allowed changes or an error
// refusing the step (CompareRun's *MismatchError, a usage error). Damaged
// steps are skipped, each with a note naming it and why
// (checkpoint.SkipCorrupt). A step saved without a record (by an earlier
// version of the example) restores unchecked, with a note saying so. ok
// is false if dir has no step.
func Restore[T, R any](dir string, like T, s checkpoint.Schema, saved *R,
	compare func(info checkpoint.MetadataInfo, saved *R) ([]string, error), opts ...checkpoint.RestoreOption) (r Resumed[T], ok bool, err error) {
	steps, err := checkpoint.Steps(dir)
	if err != nil || len(steps) == 0 {
		return r, false, err
	}
	var notes []string
	opts = append(opts, checkpoint.SkipCorrupt(func(step int, err error) {
		notes = append(notes, fmt.Sprintf("(step %d in %s does not restore, so an earlier step is used: %v)", step, dir, err))
	}))
	var refusal error
	if latest := steps[len(steps)-1]; legacy(dir, latest, s) {
		notes = append(notes, fmt.Sprintf("(step %d in %s was saved without a record of its settings, by an earlier version: they are not checked)", latest, dir))
	} else {
		opts = append(opts, checkpoint.CheckMetadata(s, saved, func(info checkpoint.MetadataInfo) error {
			n, err := compare(info, saved)
			if err != nil {
				refusal = err
				return err
			}
			notes = append(notes, n...)
			return nil
		}))
	}
	st, step, err := checkpoint.RestoreLatest(dir, like, checkpoint.AsLike(), opts...)
	switch {
	case err != nil && refusal != nil:
		if errors.As(refusal, new(*MismatchError)) {
			return r, false, Usage(refusal)
		}
		return r, false, refusal
	case errors.Is(err, checkpoint.ErrMismatch):
		// A record of another kind or version, tensors of other shapes:
		// the directory holds another run.
		return r, false, Usage(fmt.Errorf("-ckpt %s: %w", dir, err))
	case err != nil:
		return r, false, err
	}
	return Resumed[T]{State: st, Step: step, Notes: notes}, true, nil
}

// legacy reports whether step of dir has a manifest without a metadata
// record (its other faults are left to the restore).
func legacy(dir string, step int, s checkpoint.Schema) bool {
	info, err := checkpoint.ReadMetadata(dir, step, s, nil)
	return err != nil && errors.Is(err, checkpoint.ErrMismatch) && info.Schema == (checkpoint.Schema{})
}
