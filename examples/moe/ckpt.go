package main

import (
	"fmt"
	"io"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// trainState is what -ckpt saves: everything needed to resume training.
// Sharded leaves are written by the devices holding them, so a checkpoint
// saved on one mesh restores on another (or on one device).
type trainState struct {
	Params Model
	Opt    optim.State
	Step   *tensor.Tensor // int32 scalar: steps completed
}

func stateOf(tr *trainer, step int) trainState {
	return trainState{Params: tr.tr.PlacedParams(), Opt: tr.tr.State(), Step: tensor.ScalarInt(int32(step))}
}

// saveCheckpoint saves the state after the given number of steps.
func saveCheckpoint(dir string, step int, tr *trainer) error {
	return checkpoint.Save(dir, step, stateOf(tr, step), checkpoint.Overwrite())
}

// restoreLatest resumes from the latest step in dir, if any, placing the
// state as this run's strategy does, and returns the steps already done.
func restoreLatest(dir string, tr *trainer, out io.Writer) (int, error) {
	step, ok, err := checkpoint.LatestStep(dir)
	if err != nil || !ok {
		return 0, err
	}
	st, err := checkpoint.Restore(dir, step, stateOf(tr, 0), checkpoint.AsLike())
	if err != nil {
		return 0, err
	}
	if err := tr.tr.SetState(st.Params, st.Opt); err != nil {
		return 0, err
	}
	done := int(st.Step.Item())
	fmt.Fprintf(out, "resumed from %s after step %d\n", dir, done)
	return done, nil
}
