package main

import (
	"fmt"
	"strings"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/examples/internal/cli"
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

// runSchema is the kind and version of the record saved with every step.
var runSchema = checkpoint.Schema{Kind: "gonox examples/moe run", Version: 1}

// runRecord is what a checkpoint's tensors do not say about the run that
// saved it, compared on resume: the model, the text and its vocabulary
// and the optimizer must match; the number of steps (the length of the
// learning-rate schedule) and the placement may change.
type runRecord struct {
	Model struct {
		Context, Dim, Layers, Heads, Experts, Hidden, TopK int
		Capacity                                           float64
		FFN                                                string
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
	Steps     int    // may change: the schedule decays over the new length
	Placement string // may change: the state is resharded
}

// record returns the run's record.
func record(cfg config, c *corpus, placement string) runRecord {
	var r runRecord
	r.Model.Context, r.Model.Dim, r.Model.Layers, r.Model.Heads = cfg.context, cfg.dim, cfg.layers, cfg.heads
	r.Model.Experts, r.Model.Hidden, r.Model.TopK, r.Model.Capacity = cfg.experts, cfg.hidden, cfg.topK, cfg.capacity
	r.Model.FFN = cfg.ffn
	r.TextName = c.name
	r.Text, r.Vocab = c.identity()
	r.Optimizer.Name, r.Optimizer.PeakLR, r.Optimizer.Batch, r.Optimizer.Seed = "adam", cfg.lr, cfg.batch, cfg.seed
	r.Steps, r.Placement = cfg.steps, placement
	return r
}

// settings says which differences from the saved record refuse a resume
// from step, and what follows from those allowed (lr: the peak learning
// rate).
func settings(step int, lr float64) map[string]cli.Setting {
	return map[string]cli.Setting{
		"Model.Context":  {Flag: "-context"},
		"Model.Dim":      {Flag: "-dim"},
		"Model.Layers":   {Flag: "-layers"},
		"Model.Heads":    {Flag: "-heads"},
		"Model.Experts":  {Flag: "-experts"},
		"Model.Hidden":   {Flag: "-hidden"},
		"Model.TopK":     {Flag: "-topk"},
		"Model.Capacity": {Flag: "-capacity"},
		"Model.FFN":      {Flag: "-ffn"},
		"TextName":       cli.Unchecked("-text"),
		"Text": {Flag: "-text", Refused: func(d checkpoint.Difference) string {
			return fmt.Sprintf("-text: the checkpoint was trained on another text (%v; this one has %v)", d.Saved, d.Current)
		}},
		"Vocab": {Flag: "-text", Refused: func(d checkpoint.Difference) string {
			return "-text: the vocabulary differs from the checkpoint's: " + vocabDiff(d.Saved.(string), d.Current.(string))
		}},
		"Optimizer.Name":   {Flag: "(the optimizer)"},
		"Optimizer.PeakLR": {Flag: "-lr"},
		"Optimizer.Batch":  {Flag: "-batch"},
		"Optimizer.Seed":   {Flag: "-seed"},
		"Steps":            cli.Steps(step, func(n int) optim.Schedule { return schedule(lr, n) }),
		"Placement":        cli.Placement(),
	}
}

// vocabDiff names the characters one vocabulary has and the other lacks.
func vocabDiff(saved, now string) string {
	if described(saved) || described(now) {
		return fmt.Sprintf("%s in the checkpoint, %s now", saved, now)
	}
	missing, extra := only(saved, now), only(now, saved)
	var parts []string
	if missing != "" {
		parts = append(parts, fmt.Sprintf("this text lacks %s", missing))
	}
	if extra != "" {
		parts = append(parts, fmt.Sprintf("it has %s, which the checkpoint's does not", extra))
	}
	if len(parts) == 0 {
		return "the same characters in another order"
	}
	return strings.Join(parts, ", and ")
}

// described reports whether a recorded vocabulary is a description (of a
// BPE or a token file's ids) rather than the characters of a text.
func described(vocab string) bool {
	return strings.HasPrefix(vocab, "byte-level BPE") || strings.HasPrefix(vocab, "token ids")
}

// only quotes the characters of a that b lacks (at most 10 of them).
func only(a, b string) string {
	var q []string
	for _, r := range a {
		if !strings.ContainsRune(b, r) {
			q = append(q, fmt.Sprintf("%q", r))
		}
	}
	if len(q) > 10 {
		q = append(q[:10], fmt.Sprintf("and %d more", len(q)-10))
	}
	return strings.Join(q, " ")
}

// saveCheckpoint saves the state after the given number of steps, with
// the curves so far and the run's record.
func saveCheckpoint(dir string, step int, tr *trainer, h history, rec runRecord) error {
	c := coreOf(tr, step, len(h.step))
	st := trainState{Params: c.Params, Opt: c.Opt, Step: c.Step, Evals: c.Evals, History: h.saved()}
	return checkpoint.Save(dir, step, st, checkpoint.Overwrite(), checkpoint.WithMetadata(runSchema, rec))
}

// resume restores the newest step of -ckpt that restores, if any, after
// comparing its record with this run's, placing the state as this run's
// strategy does, and the curves saved with it.
func (r *runner) resume() error {
	dir := r.cfg.ckpt
	var saved runRecord
	compare := func(info checkpoint.MetadataInfo, saved *runRecord) ([]string, error) {
		return cli.CompareRun(dir, info.Step, checkpoint.DiffMetadata(*saved, r.rec), settings(info.Step, r.cfg.lr))
	}
	res, ok, err := cli.Restore(dir, coreOf(r.tr, 0, 0), runSchema, &saved, compare, checkpoint.Partial())
	if err != nil || !ok {
		return err
	}
	st, step := res.State, res.Step
	if err := r.tr.tr.SetState(st.Params, st.Opt); err != nil {
		return err
	}
	done, evals := int(st.Step.Item()), int(st.Evals.Item())
	if done != step {
		return fmt.Errorf("checkpoint %s step %d says %d steps were done", dir, step, done)
	}
	r.first = done
	r.cps.Resumed(done)
	r.notes = append(append(r.notes, fmt.Sprintf("resumed from %s after step %d", dir, done)), res.Notes...)
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
