package main

import (
	"bytes"
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

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/clitest"
)

// tiny are flags for a model small enough for tests.
var tiny = []string{"-dim", "16", "-layers", "1", "-heads", "2", "-experts", "8", "-hidden", "16",
	"-context", "16", "-batch", "16", "-eval-batches", "1", "-sample", "20"}

func args(extra ...string) []string { return append(append([]string{}, tiny...), extra...) }

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-experts", "16", "-topk", "1", "-strategy", "fsdp_ep"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, 16, cfg.experts)
	assert.Equal(t, 1, cfg.topK)
	assert.Equal(t, "fsdp_ep", cfg.strategy)
	for _, bad := range [][]string{
		{"-experts", "0"},
		{"-topk", "9"},
		{"-heads", "3"},
		{"-capacity", "0"},
		{"-lr", "-1"},
		{"-steps", "-1"},
		{"extra"},
	} {
		_, err := parseFlags(bad, io.Discard)
		assert.Error(t, err, "%q", bad)
	}
}

var evalLine = regexp.MustCompile(`(?m)^step +(\d+)  loss ([0-9.]+)  val loss ([0-9.]+) \(([0-9.]+) bits/char\) +\d+ tokens/s  dropped +[0-9.]+%  load max/mean [0-9.]+$`)

func TestRunEachStrategyLearns(t *testing.T) {
	strategies := []string{"single", "ep", "dp_ep", "fsdp_ep"}
	if testing.Short() {
		strategies = []string{"dp_ep"} // the others run in TestCompare
	}
	for _, s := range strategies {
		t.Run(s, func(t *testing.T) {
			cfg, err := parseFlags(args("-strategy", s, "-steps", "40", "-eval-every", "20", "-lr", "1e-2",
				"-plot", filepath.Join(t.TempDir(), "m.png")), io.Discard)
			require.NoError(t, err)
			var out bytes.Buffer
			require.NoError(t, runConfig(cfg, &out, io.Discard))
			m := evalLine.FindAllStringSubmatch(out.String(), -1)
			require.Len(t, m, 2, out.String())
			first, _ := strconv.ParseFloat(m[0][3], 64)
			last, _ := strconv.ParseFloat(m[1][3], 64)
			bits, _ := strconv.ParseFloat(m[1][4], 64)
			assert.InDelta(t, last/0.6931471805599453, bits, 2e-3)
			// ln 91 ≈ 4.51 nats is a uniform guess; 40 steps of a tiny model
			// learn the character frequencies at least.
			assert.Less(t, last, 3.4, out.String())
			assert.Less(t, last, first+0.05, out.String())
			assert.Contains(t, out.String(), "sample:\nLight is ")
			assert.Contains(t, out.String(), "curves written to")
		})
	}
}

// -strategy compare: every strategy reproduces the single-device gradient.
func TestCompare(t *testing.T) {
	cfg, err := parseFlags(args("-strategy", "compare"), io.Discard)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, runConfig(cfg, &out, io.Discard))
	row := regexp.MustCompile(`(?m)^ +(single|ep|dp_ep|fsdp_ep) .* ([0-9.]+)  +([0-9.]+e[-+][0-9]+) `)
	rows := row.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, rows, 4, out.String())
	for _, r := range rows {
		d, err := strconv.ParseFloat(r[3], 64)
		require.NoError(t, err)
		assert.Less(t, d, 1e-5, "%s: max |Δgrad|\n%s", r[1], out.String())
	}
}

// A checkpoint saved on one mesh resumes on another.
func TestCheckpointResumeOnAnotherMesh(t *testing.T) {
	dir := t.TempDir()
	cfg, err := parseFlags(args("-strategy", "dp_ep", "-steps", "4", "-eval-every", "2", "-ckpt", dir, "-plot", ""), io.Discard)
	require.NoError(t, err)
	require.NoError(t, runConfig(cfg, io.Discard, io.Discard))
	cfg, err = parseFlags(args("-strategy", "ep", "-mesh", "ep=4", "-steps", "6", "-eval-every", "2", "-ckpt", dir, "-plot", ""), io.Discard)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, runConfig(cfg, &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+dir+" after step 4")
	m := evalLine.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, m, 1, out.String())
	assert.Equal(t, "6", m[0][1])
}

// TestDenseStrategiesEqualOneDevice: the dense model (-ffn dense) prints
// the one-device lines under DP and FSDP on 4 devices (the losses to
// the printed 3 decimals, and the sample drawn from the trained
// parameters).
func TestDenseStrategiesEqualOneDevice(t *testing.T) {
	dense := []string{"-ffn", "dense", "-dim", "16", "-layers", "2", "-heads", "2", "-hidden", "32", "-context", "16",
		"-batch", "8", "-eval-batches", "1", "-sample", "20", "-steps", "4", "-eval-every", "2", "-plot", ""}
	run := func(extra ...string) string {
		cfg, err := parseFlags(append(slices.Clone(dense), extra...), io.Discard)
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, runConfig(cfg, &out, io.Discard))
		m := evalLine.FindAllStringSubmatch(out.String(), -1)
		require.Len(t, m, 2, out.String())
		var lines []string
		for _, l := range m {
			lines = append(lines, strings.Join(l[1:], " "))
		}
		_, sample, ok := strings.Cut(out.String(), "sample:\n")
		require.True(t, ok, out.String())
		return strings.Join(lines, "\n") + "\n" + sample
	}
	clitest.Fails(t, mainExit, 2, append(slices.Clone(dense), "-strategy", "dp_ep"), `-strategy "dp_ep": -ffn dense trains with single, dp or fsdp`)
	clitest.Fails(t, mainExit, 2, append(slices.Clone(dense), "-mesh", "dp=2,ep=2"), `-mesh "dp=2,ep=2": strategy fsdp wants a mesh with the one axis dp`)
	want := run("-strategy", "single")
	assert.Equal(t, want, run("-mesh", "dp=4"), "fsdp (the default for -ffn dense)")
	assert.Equal(t, want, run("-strategy", "dp", "-mesh", "dp=4"))
}

// -dtype bf16 trains in automatic mixed precision (products in bf16,
// everything else float32): the losses follow float32's within 2 units of
// bf16 roundoff (u = 2^-8) over a short run (0.42-0.49 u under every
// kernel set when written), and strategies that run expert.Forward
// (float32 only) are refused.
func TestMixedPrecisionTracksFloat32(t *testing.T) {
	losses := func(extra ...string) []float64 {
		cfg, err := parseFlags(args(append([]string{"-strategy", "single", "-steps", "20", "-eval-every", "10", "-plot", "", "-sample", "0"}, extra...)...), io.Discard)
		require.NoError(t, err)
		var out bytes.Buffer
		require.NoError(t, runConfig(cfg, &out, io.Discard))
		m := evalLine.FindAllStringSubmatch(out.String(), -1)
		require.Len(t, m, 2, out.String())
		var l []float64
		for _, e := range m {
			for _, f := range e[2:4] {
				v, err := strconv.ParseFloat(f, 64)
				require.NoError(t, err)
				l = append(l, v)
			}
		}
		if len(extra) > 0 {
			assert.Contains(t, out.String(), "mixed precision: params=float32,compute=bfloat16,output=float32\n")
		}
		return l
	}
	f32, bf16 := losses(), losses("-dtype", "bf16")
	worst := 0.0
	for i := range f32 {
		worst = math.Max(worst, math.Abs(bf16[i]-f32[i])/f32[i])
	}
	t.Logf("losses: float32 %v, bf16 %v: largest relative difference %.2g = %.2f u", f32, bf16, worst, worst/0x1p-8)
	for i := range f32 {
		assert.InEpsilon(t, f32[i], bf16[i], 2*0x1p-8, "loss %d: float32 %v, bf16 %v", i, f32, bf16)
	}
	clitest.Fails(t, mainExit, 2, args("-dtype", "bf16", "-strategy", "dp_ep", "-steps", "1", "-plot", ""), "-dtype bf16 trains experts with -strategy single")
	clitest.Fails(t, mainExit, 2, args("-dtype", "f16", "-steps", "1", "-plot", ""), `-dtype "f16": want f32 or bf16`)
}

func TestRunRejectsBadInput(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "short.txt")
	require.NoError(t, os.WriteFile(empty, []byte("too short"), 0o644))
	bad := filepath.Join(t.TempDir(), "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte{0xff, 0xfe, 'a'}, 0o644))
	for _, tc := range []struct {
		args []string
		code int
		msg  string
	}{
		{[]string{"-text", "/no/such/file"}, 1, "-text /no/such/file: no such file or directory"},
		{[]string{"-text", empty}, 2, "-context 16: short.txt has 9 characters, too few"},
		{[]string{"-text", bad}, 1, "not valid UTF-8"},
		{[]string{"-strategy", "bogus"}, 2, `-strategy "bogus": want one of single, ep, dp_ep, fsdp_ep, dp, fsdp, or compare`},
		{[]string{"-strategy", "fsdp"}, 2, "-strategy fsdp trains a dense model: add -ffn dense"},
		{[]string{"-strategy", "dp_ep", "-mesh", "dp=2,tp=4"}, 2, `-mesh "dp=2,tp=4": axis "tp": strategy dp_ep uses the axes dp and ep only`},
		{[]string{"-strategy", "dp_ep", "-mesh", "dp=nope"}, 2, `-mesh "dp=nope": `},
		{[]string{"-strategy", "ep", "-mesh", "ep=3"}, 2, "-batch 16 is not a multiple of the 3 devices"},
		{[]string{"-strategy", "ep", "-mesh", "ep=3", "-batch", "24"}, 2, "-experts 8 does not split over the 3 devices of the axis ep"},
		{[]string{"-strategy", "fsdp_ep", "-mesh", "ep=4"}, 2, "strategy fsdp_ep needs an axis dp"},
		{[]string{"-strategy", "dp_ep", "-mesh", "dp=2,ep=4", "-batch", "12"}, 2, "-batch 12 is not a multiple of the 8 devices"},
	} {
		clitest.Fails(t, mainExit, tc.code, args(append(tc.args, "-steps", "1", "-plot", "")...), tc.msg)
	}
}

func TestMainExitStatus(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "missing.txt")
	for _, tc := range []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"help", []string{"-h"}, 0, ""},
		{"bad flag", []string{"-experts", "0"}, 2, "moe: -experts 0: want an integer from 1 to 1024"},
		{"missing text", args("-text", missing, "-steps", "1"), 1, "moe: -text " + missing + ": no such file or directory"},
		{"mesh too big", args("-mesh", "dp=4,ep=8", "-steps", "1", "-plot", ""), 2, "needs 32 devices"},
		{"runs", args("-strategy", "single", "-steps", "1", "-plot", ""), 0, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out, errOut bytes.Buffer
			assert.Equal(t, tc.code, mainExit(tc.args, &out, &errOut), errOut.String())
			if tc.msg != "" {
				assert.Contains(t, errOut.String(), tc.msg)
			}
			if tc.code == 0 && tc.name == "runs" {
				assert.Regexp(t, evalLine, out.String())
				assert.Contains(t, out.String(), "sample:\n")
			}
		})
	}
}

// A resumed run keeps the curves in its checkpoint: the plot shows the
// evaluations before the resume too, at their true steps.
func TestResumeKeepsHistory(t *testing.T) {
	dir := t.TempDir()
	require.Equal(t, 0, mainExit(args("-strategy", "single", "-steps", "4", "-eval-every", "2", "-ckpt", dir, "-plot", ""), io.Discard, io.Discard))
	var out bytes.Buffer
	plot := filepath.Join(t.TempDir(), "m.png")
	require.Equal(t, 0, mainExit(args("-strategy", "dp_ep", "-steps", "6", "-eval-every", "2", "-ckpt", dir, "-plot", plot), &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+dir+" after step 4")
	assert.FileExists(t, plot)
	h, err := checkpoint.Restore(dir, 6, historyLike(3, 8), checkpoint.OnHost(), checkpoint.Subtree("History"))
	require.NoError(t, err)
	assert.Equal(t, []int{2, 4, 6}, h.Steps.Ints())
	m := evalLine.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, m, 1)
	val, _ := strconv.ParseFloat(m[0][3], 64)
	assert.InDelta(t, val, h.Val.Float64s()[2], 1e-3, "the last evaluation is this run's")
	for _, s := range h.Load.Float64s() {
		assert.True(t, s >= 0 && s <= 1, "load shares in [0, 1]: %v", s)
	}
}

// The heat map's ticks sit on the steps that ran (the centres of the
// columns), the last one labelled, with a colour bar and the loss legend
// beside the plots rather than over the data.
func TestHeatMapReadsAtAGlance(t *testing.T) {
	h := history{experts: 4}
	for _, s := range []int{100, 200, 300, 400, 450} {
		h.add(s, 2, 2, []float64{0.25, 0.25, 0.5, 0, 0.1, 0.2, 0.3, 0.4})
	}
	rows, err := h.plots("t")
	require.NoError(t, err)
	require.Len(t, rows, 2)
	require.NotNil(t, rows[0].Legend, "the loss legend goes on the side")
	require.NotNil(t, rows[1].Side, "a colour bar beside the heat map")
	hp := rows[1].Plot
	var labelled []string
	for _, tk := range hp.X.Tick.Marker.Ticks(hp.X.Min, hp.X.Max) {
		assert.Contains(t, h.step, int(tk.Value), "a tick on a step that ran")
		if tk.Label != "" {
			labelled = append(labelled, tk.Label)
		}
	}
	assert.Equal(t, []string{"100", "200", "300", "400", "450"}, labelled)
	var layers []string
	for _, tk := range hp.Y.Tick.Marker.Ticks(hp.Y.Min, hp.Y.Max) {
		if tk.Label != "" {
			layers = append(layers, tk.Label)
			assert.Equal(t, 1.5, math.Mod(tk.Value, 4), "a layer's label at the centre of its rows")
		}
	}
	assert.Equal(t, []string{"1", "2"}, layers)
	assert.Equal(t, hp.X.Tick.Marker, rows[0].Plot.X.Tick.Marker, "the loss curves have the same ticks")
	assert.Equal(t, hp.X.Min, rows[0].Plot.X.Min, "the loss curves' steps line up with the columns")
	assert.Equal(t, hp.X.Max, rows[0].Plot.X.Max)
	assert.Equal(t, 2.0, h.loadMax(), "the colour scale runs to twice the fair share at least")
	require.NoError(t, h.plot(filepath.Join(t.TempDir(), "m.png"), "t"))
}

// A checkpoint knows its model, text and optimizer: resuming another is a
// usage error naming the setting and both values. -steps may change: the
// note says how the learning-rate schedule follows.
func TestResumeChecksTheRecord(t *testing.T) {
	dir := t.TempDir()
	text := filepath.Join(t.TempDir(), "opticks.txt")
	require.NoError(t, os.WriteFile(text, []byte(data.Opticks()), 0o644))
	euro := filepath.Join(t.TempDir(), "euro.txt")
	require.NoError(t, os.WriteFile(euro, []byte(strings.ReplaceAll(data.Opticks(), "z", "€")), 0o644))
	base := args("-strategy", "single", "-steps", "4", "-eval-every", "2", "-ckpt", dir, "-plot", "")
	require.Equal(t, 0, mainExit(base, io.Discard, io.Discard))
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-heads", "4"}, "-heads: the checkpoint was saved with 2, this run has 4"},
		{[]string{"-topk", "1"}, "-topk: the checkpoint was saved with 2, this run has 1"},
		{[]string{"-capacity", "2"}, "-capacity: the checkpoint was saved with 1.25, this run has 2"},
		{[]string{"-lr", "0.01"}, "-lr: the checkpoint was saved with 0.003, this run has 0.01"},
		{[]string{"-text", euro}, "-text: the vocabulary differs from the checkpoint's: this text lacks 'z', and it has '€', which the checkpoint's does not"},
		{[]string{"-text", euro}, "-text: the checkpoint was trained on another text (567038 characters, sha256 d4a9ac22462b35e7; this one has 567038 characters, sha256 "},
	} {
		clitest.Fails(t, mainExit, 2, append(slices.Clone(base), tc.args...), "moe: -ckpt "+dir+" holds step 4 of another run: ", tc.msg)
	}
	// The same text from a file, a longer schedule, another mesh.
	var out bytes.Buffer
	require.Equal(t, 0, mainExit(append(slices.Clone(base), "-text", text, "-steps", "6", "-strategy", "ep", "-mesh", "ep=4"), &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+dir+" after step 4\n")
	assert.Contains(t, out.String(), "(-steps 6: the checkpoint's run was of 4 steps, so the learning-rate schedule now decays over 6: at step 4 the rate is ")
	assert.Contains(t, out.String(), "(saved under single on one device; the state is resharded for ep on Mesh('ep': 4))")
	m := evalLine.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, m, 1)
	assert.Equal(t, "6", m[0][1])
}

// A damaged newest step is skipped, naming it.
func TestResumeSkipsDamagedStep(t *testing.T) {
	dir := t.TempDir()
	base := args("-strategy", "single", "-steps", "4", "-eval-every", "2", "-ckpt", dir, "-plot", "")
	require.Equal(t, 0, mainExit(base, io.Discard, io.Discard))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "00000004", "manifest.json"), []byte("{"), 0o644))
	var out bytes.Buffer
	require.Equal(t, 0, mainExit(base, &out, io.Discard))
	assert.Contains(t, out.String(), "resumed from "+dir+" after step 2\n")
	assert.Contains(t, out.String(), "(step 4 in "+dir+" does not restore, so an earlier step is used: checkpoint: restore step 4")
	m := evalLine.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, m, 1)
	assert.Equal(t, "4", m[0][1])
}

// A text of more distinct characters than the vocabulary takes is refused
// before a model is built.
func TestVocabularyBound(t *testing.T) {
	var b strings.Builder
	for r := rune(0x4e00); r < 0x4e00+maxVocab+1; r++ {
		b.WriteRune(r)
	}
	path := filepath.Join(t.TempDir(), "han.txt")
	require.NoError(t, os.WriteFile(path, []byte(strings.Repeat(b.String(), 2)), 0o644))
	var out, errOut bytes.Buffer
	assert.Equal(t, 1, mainExit(args("-text", path, "-steps", "1", "-plot", ""), &out, &errOut))
	assert.Equal(t, "moe: -text "+path+": 4097 distinct characters, more than the 4096 this example's vocabulary takes\n", errOut.String())
	assert.Empty(t, out.String())
}

func TestHelp(t *testing.T) { clitest.Help(t, mainExit) }
