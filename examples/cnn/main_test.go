package main

import (
	"bytes"
	"image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/plot"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/examples/internal/clitest"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The tests train on the embedded digits (-data digits): seconds, and no
// dataset to install.

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-channels", "8, 16", "-batch", "8", "-strategy", "fsdp"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, [2]int{8, 16}, cfg.channels)
	assert.Equal(t, 8, cfg.batch)
	assert.False(t, cfg.dataExplicit)
	cfg, err = parseFlags([]string{"-data", "fashion-mnist"}, io.Discard)
	require.NoError(t, err)
	assert.True(t, cfg.dataExplicit, "an explicit -data does not fall back to the digits")
}

// Every usage mistake names its flag, prints nothing on stdout and exits
// with status 2.
func TestUsageErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		env  string
		want string
	}{
		{args: []string{"-channels", "8"}, want: `-channels "8": want two sizes, as in 32,64`},
		{args: []string{"-channels", "8,x"}, want: `-channels "8,x": "x" is not an integer from 1 to 4096`},
		{args: []string{"-channels", "0,8"}, want: `-channels "0,8": "0" is not an integer from 1 to 4096`},
		{args: []string{"-batch", "0"}, want: "-batch 0: want an integer from 1 to 65536"},
		{args: []string{"-epochs", "-1"}, want: "-epochs -1: want an integer from 0 to 100000"},
		{args: []string{"-lr", "-1"}, want: "-lr -1: want a finite number in (0, 1]"},
		{args: []string{"-decay", "0"}, want: "-decay 0: want a finite number in (0, 1]"},
		{args: []string{"-decay", "1.5"}, want: "-decay 1.5: want a finite number in (0, 1]"},
		{args: []string{"-dtype", "f8"}, want: "-dtype: "},
		{args: []string{"extra"}, want: `unexpected arguments ["extra"]`},
		{args: []string{"-strategy", "bogus"}, want: `-strategy: parallel: unknown strategy "bogus"`},
		{args: []string{"-mesh", "dp=8"}, want: `-mesh "dp=8": -strategy single trains on one device`},
		{args: []string{"-strategy", "fsdp_tp", "-mesh", "dp=8"}, want: `strategy fsdp_tp needs a mesh axis "tp"`},
		{args: []string{"-strategy", "tp", "-mesh", "dp=4,tp=2", "-channels", "5,8"}, want: `-channels 5,8: strategy tp splits the first convolution's 5 channels over the 2 devices of axis "tp"`},
		{args: []string{"-strategy", "dp", "-mesh", "dp=3", "-batch", "64"}, want: "-batch 64 is not divisible by the 3 devices"},
		{args: []string{"-strategy", "dp", "-mesh", "dp=16"}, want: `-mesh "dp=16": `},
		{args: []string{"-strategy", "dp"}, env: "0", want: `GONOX_DEVICES="0": want a positive integer`},
		{args: []string{"-strategy", "compare"}, env: "3", want: "dp: -batch 128 is not divisible by the 3 devices"},
		{args: []string{"-strategy", "compare", "-channels", "5,8"}, want: "tp: -channels 5,8: strategy tp splits"},
	} {
		t.Run(strings.Join(tc.args, " ")+" "+tc.env, func(t *testing.T) {
			if tc.env != "" {
				t.Setenv(shard.DevicesEnv, tc.env)
			}
			clitest.Fails(t, mainExit, 2, append([]string{"-quiet", "-plot", "", "-epochs", "1", "-data", "digits"}, tc.args...), tc.want)
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
		{args: []string{"-data", "digits", "-ckpt", filepath.Join(file, "ckpt")}, want: "-ckpt " + filepath.Join(file, "ckpt")},
	} {
		clitest.Fails(t, mainExit, 1, append([]string{"-quiet", "-plot", "", "-epochs", "3"}, tc.args...), tc.want)
	}
}

// Without Fashion-MNIST installed the default run trains on the digits,
// saying so in one line; asked for explicitly, its absence is an error.
func TestFallbackToDigits(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "fashion-mnist")
	ds, note, err := loadData("fashion-mnist", false, missing, tensor.NewKey(0))
	require.NoError(t, err)
	assert.Equal(t, "digits", ds.name)
	assert.Equal(t, []int{1438, 8, 8, 1}, ds.train.X.Shape())
	assert.Equal(t, []int{359}, ds.test.Y.Shape())
	assert.Contains(t, note, "Fashion-MNIST is not installed in "+missing)
	assert.NotContains(t, note, "\n")

	_, _, err = loadData("fashion-mnist", true, missing, tensor.NewKey(0))
	require.Error(t, err)
	assert.Contains(t, err.Error(), "apt-get install dataset-fashion-mnist")
}

// The model maps images f32[N,H,W,1] to logits, and its state to a new
// one in training (not in inference).
func TestModelShapes(t *testing.T) {
	m, s := nn.MakeWithState(newCNN(tensor.NewKey(1), 28, 28, [2]int{4, 6}, 10))
	x := tensor.Uniform(tensor.NewKey(2), 3, 28, 28, 1)
	logits, s2 := m.Forward(x, s)
	assert.Equal(t, []int{3, 10}, logits.Shape())
	assert.Equal(t, 6*7*7, m.Head.W.Dim(0))
	assert.NotEqual(t, s.Values, s2.Values, "training updates the running statistics")
	_, s3 := nn.InferenceMode(m, true).Forward(x, s)
	for k, v := range s.Values {
		for i := range v {
			assert.Equal(t, v[i].Float32s(), s3.Values[k][i].Float32s(), "inference leaves the state")
		}
	}
}

func TestRunPrintsEpochsAndPlots(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "c.png")
	var out bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-data", "digits", "-epochs", "2", "-quiet", "-plot", plot}, &out, io.Discard))
	line := regexp.MustCompile(`(?m)^epoch   2/2  loss [0-9.]+  train [ 0-9.]+%  test [ 0-9.]+%  +[0-9]+ images/s`)
	assert.Regexp(t, line, out.String())
	assert.Contains(t, out.String(), "written to "+plot)
	f, err := os.Open(plot)
	require.NoError(t, err)
	defer f.Close()
	img, err := png.Decode(f)
	require.NoError(t, err)
	assert.Greater(t, img.Bounds().Dx(), 1000)
}

// A default run trains well on the digits in a few epochs: the model,
// the loss and the decay of the learning rate work together.
func TestLearns(t *testing.T) {
	if testing.Short() {
		t.Skip("trains 4 epochs")
	}
	var out bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-data", "digits", "-epochs", "4", "-quiet", "-plot", ""}, &out, io.Discard))
	acc := testAccuracies(t, out.String())
	require.Len(t, acc, 4)
	assert.Greater(t, acc[3], 90.0, out.String())
}

func TestStrategiesTrain(t *testing.T) {
	if testing.Short() {
		t.Skip("trains four strategies")
	}
	for _, s := range []string{"dp", "fsdp", "tp", "fsdp_tp"} {
		for _, dt := range []string{"f32", "bf16"} {
			var out bytes.Buffer
			require.Equal(t, 0, mainExit([]string{"-data", "digits", "-epochs", "1", "-quiet", "-plot", "", "-strategy", s, "-dtype", dt, "-channels", "8,8"}, &out, io.Discard), s+" "+dt)
			assert.Regexp(t, `strategy `+s+` on`, out.String())
			assert.Regexp(t, `(?m)^epoch   1/1  loss`, out.String())
		}
	}
}

// Every strategy starts from the loss of one device, and its gradients
// equal one device's within 1e-5.
func TestCompare(t *testing.T) {
	var out bytes.Buffer
	require.Equal(t, 0, mainExit([]string{"-data", "digits", "-strategy", "compare", "-channels", "8,16", "-batch", "64"}, &out, io.Discard))
	row := regexp.MustCompile(`(?m)^ +(\w+) +[-a-z=0-9,]+ +([0-9.]+) +([0-9.e+-]+) `)
	rows := row.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, rows, 5, out.String())
	for i, r := range rows {
		assert.Equal(t, []string{"single", "dp", "fsdp", "tp", "fsdp_tp"}[i], r[1])
		assert.Equal(t, rows[0][2], r[2], "%s: the loss of one device", r[1])
		d, err := strconv.ParseFloat(r[3], 64)
		require.NoError(t, err)
		assert.LessOrEqual(t, d, 1e-5, "%s: max |Δgrad|", r[1])
	}
}

// A resumed run continues exactly where the first stopped: its epochs
// print what an uninterrupted run prints. The test accuracy uses the
// running statistics of batch normalisation, so it shows that the
// checkpoint keeps the model's state as well as the parameters.
func TestResumeEqualsUninterrupted(t *testing.T) {
	dir := t.TempDir()
	ckpt := filepath.Join(dir, "ckpt")
	args := []string{"-data", "digits", "-quiet", "-plot", "", "-channels", "8,16"}
	var whole, first, second bytes.Buffer
	require.Equal(t, 0, mainExit(append(slices.Clone(args), "-epochs", "3"), &whole, io.Discard))
	require.Equal(t, 0, mainExit(append(slices.Clone(args), "-epochs", "2", "-ckpt", ckpt), &first, io.Discard))
	require.Equal(t, 0, mainExit(append(slices.Clone(args), "-epochs", "3", "-ckpt", ckpt), &second, io.Discard))
	assert.Contains(t, second.String(), "resumed from "+ckpt+" after epoch 2")
	assert.NotContains(t, second.String(), "epoch   1/3")
	assert.Equal(t, epochLines(whole.String())[2], epochLines(second.String())[0])

	// The checkpoint holds the running statistics, moved from their start.
	m, s := nn.MakeWithState(newCNN(tensor.NewKey(0), 8, 8, [2]int{8, 16}, 10))
	got, err := checkpoint.Restore(ckpt, 3, s, nil, checkpoint.Subtree("Model"))
	require.NoError(t, err)
	mean := got.Get(m.Norm1.Index)[0].Float32s()
	assert.NotEqual(t, make([]float32, len(mean)), mean)

	// And the curves of all three epochs.
	tr, err := newTrainer(m, s, mustFlags(t, args...), parallel.Single, nil, 10)
	require.NoError(t, err)
	n, h, _, err := restoreLatest(ckpt, tr, recordOf(t, append(slices.Clone(args), "-epochs", "3")...))
	require.NoError(t, err)
	assert.Equal(t, 3, n)
	assert.Equal(t, []int{1, 2, 3}, h.Epoch)
	assert.Equal(t, mean, tr.ModelState().Get(m.Norm1.Index)[0].Float32s(), "restored into the trainer")
}

// A checkpoint saved under one strategy resumes under another: the state
// is resharded onto the new placement.
func TestResumeAcrossStrategies(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	args := []string{"-data", "digits", "-quiet", "-plot", "", "-ckpt", ckpt, "-channels", "8,8"}
	for i, s := range []string{"dp", "fsdp_tp", "single"} {
		var out bytes.Buffer
		epochs := strconv.Itoa(i + 1)
		require.Equal(t, 0, mainExit(append(slices.Clone(args), "-strategy", s, "-epochs", epochs), &out, io.Discard), s)
		assert.Contains(t, out.String(), "epoch   "+epochs+"/"+epochs, s)
		if i > 0 {
			assert.Contains(t, out.String(), "resumed from "+ckpt+" after epoch "+strconv.Itoa(i), s)
		}
	}
}

// A checkpoint resumes only the run that saved it: another model, data
// or optimizer is a usage error naming the flag and both values; the
// number of epochs and the placement may change, with a note.
func TestResumeChecksTheRecord(t *testing.T) {
	ckpt := filepath.Join(t.TempDir(), "ckpt")
	base := []string{"-data", "digits", "-quiet", "-plot", "", "-ckpt", ckpt, "-channels", "8,8", "-epochs", "1"}
	require.Equal(t, 0, mainExit(base, io.Discard, io.Discard))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-channels", "8,16"}, "-channels: the checkpoint was saved with [8,8], this run has [8,16]"},
		{[]string{"-lr", "0.01"}, "-lr: the checkpoint was saved with 0.002, this run has 0.01"},
		{[]string{"-decay", "0.5"}, "-decay: the checkpoint was saved with 0.7, this run has 0.5"},
		{[]string{"-batch", "32"}, "-batch: the checkpoint was saved with 128, this run has 32"},
		{[]string{"-augment"}, "-augment: the checkpoint was saved with false, this run has true"},
		{[]string{"-dtype", "bf16"}, "-dtype: the checkpoint was saved with f32, this run has bf16"},
		{[]string{"-seed", "7"}, "-data: the checkpoint was trained on other data (1438 train / 359 test examples, sha256 "},
	} {
		clitest.Fails(t, mainExit, 2, append(slices.Clone(base), tc.args...), "cnn: -ckpt "+ckpt+" holds step 1 of another run: ", tc.msg)
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
	args := []string{"-data", "digits", "-quiet", "-plot", "", "-ckpt", ckpt, "-channels", "8,8", "-epochs", "2"}
	require.Equal(t, 0, mainExit(args, io.Discard, io.Discard))
	require.NoError(t, os.Truncate(filepath.Join(ckpt, "00000002", "manifest.json"), 10))
	var out bytes.Buffer
	require.Equal(t, 0, mainExit(append(args, "-epochs", "3"), &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+ckpt+" after epoch 1\n")
	assert.Contains(t, out.String(), "(step 2 in "+ckpt+" does not restore, so an earlier step is used: checkpoint: restore step 2")
	assert.Contains(t, out.String(), "epoch   2/3")
	assert.Contains(t, out.String(), "epoch   3/3")
}

// The confusion matrix counts by true class (row) and prediction
// (column).
func TestConfusion(t *testing.T) {
	m := confusion([]int32{0, 0, 1, 2, 2, 2}, []int32{0, 1, 1, 2, 0, 2}, 3)
	assert.Equal(t, [][]int{{1, 1, 0}, {0, 1, 0}, {1, 0, 2}}, m)
	g := confusionGrid(m)
	// Row r of the heat map is true class 2-r: class 0 on top.
	assert.InDelta(t, 2.0/3, g.Z(2, 0), 1e-12)
	assert.InDelta(t, 0.5, g.Z(0, 2), 1e-12)
	assert.Equal(t, []string{"a", "b", "c"}, labelsOf(namedTicks{names: []string{"a", "b", "c"}}.Ticks(0, 2)))
	ticks := namedTicks{names: []string{"a", "b", "c"}, reversed: true}.Ticks(0, 2)
	assert.Equal(t, 2.0, ticks[0].Value, "class a labels the top row")
}

// The figure lays out the misclassified images in square cells, as many
// rows as fit.
func TestMistakesGrid(t *testing.T) {
	ds := digits(tensor.NewKey(0))
	pred := ds.test.Y.Int32s()
	pred = slices.Clone(pred)
	for i := range 40 {
		pred[i] = (pred[i] + 1) % 10
	}
	p, err := mistakesPlot(ds, pred, 1.0)
	require.NoError(t, err)
	assert.Equal(t, "misclassified test images (first 24 of 40)", p.Title.Text)
	assert.InDelta(t, p.X.Max-p.X.Min, p.Y.Max-p.Y.Min, 1e-12, "aspect 1: square data area")
}

func labelsOf(ts []plot.Tick) []string {
	var out []string
	for _, t := range ts {
		out = append(out, t.Label)
	}
	return out
}

// testAccuracies returns the test accuracy (in %) of each epoch line.
func testAccuracies(t *testing.T, out string) []float64 {
	t.Helper()
	var acc []float64
	for _, m := range regexp.MustCompile(`(?m)^epoch .*test +([0-9.]+)%`).FindAllStringSubmatch(out, -1) {
		a, err := strconv.ParseFloat(m[1], 64)
		require.NoError(t, err)
		acc = append(acc, a)
	}
	return acc
}

// epochLines returns the epoch lines of out without their timings.
func epochLines(out string) []string {
	var lines []string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "epoch ") {
			lines = append(lines, regexp.MustCompile(`\s+[0-9]+ images/s.*`).ReplaceAllString(l, ""))
		}
	}
	return lines
}

func mustFlags(t *testing.T, args ...string) config {
	t.Helper()
	cfg, err := parseFlags(args, io.Discard)
	require.NoError(t, err)
	return cfg
}

// recordOf is the record of a run on one device with the given flags.
func recordOf(t *testing.T, args ...string) runRecord {
	t.Helper()
	cfg := mustFlags(t, args...)
	ds, _, err := loadData(cfg.data, cfg.dataExplicit, "", tensor.NewKey(cfg.seed).Split(3)[0])
	require.NoError(t, err)
	return record(cfg, ds.train.X.Dim(1), ds.train.X.Dim(2), len(ds.classes), ds, "single on one device")
}

func TestHelp(t *testing.T) { clitest.Help(t, mainExit) }

func TestPlural(t *testing.T) {
	for _, c := range []struct {
		n    int
		want string
	}{{0, "0 epochs"}, {1, "1 epoch"}, {2, "2 epochs"}} {
		require.Equal(t, c.want, plural(c.n, "epoch"))
	}
}
