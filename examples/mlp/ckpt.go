package main

import (
	"fmt"
	"math"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/tensor"
)

// trainState is what -ckpt saves: everything needed to resume training,
// and the curves so far, so that the plot of a resumed run shows every
// epoch with its true number.
type trainState struct {
	Params  nn.MLP
	Opt     optim.State
	Epoch   *tensor.Tensor // int32 scalar: epochs completed
	History savedHistory
}

// savedHistory holds one entry per completed epoch (epoch i+1 at index i).
type savedHistory struct {
	Loss, Train, Test *tensor.Tensor // f32[epochs]
}

func stateOf(tr *parallel.Trainer[nn.MLP, data.Batch], epoch int, h history) trainState {
	return trainState{
		Params: tr.PlacedParams(), Opt: tr.State(), Epoch: tensor.ScalarInt(int32(epoch)),
		History: savedHistory{
			Loss:  tensor.FromFloat64(h.loss, len(h.loss)),
			Train: tensor.FromFloat64(h.train, len(h.train)),
			Test:  tensor.FromFloat64(h.test, len(h.test)),
		},
	}
}

// saveCheckpoint saves the state after the given number of epochs.
func saveCheckpoint(dir string, epoch int, tr *parallel.Trainer[nn.MLP, data.Batch], h history) error {
	return checkpoint.Save(dir, epoch, stateOf(tr, epoch, h), checkpoint.Overwrite())
}

// restoreLatest resumes from the latest step in dir, if any, and returns
// the number of epochs already done and their history.
func restoreLatest(dir string, tr *parallel.Trainer[nn.MLP, data.Batch]) (int, history, error) {
	step, ok, err := checkpoint.LatestStep(dir)
	if err != nil || !ok {
		return 0, history{}, err
	}
	// The history has one entry per epoch done, and the step is that number.
	like := history{}
	for i := range step {
		like.add(i+1, 0, 0, 0)
	}
	st, err := checkpoint.Restore(dir, step, stateOf(tr, 0, like), checkpoint.AsLike())
	if err != nil {
		// A checkpoint written before the curves were saved: resume
		// without them (the plot then starts at the first new epoch, with
		// its true number; the missing epochs are NaN).
		bare := stateOf(tr, 0, like)
		bare.History = savedHistory{}
		var err2 error
		if st, err2 = checkpoint.Restore(dir, step, bare, checkpoint.AsLike()); err2 != nil {
			return 0, history{}, err
		}
	}
	if err := tr.SetState(st.Params, st.Opt); err != nil {
		return 0, history{}, err
	}
	epoch := int(st.Epoch.Item())
	if epoch != step {
		return 0, history{}, fmt.Errorf("checkpoint %s step %d says %d epochs were done", dir, step, epoch)
	}
	var h history
	if st.History.Loss == nil {
		for i := range epoch {
			h.add(i+1, math.NaN(), math.NaN(), math.NaN())
		}
		return epoch, h, nil
	}
	loss, train, test := st.History.Loss.Float64s(), st.History.Train.Float64s(), st.History.Test.Float64s()
	for i := range loss {
		h.add(i+1, loss[i], train[i], test[i])
	}
	return epoch, h, nil
}
