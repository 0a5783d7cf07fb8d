package main

import (
	"bytes"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/examples/internal/clitest"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// tiny are flags for a model small enough for tests.
var tiny = []string{"-embed", "8", "-hidden", "32", "-context", "16", "-batch", "8", "-eval-batches", "1", "-sample", "20"}

func args(extra ...string) []string { return append(append([]string{}, tiny...), extra...) }

// runArgs runs the command and returns its exit status and outputs.
func runArgs(a ...string) (int, string, string) {
	var out, errOut bytes.Buffer
	rc := mainExit(a, &out, &errOut)
	return rc, out.String(), errOut.String()
}

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-hidden", "64", "-remat=false", "-context", "256"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 64, cfg.hidden)
	assert.False(t, cfg.remat)
	assert.Equal(t, 256, cfg.context)
	def, err := parseFlags(nil, io.Discard)
	require.NoError(t, err)
	assert.True(t, def.remat, "remat is the default")
	assert.Equal(t, filepath.Join("out", "charrnn.png"), def.plot)
	for _, bad := range [][]string{
		{"-hidden", "0"},
		{"-context", "0"},
		{"-lr", "-1"},
		{"-lr", "NaN"},
		{"-steps", "-1"},
		{"-batch", "4096", "-context", "4096"},
		{"-temperature", "0"},
		{"extra"},
	} {
		_, err := parseFlags(bad, io.Discard)
		assert.Error(t, err, "%q", bad)
	}
}

var evalLine = regexp.MustCompile(`(?m)^step +(\d+)  loss ([0-9.]+)  val loss ([0-9.]+) \(([0-9.]+) bits/character\) +\d+ characters/s$`)

func TestRunLearns(t *testing.T) {
	plot := filepath.Join(t.TempDir(), "c.png")
	rc, out, errOut := runArgs(args("-steps", "60", "-eval-every", "30", "-lr", "2e-2", "-plot", plot)...)
	require.Equal(t, 0, rc, errOut)
	m := evalLine.FindAllStringSubmatch(out, -1)
	require.Len(t, m, 2, out)
	first, _ := strconv.ParseFloat(m[0][3], 64)
	last, _ := strconv.ParseFloat(m[1][3], 64)
	bits, _ := strconv.ParseFloat(m[1][4], 64)
	assert.InDelta(t, last/math.Ln2, bits, 2e-3)
	// ln 91 ≈ 4.51 nats is a uniform guess; 60 steps of a tiny model learn
	// the character frequencies at least.
	assert.Less(t, last, 3.3, out)
	assert.Less(t, last, first, out)
	assert.Contains(t, out, "scan with remat (4 segments of 4 steps)")
	assert.Contains(t, out, "sample:\nLight is ")
	assert.Contains(t, out, "curves written to "+plot)
	st, err := os.Stat(plot)
	require.NoError(t, err)
	assert.Greater(t, st.Size(), int64(1000))
}

// The remat scan computes the plain scan's loss and gradient.
func TestRematSameGradient(t *testing.T) {
	c, err := loadCorpus("")
	require.NoError(t, err)
	cfg, err := parseFlags(args("-context", "50"), io.Discard)
	require.NoError(t, err)
	m := newModel(tensor.NewKey(3), modelConfig{vocab: c.vocab.Size(), embed: 8, hidden: 32})
	b := trainBatch(cfg, c, 7)
	require.Equal(t, []int{50, 8}, b.X.Shape())
	grad := func(remat bool) (float32, Model) {
		l, g := autodiff.ValueAndGradWith(func(m Model, b batch) *tensor.Tensor { return m.Loss(b, remat) })(m, b)
		return l.Float32s()[0], g
	}
	lp, gp := grad(false)
	lr, gr := grad(true)
	assert.InDelta(t, lp, lr, 1e-5)
	assert.Greater(t, lp, float32(3.5), "an untrained model is about uniform (ln 91 = 4.51)")
	require.NoError(t, pytree.Diff(gp, gr, 1e-4, 1e-6))
	for _, leaf := range pytree.Leaves(gr) {
		assert.Greater(t, tensor.Sum(tensor.Abs(leaf)).Float32s()[0], float32(0))
	}
}

// The windows are time-major, Y is X shifted by one character, and the
// batches depend on the seed and the step alone.
func TestBatches(t *testing.T) {
	ids := []int32{10, 11, 12, 13, 14, 15, 16, 17}
	b := windows(ids, []int{0, 3}, 4)
	assert.Equal(t, []int32{10, 13, 11, 14, 12, 15, 13, 16}, b.X.Int32s())
	assert.Equal(t, []int32{11, 14, 12, 15, 13, 16, 14, 17}, b.Y.Int32s())
	c, err := loadCorpus("")
	require.NoError(t, err)
	cfg, err := parseFlags(tiny, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, trainBatch(cfg, c, 5).X.Int32s(), trainBatch(cfg, c, 5).X.Int32s())
	assert.NotEqual(t, trainBatch(cfg, c, 5).X.Int32s(), trainBatch(cfg, c, 6).X.Int32s())
}

func TestResume(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt")
	rc, out, errOut := runArgs(args("-steps", "4", "-eval-every", "2", "-plot", "", "-sample", "0", "-ckpt", dir)...)
	require.Equal(t, 0, rc, errOut)
	require.Len(t, evalLine.FindAllString(out, -1), 2, out)
	plot := filepath.Join(t.TempDir(), "r.png")
	rc, out, errOut = runArgs(args("-steps", "6", "-eval-every", "2", "-plot", plot, "-sample", "0", "-ckpt", dir, "-remat=false")...)
	require.Equal(t, 0, rc, errOut)
	assert.Contains(t, out, "resumed from "+dir+" after step 4")
	assert.Contains(t, out, "the learning-rate schedule now decays over 6")
	assert.Contains(t, out, "-remat=false: saved with -remat=true")
	m := evalLine.FindAllStringSubmatch(out, -1)
	require.Len(t, m, 1, out)
	assert.Equal(t, "6", m[0][1])
	// The model of a checkpoint is its own: another one is refused, naming
	// the flag, before any work.
	rc, out, errOut = runArgs(args("-steps", "8", "-plot", "", "-ckpt", dir, "-hidden", "16")...)
	assert.Equal(t, 2, rc)
	assert.Empty(t, out)
	assert.Contains(t, errOut, "-hidden: the checkpoint was saved with 32, this run has 16")
}

func TestMistakes(t *testing.T) {
	dir := t.TempDir()
	noL := filepath.Join(dir, "noL.txt")
	require.NoError(t, os.WriteFile(noL, []byte(strings.Repeat("ight is a wave. ", 200)), 0o644))
	for _, c := range []struct {
		args []string
		rc   int
		want string
	}{
		{args("-hidden", "0"), 2, "charrnn: -hidden 0: "},
		{args("-lr", "Inf"), 2, "charrnn: -lr +Inf: want a finite number"},
		{args("-text", noL), 2, `charrnn: -prompt "Light is ": the character 'L' is not in noL.txt`},
		{args("-text", noL, "-context", "3000"), 2, "charrnn: -context 3000: noL.txt has 3200 characters"},
		{args("-plot", dir), 1, "charrnn: -plot " + dir + ": is a directory"},
		{args("-text", filepath.Join(dir, "missing.txt")), 1, "missing.txt"},
	} {
		rc, out, errOut := runArgs(c.args...)
		assert.Equal(t, c.rc, rc, "%q: %s", c.args, errOut)
		assert.Empty(t, out, "%q", c.args)
		assert.Equal(t, 1, strings.Count(errOut, "\n"), "%q: %s", c.args, errOut)
		assert.Contains(t, errOut, c.want, "%q", c.args)
	}
}

func TestHelp(t *testing.T) { clitest.Help(t, mainExit) }
