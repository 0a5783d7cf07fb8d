package main

import (
	"bytes"
	"io"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseFlags(t *testing.T) {
	cfg, err := parseFlags([]string{"-hidden", "32, 16", "-batch", "8", "-strategy", "fsdp"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, []int{32, 16}, cfg.hidden)
	assert.Equal(t, 8, cfg.batch)
	for _, bad := range [][]string{
		{"-hidden", "32,x"},
		{"-hidden", "0"},
		{"-batch", "0"},
		{"-lr", "-1"},
		{"extra"},
	} {
		_, err := parseFlags(bad, io.Discard)
		assert.Error(t, err, "%q", bad)
	}
}

func TestRunPrintsEpochsAndPlots(t *testing.T) {
	cfg, err := parseFlags([]string{"-epochs", "2", "-quiet", "-plot", filepath.Join(t.TempDir(), "c.png")}, io.Discard)
	require.NoError(t, err)
	var out bytes.Buffer
	require.NoError(t, run(cfg, &out))
	line := regexp.MustCompile(`(?m)^epoch   2/2  loss [0-9.]+  train [ 0-9.]+%  test [ 0-9.]+%  +[0-9]+ samples/s`)
	assert.Regexp(t, line, out.String())
	assert.Contains(t, out.String(), "curves written to")
}

func TestRunRejectsBadInput(t *testing.T) {
	for _, args := range [][]string{
		{"-data", "/no/such/dir", "-quiet"},
		{"-strategy", "bogus", "-quiet"},
		{"-strategy", "dp", "-mesh", "dp=3", "-batch", "64", "-quiet"},
		{"-strategy", "dp", "-mesh", "dp=nope", "-quiet"},
	} {
		cfg, err := parseFlags(args, io.Discard)
		require.NoError(t, err)
		assert.Error(t, run(cfg, io.Discard), "%q", args)
	}
}
