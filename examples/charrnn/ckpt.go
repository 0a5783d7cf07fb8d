package main

import (
	"fmt"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// trainState is what -ckpt saves: everything needed to resume training,
// and the curves so far, so that the plot of a resumed run shows the
// whole history.
type trainState struct {
	Params  Model
	Opt     optim.State
	Step    *tensor.Tensor // int32 scalar: steps completed
	Evals   *tensor.Tensor // int32 scalar: evaluations in History
	History savedHistory
}

// savedHistory holds the evaluations so far, one entry each.
type savedHistory struct {
	Steps            *tensor.Tensor // i32[evals]: the step of each evaluation
	Secs, Train, Val *tensor.Tensor // f32[evals]: training time, training and validation loss
}

// core is the part of a trainState that resumes training (without the
// curves): restored first, since the curves' length is in it.
type core struct {
	Params Model
	Opt    optim.State
	Step   *tensor.Tensor
	Evals  *tensor.Tensor
}

func historyLike(n int) savedHistory {
	return savedHistory{Steps: tensor.Zeros(tensor.Int32, n), Secs: tensor.Zeros(tensor.Float32, n),
		Train: tensor.Zeros(tensor.Float32, n), Val: tensor.Zeros(tensor.Float32, n)}
}

func (h history) saved() savedHistory {
	steps := make([]int32, len(h.step))
	for i, s := range h.step {
		steps[i] = int32(s)
	}
	n := len(steps)
	return savedHistory{Steps: tensor.FromInt32(steps, n), Secs: tensor.FromFloat64(h.secs, n),
		Train: tensor.FromFloat64(h.train, n), Val: tensor.FromFloat64(h.val, n)}
}

// runSchema is the kind and version of the record saved with every step.
var runSchema = checkpoint.Schema{Kind: "gonox examples/charrnn run", Version: 1}

// runRecord is what a checkpoint's tensors do not say about the run that
// saved it, compared on resume: the model, the text and its vocabulary
// and the optimizer must match; the number of steps (the length of the
// learning-rate schedule) and remat (the same gradients, computed another
// way) may change.
type runRecord struct {
	Model struct {
		Context, Embed, Hidden int
	}
	TextName  string // -text's base name, or Opticks: may change (the same text elsewhere)
	Text      string // the text's size and SHA-256
	Vocab     string // its characters, in id order
	Optimizer struct {
		Name   string
		PeakLR float64
		Batch  int
		Seed   uint64
	}
	Steps int  // may change: the schedule decays over the new length
	Remat bool // may change
}

// record returns the run's record.
func record(cfg config, c *corpus) runRecord {
	var r runRecord
	r.Model.Context, r.Model.Embed, r.Model.Hidden = cfg.context, cfg.embed, cfg.hidden
	r.TextName = c.name
	r.Text = fmt.Sprintf("%d characters, sha256 %s", len(c.train)+len(c.val), c.digest)
	r.Vocab = string(c.vocab.Chars())
	r.Optimizer.Name, r.Optimizer.PeakLR, r.Optimizer.Batch, r.Optimizer.Seed = "clip 1, adam", cfg.lr, cfg.batch, cfg.seed
	r.Steps, r.Remat = cfg.steps, cfg.remat
	return r
}

// settings says which differences from the saved record refuse a resume
// from step, and what follows from those allowed (lr: the peak learning
// rate).
func settings(step int, lr float64) map[string]cli.Setting {
	return map[string]cli.Setting{
		"Model.Context": {Flag: "-context"},
		"Model.Embed":   {Flag: "-embed"},
		"Model.Hidden":  {Flag: "-hidden"},
		"TextName":      cli.Unchecked("-text"),
		"Text": {Flag: "-text", Refused: func(d checkpoint.Difference) string {
			return fmt.Sprintf("-text: the checkpoint was trained on another text (%v; this one has %v)", d.Saved, d.Current)
		}},
		"Vocab": {Flag: "-text", Refused: func(d checkpoint.Difference) string {
			return fmt.Sprintf("-text: the vocabulary differs from the checkpoint's (%d characters saved, %d now)", len([]rune(d.Saved.(string))), len([]rune(d.Current.(string))))
		}},
		"Optimizer.Name":   {Flag: "(the optimizer)"},
		"Optimizer.PeakLR": {Flag: "-lr"},
		"Optimizer.Batch":  {Flag: "-batch"},
		"Optimizer.Seed":   {Flag: "-seed"},
		"Steps":            cli.Steps(step, func(n int) optim.Schedule { return schedule(lr, n) }),
		"Remat": {Flag: "-remat", Changed: func(d checkpoint.Difference) string {
			return fmt.Sprintf("(-remat=%v: saved with -remat=%v; the gradients are the same)", d.Current, d.Saved)
		}},
	}
}

// saveCheckpoint saves the state after the given number of steps, with
// the curves so far and the run's record.
func saveCheckpoint(dir string, step int, r *runner, h history) error {
	st := trainState{Params: r.model, Opt: r.state, Step: tensor.ScalarInt(int32(step)), Evals: tensor.ScalarInt(int32(len(h.step))), History: h.saved()}
	return checkpoint.Save(dir, step, st, checkpoint.Overwrite(), checkpoint.WithMetadata(runSchema, r.rec))
}

// resume restores the newest step of -ckpt that restores, if any, after
// comparing its record with this run's, and the curves saved with it.
func (r *runner) resume() error {
	dir := r.cfg.ckpt
	var saved runRecord
	compare := func(info checkpoint.MetadataInfo, saved *runRecord) ([]string, error) {
		return cli.CompareRun(dir, info.Step, checkpoint.DiffMetadata(*saved, r.rec), settings(info.Step, r.cfg.lr))
	}
	like := core{Params: r.model, Opt: r.state, Step: tensor.ScalarInt(0), Evals: tensor.ScalarInt(0)}
	res, ok, err := cli.Restore(dir, like, runSchema, &saved, compare, checkpoint.Partial())
	if err != nil || !ok {
		return err
	}
	st, step := res.State, res.Step
	done, evals := int(st.Step.Item()), int(st.Evals.Item())
	if done != step {
		return fmt.Errorf("checkpoint %s step %d says %d steps were done", dir, step, done)
	}
	r.model, r.state, r.first = st.Params, st.Opt, done
	r.cps.Resumed(done)
	r.notes = append(append(r.notes, fmt.Sprintf("resumed from %s after step %d", dir, done)), res.Notes...)
	h, err := checkpoint.Restore(dir, step, historyLike(evals), checkpoint.OnHost(), checkpoint.Subtree("History"))
	if err != nil {
		// The parameters and optimizer state are intact: train on, with
		// the plot starting after the resume.
		r.notes = append(r.notes, fmt.Sprintf("(the curves saved with step %d do not restore, so the plot starts at step %d: %v)", step, done, err))
		return nil
	}
	steps, secs, train, val := h.Steps.Ints(), h.Secs.Float64s(), h.Train.Float64s(), h.Val.Float64s()
	for i := range steps {
		r.hist.add(steps[i], secs[i], train[i], val[i])
	}
	return nil
}
