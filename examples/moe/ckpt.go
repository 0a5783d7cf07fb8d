package main

import (
	"fmt"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// trainState is what -ckpt saves: everything needed to resume training,
// and the curves so far, so that the plot of a resumed run shows the
// whole history. Sharded leaves are written by the devices holding them,
// so a checkpoint saved on one mesh restores on another (or on one
// device).
type trainState struct {
	Params  Model
	Opt     optim.State
	Step    *tensor.Tensor // int32 scalar: steps completed
	Evals   *tensor.Tensor // int32 scalar: evaluations in History
	History savedHistory
}

// savedHistory holds the evaluations so far, one row each.
type savedHistory struct {
	Steps      *tensor.Tensor // i32[evals]: the step of each evaluation
	Train, Val *tensor.Tensor // f32[evals]: training and validation loss
	Load       *tensor.Tensor // f32[evals, layers·experts]: each expert's share of its layer's choices
}

// core is the part of a trainState that resumes training (without the
// curves): restored first, since the curves' length is in it.
type core struct {
	Params Model
	Opt    optim.State
	Step   *tensor.Tensor
	Evals  *tensor.Tensor
}

func coreOf(tr *trainer, step, evals int) core {
	return core{Params: tr.tr.PlacedParams(), Opt: tr.tr.State(), Step: tensor.ScalarInt(int32(step)), Evals: tensor.ScalarInt(int32(evals))}
}

// historyLike is a savedHistory of n evaluations of a model with the given
// number of (layer, expert) rows, for restoring.
func historyLike(n, rows int) savedHistory {
	return savedHistory{
		Steps: tensor.Zeros(tensor.Int32, n), Train: tensor.Zeros(tensor.Float32, n), Val: tensor.Zeros(tensor.Float32, n),
		Load: tensor.Zeros(tensor.Float32, n, rows),
	}
}

func (h history) saved() savedHistory {
	steps := make([]int32, len(h.step))
	for i, s := range h.step {
		steps[i] = int32(s)
	}
	rows := h.experts
	if len(h.load) > 0 {
		rows = len(h.load[0])
	}
	load := make([]float64, 0, len(h.load)*rows)
	for _, l := range h.load {
		load = append(load, l...)
	}
	return savedHistory{
		Steps: tensor.FromInt32(steps, len(steps)),
		Train: tensor.FromFloat64(h.train, len(h.train)), Val: tensor.FromFloat64(h.val, len(h.val)),
		Load: tensor.FromFloat64(load, len(h.load), rows),
	}
}

// saveCheckpoint saves the state after the given number of steps, with the
// curves so far.
func saveCheckpoint(dir string, step int, tr *trainer, h history) error {
	c := coreOf(tr, step, len(h.step))
	st := trainState{Params: c.Params, Opt: c.Opt, Step: c.Step, Evals: c.Evals, History: h.saved()}
	return checkpoint.Save(dir, step, st, checkpoint.Overwrite())
}

// resume restores the latest step of -ckpt, if any, placing the state as
// this run's strategy does, and the curves saved with it.
func (r *runner) resume() error {
	dir := r.cfg.ckpt
	if _, ok, err := checkpoint.LatestStep(dir); err != nil || !ok {
		return err
	}
	st, step, err := checkpoint.RestoreLatest(dir, coreOf(r.tr, 0, 0), checkpoint.AsLike(), checkpoint.Partial())
	if err != nil {
		return err
	}
	if err := r.tr.tr.SetState(st.Params, st.Opt); err != nil {
		return err
	}
	done, evals := int(st.Step.Item()), int(st.Evals.Item())
	if done != step {
		return fmt.Errorf("checkpoint %s step %d says %d steps were done", dir, step, done)
	}
	r.first = done
	r.cps.Resumed(done)
	r.notes = append(r.notes, fmt.Sprintf("resumed from %s after step %d", dir, done))
	rows := r.cfg.layers * r.cfg.experts
	h, err := checkpoint.Restore(dir, step, historyLike(evals, rows), checkpoint.OnHost(), checkpoint.Subtree("History"))
	if err != nil {
		// The parameters and optimizer state are intact: train on, with
		// the plot starting after the resume.
		r.notes = append(r.notes, fmt.Sprintf("(the curves saved with step %d do not restore, so the plot starts at step %d: %v)", step, done, err))
		return nil
	}
	steps, train, val, load := h.Steps.Ints(), h.Train.Float64s(), h.Val.Float64s(), h.Load.Float64s()
	for i := range steps {
		r.hist.add(steps[i], train[i], val[i], load[i*rows:(i+1)*rows])
	}
	return nil
}
