package main

import (
	"fmt"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/examples/internal/curves"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// trainState is what -ckpt saves: everything needed to resume training —
// the parameters, the optimizer's state and the model's state (the running
// statistics of batch normalisation) — and the curves so far, so that the
// plot of a resumed run shows every epoch with its true number.
type trainState struct {
	Params  CNN
	Opt     optim.State
	Model   nn.State
	Epoch   *tensor.Tensor // int32 scalar: epochs completed
	History curves.Saved
}

// core is the part of a trainState that resumes training, restored first
// (the curves' length is the epoch it holds).
type core struct {
	Params CNN
	Opt    optim.State
	Model  nn.State
	Epoch  *tensor.Tensor
}

// runSchema is the kind and version of the record saved with every step.
var runSchema = checkpoint.Schema{Kind: "gonox examples/cnn run", Version: 1}

// runRecord is what a checkpoint's tensors do not say about the run that
// saved it, compared on resume: the model, the data and the optimizer
// must match; the number of epochs and the placement may change.
type runRecord struct {
	Model struct {
		Input    [2]int // image height and width
		Channels [2]int // -channels
		Classes  int
		Dtype    string // -dtype
	}
	// DataName is -data (may change: the same files elsewhere); Data
	// identifies the training and test sets by their sizes and a SHA-256
	// of their contents (the split of the digits follows -seed).
	DataName  string
	Data      string
	Optimizer struct {
		Name    string
		LR      float64
		Decay   float64
		Batch   int
		Seed    uint64
		Augment bool
	}
	Epochs    int    // may change: training goes on to the new last epoch
	Placement string // may change: the state is resharded
}

// record returns the run's record.
func record(cfg config, h, w, classes int, ds dataset, placement string) runRecord {
	var r runRecord
	r.Model.Input, r.Model.Channels, r.Model.Classes, r.Model.Dtype = [2]int{h, w}, cfg.channels, classes, cfg.dtype
	r.DataName = ds.name
	r.Data = fmt.Sprintf("%d train / %d test examples, sha256 %s", ds.train.Len(), ds.test.Len(), cli.DataDigest(ds.train, ds.test))
	r.Optimizer.Name, r.Optimizer.LR, r.Optimizer.Batch, r.Optimizer.Seed = "adam", cfg.lr, cfg.batch, cfg.seed
	r.Optimizer.Decay, r.Optimizer.Augment = cfg.decay, cfg.augment
	r.Epochs, r.Placement = cfg.epochs, placement
	return r
}

// settings says which differences from the saved record refuse a
// resume from step (epochs done), and what follows from those allowed.
func settings(step int) map[string]cli.Setting {
	return map[string]cli.Setting{
		"Model.Input": {Flag: "-data", Refused: func(d checkpoint.Difference) string {
			return fmt.Sprintf("-data: the checkpoint's model takes images of %v pixels, this run's data has %v", d.Saved, d.Current)
		}},
		"Model.Channels": {Flag: "-channels"},
		"Model.Classes":  {Flag: "-data"},
		"Model.Dtype":    {Flag: "-dtype"},
		"DataName":       cli.Unchecked("-data"),
		"Data": {Flag: "-data", Refused: func(d checkpoint.Difference) string {
			return fmt.Sprintf("-data: the checkpoint was trained on other data (%v; this run's has %v)", d.Saved, d.Current)
		}},
		"Optimizer.Name":    {Flag: "(the optimizer)"},
		"Optimizer.LR":      {Flag: "-lr"},
		"Optimizer.Decay":   {Flag: "-decay"},
		"Optimizer.Batch":   {Flag: "-batch"},
		"Optimizer.Seed":    {Flag: "-seed"},
		"Optimizer.Augment": {Flag: "-augment"},
		"Epochs": cli.Length("-epochs", "epochs", step, func(was, now int) string {
			return fmt.Sprintf("(-epochs %d: the checkpoint's run was of %d epochs; training goes on to epoch %d)", now, was, now)
		}),
		"Placement": cli.Placement(),
	}
}

func stateOf(tr *trainer, epoch int, h *curves.Epochs) trainState {
	return trainState{
		Params: tr.PlacedParams(), Opt: tr.State(), Model: tr.ModelState(), Epoch: tensor.ScalarInt(int32(epoch)),
		History: h.Saved(),
	}
}

// saveCheckpoint saves the state after the given number of epochs, with
// the run's record.
func saveCheckpoint(dir string, epoch int, tr *trainer, h *curves.Epochs, rec runRecord) error {
	return checkpoint.Save(dir, epoch, stateOf(tr, epoch, h), checkpoint.Overwrite(), checkpoint.WithMetadata(runSchema, rec))
}

// restoreLatest resumes from the newest step in dir that restores, if
// any, after comparing its record with rec, and returns the number of
// epochs already done, their history and notes to print (settings that
// changed, steps skipped).
func restoreLatest(dir string, tr *trainer, rec runRecord) (int, curves.Epochs, []string, error) {
	like := core{Params: tr.PlacedParams(), Opt: tr.State(), Model: tr.ModelState(), Epoch: tensor.ScalarInt(0)}
	var saved runRecord
	compare := func(info checkpoint.MetadataInfo, saved *runRecord) ([]string, error) {
		return cli.CompareRun(dir, info.Step, checkpoint.DiffMetadata(*saved, rec), settings(info.Step))
	}
	r, ok, err := cli.Restore(dir, like, runSchema, &saved, compare, checkpoint.Partial())
	if err != nil || !ok {
		return 0, curves.Epochs{}, nil, err
	}
	st, step := r.State, r.Step
	if err := tr.SetState(st.Params, st.Opt); err != nil {
		return 0, curves.Epochs{}, nil, err
	}
	if err := tr.SetModelState(st.Model); err != nil {
		return 0, curves.Epochs{}, nil, err
	}
	epoch := int(st.Epoch.Item())
	if epoch != step {
		return 0, curves.Epochs{}, nil, fmt.Errorf("checkpoint %s step %d says %d epochs were done", dir, step, epoch)
	}
	sh, err := checkpoint.Restore(dir, step, curves.SavedLike(epoch), checkpoint.OnHost(), checkpoint.Subtree("History"))
	if err != nil {
		return 0, curves.Epochs{}, nil, fmt.Errorf("checkpoint %s step %d: the curves: %w", dir, step, err)
	}
	return epoch, curves.FromSaved(sh), r.Notes, nil
}
