package main

import (
	"bytes"
	"image/png"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot/plotter"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/examples/internal/clitest"
	"github.com/gonox/gonox/examples/internal/curves"
	"github.com/gonox/gonox/examples/internal/plots"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-hidden", "32, 16", "-batch", "8", "-strategy", "fsdp"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{32, 16}, cfg.hidden)
	assert.Equal(t, 8, cfg.batch)
}

// Every usage mistake names its flag, prints nothing on stdout and exits
// with status 2.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"-hidden", "32,x"}, want: `-hidden "32,x": "x" is not an integer from 1 to 65536`},
		{args: []string{"-hidden", "0"}, want: `-hidden "0": "0" is not an integer from 1 to 65536`},
		{args: []string{"-hidden", "12,,3"}, want: `-hidden "12,,3": size 2 is empty`},
		{args: []string{"-hidden", "32,"}, want: `-hidden "32,": size 2 is empty`},
		{args: []string{"-batch", "0"}, want: "-batch 0: want an integer from 1 to 65536"},
		{args: []string{"-epochs", "-1"}, want: "-epochs -1: want an integer from 0 to 100000"},
		{args: []string{"-lr", "-1"}, want: "-lr -1: want a finite number in (0, 1]"},
		{args: []string{"-lr", "NaN"}, want: "-lr NaN: want a finite number in (0, 1]"},
		{args: []string{"extra"}, want: `unexpected arguments ["extra"]`},
		{args: []string{"-strategy", "bogus"}, want: `-strategy: parallel: unknown strategy "bogus"`},
		{args: []string{"-mesh", "dp=8"}, want: `-mesh "dp=8": -strategy single trains on one device`},
		{args: []string{"-strategy", "fsdp_tp", "-mesh", "dp=8"}, want: `strategy fsdp_tp needs a mesh axis "tp"`},
		{args: []string{"-strategy", "tp", "-mesh", "dp=4,tp=2", "-hidden", "3"}, want: `does not split over the 2 devices`},
		{args: []string{"-strategy", "dp", "-mesh", "dp=nope"}, want: `-mesh "dp=nope": `},
		{args: []string{"-strategy", "dp", "-mesh", "dp=3", "-batch", "64"}, want: "-batch 64 is not divisible by the 3 devices"},
		{args: []string{"-strategy", "dp", "-mesh", "dp=4294967296,tp=4294967296"}, want: `-mesh "dp=4294967296,tp=4294967296": `},
		{args: []string{"-strategy", "dp", "-mesh", "dp=16"}, want: `-mesh "dp=16": `},
		{args: []string{"-strategy", "dp"}, env: "0", want: `GONOX_DEVICES="0": want a positive integer`},
		{args: []string{"-strategy", "dp"}, env: "-1", want: `GONOX_DEVICES="-1": want a positive integer`},
		{args: []string{}, env: "abc", want: `GONOX_DEVICES="abc": want a positive integer`},
		{args: []string{"-strategy", "compare"}, env: "abc", want: `GONOX_DEVICES="abc": want a positive integer`},
		{args: []string{"-strategy", "compare"}, env: "3", want: "dp: -batch 64 is not divisible by the 3 devices"},
		{args: []string{"-strategy", "compare"}, env: "1", want: `tp: the default mesh "dp=1,tp=2" of strategy tp: `},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(shard.DevicesEnv, tc.env)
			}
			clitest.Fails(t, mainExit, 2, append([]string{"-quiet", "-plot", "", "-epochs", "1"}, tc.args...), tc.want)
		})
	}
}

// Failures of the outside world exit with status 1; an unwritable -ckpt
// is found before any training.
func TestRuntimeErrors(t *testing.T) {
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{args: []string{"-data", "/no/such/dir"}, want: "/no/such/dir"},
		{args: []string{"-ckpt", filepath.Join(file, "ckpt")}, want: "-ckpt " + filepath.Join(file, "ckpt")},
	} {
		clitest.Fails(t, mainExit, 1, append([]string{"-quiet", "-plot", "", "-epochs", "3"}, tc.args...), tc.want)
	}
}

func TestRunPrintsEpochsAndPlots(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "c.png")
	var out bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-epochs", "2", "-quiet", "-plot", plot}, &out, io.Discard))
	line := regexp.MustCompile(`(?m)^epoch   2/2  loss [0-9.]+  train [ 0-9.]+%  test [ 0-9.]+%  +[0-9]+ samples/s`)
	assert.Regexp(t, line, out.String())
	assert.Contains(t, out.String(), "curves written to")
	f, err := os.Open(plot)
	require.NoError(t, err)
	defer f.Close()
	_, err = png.Decode(f)
	require.NoError(t, err)
}

func TestStrategiesTrain(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four strategies")
	}
	for _, s := range []string{"dp", "fsdp", "tp", "fsdp_tp"} {
		// bf16: mixed precision under every strategy (sharded parameters
		// cast to bf16 used to panic in the first matmul).
		for _, dt := range []string{"f32", "bf16"} {
			var out bytes.Buffer
			require.Equal(t, 0, mainExit([]string{"-epochs", "1", "-quiet", "-plot", "", "-strategy", s, "-dtype", dt}, &out, io.Discard), s+" "+dt)
			assert.Regexp(t, `strategy `+s+` on`, out.String())
			assert.Regexp(t, `(?m)^epoch   1/1  loss`, out.String())
		}
	}
}

// Every strategy of the comparison table starts from the single device's
// loss.
func TestCompare(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-strategy", "compare"}, &out, io.Discard))
	for _, s := range []string{"single", "dp", "fsdp", "tp", "fsdp_tp"} {
		// Every strategy starts from the same loss as one device.
		assert.Regexp(t, `(?m)^ +`+s+` +[-a-z=0-9,]+  2\.309555 `, out.String())
	}
}

// A resumed run keeps the loss history in the checkpoint: its plot shows
// every epoch with its true number.
func TestResumeKeepsHistory(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	var first bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-epochs", "2", "-quiet", "-plot", "", "-ckpt", ckpt, "-hidden", "16"}, &first, io.Discard))
	var second bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-epochs", "3", "-quiet", "-plot", "", "-ckpt", ckpt, "-hidden", "16"}, &second, io.Discard))
	assert.Contains(t, second.String(), "resumed from "+ckpt+" after epoch 2")
	assert.NotContains(t, second.String(), "epoch   1/3")
	assert.Contains(t, second.String(), "epoch   3/3")

	// The restored history is the first run's, and the new epoch follows.
	tr, err := newTrainer(newModel(tensor.NewKey(0), []int{64, 16, 10}), parallel.Single, nil, 1e-3)
	require.NoError(t, err)
	n, h, _, err := restoreLatest(ckpt, tr, recordOf(t, "-epochs", "3", "-hidden", "16"))
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []int{1, 2, 3}, h.Epoch)
	losses := regexp.MustCompile(`(?m)^epoch +\d/\d  loss ([0-9.]+)`).FindAllStringSubmatch(first.String()+second.String(), -1)
	require.Len(t, losses, 3)
	for i, m := range losses {
		want, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		assert.InDelta(t, want, h.Loss[i], 1e-4, "epoch %d", i+1)
	}
	assert.Equal(t, []float64{1, 2, 3}, xs(h.Points(h.Loss)))
}

// A checkpoint saved under one strategy resumes under another: the state
// is resharded onto the new placement.
func TestResumeAcrossStrategies(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	args := []string{"-quiet", "-plot", "", "-ckpt", ckpt, "-hidden", "16"}
	for i, s := range []string{"dp", "fsdp_tp", "fsdp", "single"} {
		var out bytes.Buffer
		epochs := strconv.Itoa(i + 1)
		require.Equal(t, 0, mainExit(append(args, "-strategy", s, "-epochs", epochs), &out, io.Discard), s)
		assert.Contains(t, out.String(), "epoch   "+epochs+"/"+epochs, s)
		if i > 0 {
			assert.Contains(t, out.String(), "resumed from "+ckpt+" after epoch "+strconv.Itoa(i), s)
		}
	}
}

// A checkpoint written before the curves were saved still resumes.
func TestResumeOldCheckpoint(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	tr, err := newTrainer(newModel(tensor.NewKey(0), []int{64, 16, 10}), parallel.Single, nil, 1e-3)
	require.NoError(t, err)
	old := struct {
		Params nn.MLP
		Opt    optim.State
		Epoch  *tensor.Tensor
	}{tr.PlacedParams(), tr.State(), tensor.ScalarInt(2)}
	require.NoError(t, checkpoint.Save(ckpt, 2, old))
	var out bytes.Buffer
	plot := filepath.Join(t.TempDir(), "c.png")
	require.Equal(t, 0, mainExit([]string{"-epochs", "3", "-quiet", "-plot", plot, "-ckpt", ckpt, "-hidden", "16"}, &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+ckpt+" after epoch 2")
	assert.Contains(t, out.String(), "epoch   3/3")
	assert.FileExists(t, plot)
	n, h, _, err := restoreLatest(ckpt, tr, recordOf(t, "-epochs", "3", "-hidden", "16"))
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []int{1, 2, 3}, h.Epoch)
	assert.Equal(t, []float64{3}, xs(h.Points(h.Loss)), "the curves start at the first new epoch")
	assert.True(t, math.IsNaN(h.Loss[0]))
}

// recordOf is the record of a run on one device with the given flags.
func recordOf(t *testing.T, args ...string) runRecord {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	train, test, err := loadData(cfg.data, tensor.NewKey(cfg.seed).Split(3)[0])
	require.NoError(t, err)
	sizes := append(append([]int{train.X.Dim(1)}, cfg.hidden...), 10)
	return record(cfg, sizes, train, test, "single on one device")
}

func xs(p plotter.XYs) []float64 {
	var out []float64
	for _, q := range p {
		out = append(out, q.X)
	}
	return out
}

func TestLegendAvoidsCurves(t *testing.T) {
	rising := plotter.XYs{{X: 1, Y: 0.2}, {X: 2, Y: 0.7}, {X: 3, Y: 0.85}, {X: 4, Y: 0.9}, {X: 5, Y: 0.95}}
	top, left := plots.EmptiestCorner([]plotter.XYs{rising}, 1, 5, 0, 1)
	assert.False(t, top, "rising accuracy leaves the bottom right empty")
	assert.False(t, left)
	falling := plotter.XYs{{X: 1, Y: 0.9}, {X: 2, Y: 0.8}, {X: 3, Y: 0.3}, {X: 4, Y: 0.2}, {X: 5, Y: 0.1}}
	top, left = plots.EmptiestCorner([]plotter.XYs{falling}, 1, 5, 0, 1)
	assert.True(t, top, "a falling curve leaves the top right empty")
	assert.False(t, left)

	var h curves.Epochs
	for i, a := range []float64{0.5, 0.8, 0.9} {
		h.Add(i+1, 1/float64(i+1), a, a-0.05)
	}
	ap, err := h.AccuracyPlot(0)
	require.NoError(t, err)
	assert.False(t, ap.Legend.Top)
	assert.False(t, ap.Legend.Left)
}

// A checkpoint resumes only the run that saved it: another model, data
// or optimizer is a usage error naming the flag and both values; the
// number of epochs and the placement may change, with a note.
func TestResumeChecksTheRecord(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	base := []string{"-quiet", "-plot", "", "-ckpt", ckpt, "-hidden", "16", "-epochs", "1"}
	require.Equal(t, 0, mainExit(base, io.Discard, io.Discard))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-hidden", "32"}, "-hidden: the checkpoint's model has the layers [64 16 10], this run's [64 32 10]"},
		{[]string{"-lr", "0.01"}, "-lr: the checkpoint was saved with 0.003, this run has 0.01"},
		{[]string{"-batch", "32"}, "-batch: the checkpoint was saved with 64, this run has 32"},
		{[]string{"-dtype", "bf16"}, "-dtype: the checkpoint was saved with f32, this run has bf16"},
		{[]string{"-seed", "7"}, "-seed: the checkpoint was saved with 0, this run has 7"},
		{[]string{"-seed", "7"}, "-data: the checkpoint was trained on other data (1438 train / 359 test examples, sha256 "},
	} {
		clitest.Fails(t, mainExit, 2, append(slices.Clone(base), tc.args...), "mlp: -ckpt "+ckpt+" holds step 1 of another run: ", tc.msg)
	}
	var out bytes.Buffer
	require.Equal(t, 0, mainExit(append(slices.Clone(base), "-epochs", "2", "-strategy", "dp"), &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+ckpt+" after epoch 1\n")
	assert.Contains(t, out.String(), "(-epochs 2: the checkpoint's run was of 1 epochs; training goes on to epoch 2)")
	assert.Contains(t, out.String(), "(saved under single on one device; the state is resharded for dp on Mesh('dp': 8))")
	assert.Contains(t, out.String(), "epoch   2/2")
}

// A damaged newest step is skipped, naming it; training resumes from the
// step before.
func TestResumeSkipsDamagedStep(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	args := []string{"-quiet", "-plot", "", "-ckpt", ckpt, "-hidden", "16", "-epochs", "2"}
	require.Equal(t, 0, mainExit(args, io.Discard, io.Discard))
	require.NoError(t, os.Truncate(filepath.Join(ckpt, "00000002", "manifest.json"), 10))
	var out bytes.Buffer
	require.Equal(t, 0, mainExit(append(args, "-epochs", "3"), &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+ckpt+" after epoch 1\n")
	assert.Contains(t, out.String(), "(step 2 in "+ckpt+" does not restore, so an earlier step is used: checkpoint: restore step 2")
	assert.Contains(t, out.String(), "epoch   2/3")
	assert.Contains(t, out.String(), "epoch   3/3")
}

func TestHelp(t *testing.T) { clitest.Help(t, mainExit) }
