package main

import (
	"fmt"
	"io"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/tensor"
)

// trainState is what -ckpt saves: everything needed to resume training.
type trainState struct {
	Params nn.MLP
	Opt    optim.State
	Epoch  *tensor.Tensor // int32 scalar: epochs completed
}

func stateOf(tr *parallel.Trainer, epoch int) trainState {
	return trainState{Params: tr.PlacedParams(), Opt: tr.State(), Epoch: tensor.ScalarInt(int32(epoch))}
}

// saveCheckpoint saves the state after the given number of epochs.
func saveCheckpoint(dir string, epoch int, tr *parallel.Trainer) error {
	return checkpoint.Save(dir, epoch, stateOf(tr, epoch), checkpoint.Overwrite())
}

// restoreLatest resumes from the latest step in dir, if any, and returns
// the number of epochs already done.
func restoreLatest(dir string, tr *parallel.Trainer, out io.Writer) (int, error) {
	step, ok, err := checkpoint.LatestStep(dir)
	if err != nil || !ok {
		return 0, err
	}
	st, err := checkpoint.Restore(dir, step, stateOf(tr, 0), checkpoint.AsLike())
	if err != nil {
		return 0, err
	}
	tr.SetState(st.Params, st.Opt)
	epoch := int(st.Epoch.Item())
	fmt.Fprintf(out, "resumed from %s after epoch %d\n", dir, epoch)
	return epoch, nil
}
