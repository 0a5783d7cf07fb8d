package checkpoint_test

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/tensor"
)

// RunConfig is a program's record of a run: what the tensors do not say.
type RunConfig struct {
	Layers []int   // the model's widths
	Vocab  string  // the characters of the vocabulary, in order
	LR     float64 // the peak learning rate
	Steps  int     // the length of the schedule; may change on resume
}

// runSchema is the record's kind and version: raise the version when a
// field is removed, renamed or changes meaning.
var runSchema = checkpoint.Schema{Kind: "example-run", Version: 1}

// Save the run's configuration with every step and, on resume, compare
// it with the current one before any tensor is read: a setting of the
// model or the data refuses the step, a longer schedule is allowed.
func ExampleCheckMetadata() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	cfg := RunConfig{Layers: []int{8, 16, 4}, Vocab: "abcz", LR: 0.01, Steps: 500}
	state := newTrainState(tensor.NewKey(0))
	if err := checkpoint.Save(dir, 100, state, checkpoint.WithMetadata(runSchema, cfg)); err != nil {
		fmt.Println(err)
		return
	}

	// The record reads without restoring a tensor.
	var saved RunConfig
	info, err := checkpoint.ReadMetadata(dir, 100, runSchema, &saved)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(info.Schema, saved.Layers, saved.Vocab)

	// resume restores the latest step if its record fits cur.
	resume := func(cur RunConfig) {
		check := func(checkpoint.MetadataInfo) error {
			var refused []string
			for _, d := range checkpoint.DiffMetadata(saved, cur) {
				if d.Setting == "Steps" {
					fmt.Printf("note: %v: the schedule follows the new length\n", d)
					continue
				}
				refused = append(refused, d.String())
			}
			if len(refused) > 0 {
				return fmt.Errorf("the checkpoint is of another run: %s", strings.Join(refused, "; "))
			}
			return nil
		}
		_, step, err := checkpoint.RestoreLatest(dir, newTrainState(tensor.NewKey(1)), nil,
			checkpoint.CheckMetadata(runSchema, &saved, check))
		var e *checkpoint.Error
		if errors.As(err, &e) {
			fmt.Println("refused step", e.Step, "-", e.Err) // e.Dir names the step directory
			return
		}
		fmt.Println("resumed at step", step)
	}
	resume(RunConfig{Layers: []int{8, 16, 4}, Vocab: "abc€", LR: 0.01, Steps: 500})
	resume(RunConfig{Layers: []int{8, 16, 4}, Vocab: "abcz", LR: 0.01, Steps: 1000})
	// Output:
	// "example-run" v1 [8 16 4] abcz
	// refused step 100 - the checkpoint is of another run: Vocab: saved "abcz", now "abc€"
	// note: Steps: saved 500, now 1000: the schedule follows the new length
	// resumed at step 100
}

// Restore the newest step that is not damaged, naming the steps skipped.
func ExampleSkipCorrupt() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	state := newTrainState(tensor.NewKey(0))
	for _, step := range []int{100, 200} {
		if err := checkpoint.Save(dir, step, state); err != nil {
			fmt.Println(err)
			return
		}
	}
	// Step 200 loses the end of a data file (a disk that filled up, say).
	name := filepath.Join(dir, "00000200", "h0000.bin")
	if fi, err := os.Stat(name); err == nil {
		os.Truncate(name, fi.Size()/2)
	}

	like := newTrainState(tensor.NewKey(1))
	_, _, err := checkpoint.RestoreLatest(dir, like, nil)
	fmt.Println("by default:", errors.Is(err, checkpoint.ErrCorrupt))
	_, step, err := checkpoint.RestoreLatest(dir, like, nil, checkpoint.SkipCorrupt(func(step int, err error) {
		var e *checkpoint.Error
		errors.As(err, &e)
		fmt.Printf("skipped step %d: file %s is corrupt\n", step, e.File)
	}))
	fmt.Println("restored step", step, err)
	// Output:
	// by default: true
	// skipped step 200: file h0000.bin is corrupt
	// restored step 100 <nil>
}
