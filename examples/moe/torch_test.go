package main

import (
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/examples/internal/report"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// The PyTorch version of this model (bench/anchors.py, the anchor of
// bench/compare.sh) is checked against this one by their initial loss on
// the same weights and batch:
//
//	GONOX_MOE_EXPORT=/tmp/moe go test ./examples/moe -run TestExportForTorch
//	/usr/bin/python3 bench/anchors.py moe-check /tmp/moe examples/moe/testdata/torch_loss.json
//
// writes the weights of a model drawn from seed 0, the batch and gonox's
// losses; anchors.py loads them into its model, prints both losses and
// writes its own to testdata/torch_loss.json, which TestLossMatchesPyTorch
// compares with gonox's on every run (the weights are drawn again, so
// the file holds only the figures).

// torchCase is one model of the check: flags, batch rows and losses.
type torchCase struct {
	Name   string   `json:"name"`
	Args   []string `json:"args"`
	Starts []int    `json:"starts"`
	// Filled by the export (gonox) and by anchors.py (torch).
	Params int     `json:"params"`
	CE     float64 `json:"ce"`
	Total  float64 `json:"total"`
}

var torchCases = []torchCase{
	{Name: "moe", Args: []string{"-strategy", "single"}},
	{Name: "dense", Args: []string{"-strategy", "single", "-ffn", "dense", "-hidden", "512"}},
}

// initialLoss builds the model of tc from seed 0 and returns it with the
// batch and its cross-entropy and total loss.
func initialLoss(t *testing.T, tc torchCase) (Model, config, *tensor.Tensor, *tensor.Tensor, stats) {
	cfg, err := parseFlags(tc.Args, nil)
	require.NoError(t, err)
	c, err := loadCorpus("")
	require.NoError(t, err)
	model := newModel(tensor.NewKey(0), cfg.model(c.size))
	x, y := windows(c.train, tc.Starts, cfg.context)
	tr, err := build(cfg, model, single)
	require.NoError(t, err)
	tr.mon.reset()
	l, err := tr.tr.Eval(batch{X: x, Y: y})
	require.NoError(t, err)
	return model, cfg, x, y, tr.mon.result(l)
}

func batchStarts() []int {
	s := make([]int, 32)
	for i := range s {
		s[i] = i * 1000
	}
	return s
}

// TestExportForTorch writes the models of torchCases for anchors.py
// moe-check when GONOX_MOE_EXPORT names a directory.
func TestExportForTorch(t *testing.T) {
	dir := os.Getenv("GONOX_MOE_EXPORT")
	if dir == "" {
		t.Skip("GONOX_MOE_EXPORT not set")
	}
	require.NoError(t, os.MkdirAll(dir, 0o755))
	type param struct {
		Name   string `json:"name"`
		Shape  []int  `json:"shape"`
		Offset int    `json:"offset"` // in float32s
	}
	type export struct {
		torchCase
		Vocab, Context, Dim, Layers, Heads, Experts, Hidden, TopK int
		Capacity                                                  float64
		FFN                                                       string
		X, Y                                                      []int32
		Weights                                                   []param
	}
	var all []export
	for _, tc := range torchCases {
		tc.Starts = batchStarts()
		model, cfg, x, y, st := initialLoss(t, tc)
		tc.Params, tc.CE, tc.Total = report.ParamCount(model), st.CE, st.Loss
		e := export{torchCase: tc, Vocab: cfg.model(0).vocab, Context: cfg.context, Dim: cfg.dim, Layers: cfg.layers,
			Heads: cfg.heads, Experts: cfg.experts, Hidden: cfg.hidden, TopK: cfg.topK, Capacity: cfg.capacity, FFN: cfg.ffn,
			X: x.Int32s(), Y: y.Int32s()}
		e.Vocab = model.Embed.W.Dim(0)
		var data []float32
		pytree.MapWithPath(model, func(p pytree.Path, v *tensor.Tensor) *tensor.Tensor {
			e.Weights = append(e.Weights, param{Name: p.String(), Shape: v.Shape(), Offset: len(data)})
			data = append(data, v.Float32s()...)
			return v
		})
		f, err := os.Create(filepath.Join(dir, tc.Name+".bin"))
		require.NoError(t, err)
		require.NoError(t, binary.Write(f, binary.LittleEndian, data))
		require.NoError(t, f.Close())
		all = append(all, e)
	}
	b, err := json.MarshalIndent(all, "", " ")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "manifest.json"), b, 0o644))
}

// TestLossMatchesPyTorch: on the weights drawn from seed 0, the initial
// cross-entropy and total loss (with the MoE's auxiliary losses) are those
// of bench/anchors.py's PyTorch model (testdata/torch_loss.json), and so
// is the parameter count: the anchor of bench/compare.sh is this model.
func TestLossMatchesPyTorch(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "torch_loss.json"))
	require.NoError(t, err)
	var want []torchCase
	require.NoError(t, json.Unmarshal(b, &want))
	require.Len(t, want, len(torchCases))
	for _, w := range want {
		t.Run(w.Name, func(t *testing.T) {
			model, _, _, _, st := initialLoss(t, w)
			require.Equal(t, w.Params, report.ParamCount(model))
			require.InDelta(t, w.CE, st.CE, 2e-5*math.Abs(w.CE))
			require.InDelta(t, w.Total, st.Loss, 2e-5*math.Abs(w.Total))
		})
	}
}
