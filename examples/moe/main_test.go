package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
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
			require.NoError(t, run(cfg, &out))
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
	require.NoError(t, run(cfg, &out))
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
	require.NoError(t, run(cfg, io.Discard))
	cfg, err = parseFlags(args("-strategy", "ep", "-mesh", "ep=4", "-steps", "6", "-eval-every", "2", "-ckpt", dir, "-plot", ""), io.Discard)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run(cfg, &out))
	assert.Contains(t, out.String(), "resumed from "+dir+" after step 4")
	m := evalLine.FindAllStringSubmatch(out.String(), -1)
	require.Len(t, m, 1, out.String())
	assert.Equal(t, "6", m[0][1])
}

func TestRunRejectsBadInput(t *testing.T) {
	empty := filepath.Join(t.TempDir(), "short.txt")
	require.NoError(t, os.WriteFile(empty, []byte("too short"), 0o644))
	bad := filepath.Join(t.TempDir(), "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte{0xff, 0xfe, 'a'}, 0o644))
	for _, a := range [][]string{
		{"-text", "/no/such/file"},
		{"-text", empty},
		{"-text", bad},
		{"-strategy", "bogus"},
		{"-strategy", "dp_ep", "-mesh", "dp=2,tp=4"},
		{"-strategy", "dp_ep", "-mesh", "dp=nope"},
		{"-strategy", "ep", "-mesh", "ep=3"},                         // 8 experts over 3
		{"-strategy", "fsdp_ep", "-mesh", "ep=4"},                    // no dp axis
		{"-strategy", "dp_ep", "-mesh", "dp=2,ep=4", "-batch", "12"}, // 12 rows over 8 devices
	} {
		cfg, err := parseFlags(args(a...), io.Discard)
		require.NoError(t, err)
		assert.Error(t, run(cfg, io.Discard), "%q", a)
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
		{"bad flag", []string{"-experts", "0"}, 2, "moe: -experts must be positive"},
		{"missing text", args("-text", missing, "-steps", "1"), 1, "moe: open " + missing},
		{"mesh too big", args("-mesh", "dp=4,ep=8", "-steps", "1", "-plot", ""), 1, "needs 32 devices"},
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
