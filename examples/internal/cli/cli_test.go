package cli

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
)

func TestStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		code int
		msg  string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{Usagef("-x %d: bad", 3), 2, "cmd: -x 3: bad\n"},
		{Usage(errors.New("wrapped")), 2, "cmd: wrapped\n"},
		{errors.New("disk full"), 1, "cmd: disk full\n"},
	} {
		var buf bytes.Buffer
		assert.Equal(t, tc.code, Status("cmd", tc.err, &buf))
		assert.Equal(t, tc.msg, buf.String())
	}
	assert.Nil(t, Usage(nil))
	u := Usagef("a")
	assert.Equal(t, u, Usage(u), "not wrapped twice")
	assert.True(t, IsUsage(Usage(errors.New("x"))))
	assert.False(t, IsUsage(errors.New("x")))
}

func TestFlagRanges(t *testing.T) {
	parse := func(args ...string) (int, float64, error) {
		var n int
		var x float64
		f := NewFlags("cmd", io.Discard)
		f.Int(&n, "n", 5, 1, 10, "a count")
		f.Float(&x, "x", 0.5, Positive(1), "a rate")
		err := f.Parse(args)
		return n, x, err
	}
	n, x, err := parse()
	require.NoError(t, err)
	assert.Equal(t, 5, n)
	assert.Equal(t, 0.5, x)
	n, x, err = parse("-n", "10", "-x", "1")
	require.NoError(t, err)
	assert.Equal(t, 10, n)
	assert.Equal(t, 1.0, x)
	for _, tc := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-n", "0"}, "-n 0: want an integer from 1 to 10"},
		{[]string{"-n", "11"}, "-n 11: want an integer from 1 to 10"},
		{[]string{"-n", "x"}, `invalid value "x" for flag -n`},
		{[]string{"-x", "0"}, "-x 0: want a finite number in (0, 1]"},
		{[]string{"-x", "1.5"}, "-x 1.5: want a finite number in (0, 1]"},
		{[]string{"-x", "NaN"}, "-x NaN: want a finite number in (0, 1]"},
		{[]string{"-x", "Inf"}, "-x +Inf: want a finite number in (0, 1]"},
		{[]string{"-x", "-Inf"}, "-x -Inf: want a finite number in (0, 1]"},
		{[]string{"-x", "1e400"}, `invalid value "1e400" for flag -x`},
		{[]string{"extra"}, `unexpected arguments ["extra"]`},
		{[]string{"-nope"}, "flag provided but not defined: -nope"},
	} {
		_, _, err := parse(tc.args...)
		require.Error(t, err, "%q", tc.args)
		assert.True(t, IsUsage(err), "%q: %v", tc.args, err)
		assert.Contains(t, err.Error(), tc.msg, "%q", tc.args)
	}
	_, _, err = parse("-h")
	assert.ErrorIs(t, err, flag.ErrHelp)
}

// A mistake is one line (the error), -h the whole usage.
func TestFlagOutput(t *testing.T) {
	var n int
	var out bytes.Buffer
	f := NewFlags("cmd", &out)
	f.Int(&n, "n", 5, 1, 10, "a count")
	assert.Error(t, f.Parse([]string{"-n", "x"}))
	assert.Empty(t, out.String())
	assert.ErrorIs(t, f.Parse([]string{"-h"}), flag.ErrHelp)
	assert.Equal(t, "Usage of cmd:\n  -n int\n    \ta count (1 to 10) (default 5)\n", out.String())
}

func TestRange(t *testing.T) {
	closed := Range{Min: 0, Max: 2}
	for v, want := range map[float64]bool{0: true, 2: true, 1: true, -1e-300: false, 2.0000001: false, math.NaN(): false, math.Inf(1): false} {
		assert.Equal(t, want, closed.Contains(v), "%v", v)
	}
	assert.False(t, Positive(1).Contains(0))
	assert.True(t, Positive(1).Contains(math.SmallestNonzeroFloat64))
	assert.Equal(t, "[0, 2]", closed.String())
	assert.Equal(t, "(0, 0.001]", Positive(1e-3).String())
}

func TestChecksRunInOrderAndChanged(t *testing.T) {
	var a, b int
	var order []string
	f := NewFlags("cmd", io.Discard)
	f.Int(&a, "a", 1, 0, 9, "")
	f.Int(&b, "b", 1, 0, 9, "")
	f.Check(func() error { order = append(order, "first"); return nil })
	f.Check(func() error {
		order = append(order, "second")
		if a > b {
			return errors.New("-a exceeds -b")
		}
		return nil
	})
	err := f.Parse([]string{"-a", "5"})
	assert.EqualError(t, err, "-a exceeds -b")
	assert.True(t, IsUsage(err))
	assert.Equal(t, []string{"first", "second"}, order)
	assert.True(t, f.Changed("a"))
	assert.False(t, f.Changed("b"))
}

// Every variable CheckEnv knows is refused, naming it, for a value its
// package would refuse or ignore; defaults and good values pass.
func TestCheckEnv(t *testing.T) {
	for _, tc := range []struct{ name, value, msg string }{
		{"GONOX_KERNELS", "bogus", `GONOX_KERNELS="bogus": unknown kernel set`},
		{"GONOX_DEVICES", "0", `GONOX_DEVICES="0": want a positive integer`},
		{"GONOX_DEVICES", "x", `GONOX_DEVICES="x": want a positive integer`},
		{"GONOX_DEVICES", "99999999999", `GONOX_DEVICES="99999999999": at most 4096 simulated devices`},
		{"GONOX_DEBUG", "true", `GONOX_DEBUG="true": want 0 or 1`},
		{"GONOX_TIMEOUT", "10", `GONOX_TIMEOUT="10": want a duration`},
		{"GONOX_TIMEOUT", "-1s", `GONOX_TIMEOUT="-1s": want a duration`},
		{"GONOX_ASYNC_PROGRESS", "fast", `GONOX_ASYNC_PROGRESS="fast": want a duration`},
		{"GONOX_MPI_THREAD", "single", `GONOX_MPI_THREAD="single": want multiple (the default) or funneled`},
		{"GONOX_MPI_SHM", "yes", `GONOX_MPI_SHM="yes": want 0 (off) or 1`},
	} {
		t.Run(tc.name+"="+tc.value, func(t *testing.T) {
			if tc.name == "GONOX_KERNELS" {
				// Read once, at start-up: see TestKernelsEnvInChild.
				t.Skip("checked in a child process")
			}
			t.Setenv(tc.name, tc.value)
			err := CheckEnv()
			require.Error(t, err)
			assert.True(t, IsUsage(err))
			assert.Contains(t, err.Error(), tc.msg)
		})
	}
	for _, kv := range [][2]string{{"GONOX_DEBUG", "1"}, {"GONOX_TIMEOUT", "90s"}, {"GONOX_ASYNC_PROGRESS", "0"},
		{"GONOX_MPI_THREAD", "funneled"}, {"GONOX_MPI_SHM", "0"}, {"GONOX_DEVICES", "3"}, {"GONOX_DEBUG", ""}} {
		t.Setenv(kv[0], kv[1])
	}
	assert.NoError(t, CheckEnv())
}

// GONOX_KERNELS is read when the program starts: the test binary runs
// itself with a bad value and Run must print one line and return 2.
func TestKernelsEnvInChild(t *testing.T) {
	if os.Getenv("GONOX_CLI_CHILD") != "" {
		var out, errOut bytes.Buffer
		code := Run("cmd", nil, &out, &errOut, func([]string, io.Writer, io.Writer) error {
			t.Fatal("run called despite a bad environment")
			return nil
		})
		os.Stdout.WriteString(errOut.String())
		os.Exit(code)
	}
	cmd := execSelf(t, "TestKernelsEnvInChild", "GONOX_CLI_CHILD=1", "GONOX_KERNELS=bogus")
	out, err := cmd.Output()
	var ee interface{ ExitCode() int }
	require.ErrorAs(t, err, &ee)
	assert.Equal(t, 2, ee.ExitCode())
	assert.Regexp(t, `^cmd: GONOX_KERNELS="bogus": unknown kernel set .*\n$`, string(out))
}

func TestWritableFile(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	require.NoError(t, os.WriteFile(file, []byte("keep"), 0o644))
	assert.NoError(t, WritableFile("plot", filepath.Join(dir, "new.png")))
	assert.NoError(t, WritableFile("plot", filepath.Join(dir, "a", "b", "new.png")), "directories to be made")
	assert.NoError(t, WritableFile("plot", file))
	got, err := os.ReadFile(file)
	require.NoError(t, err)
	assert.Equal(t, "keep", string(got), "an existing file is not changed")
	_, err = os.Stat(filepath.Join(dir, "a"))
	assert.ErrorIs(t, err, os.ErrNotExist, "nothing created")
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Len(t, entries, 1, "the probe is removed")

	for _, tc := range []struct{ path, msg string }{
		{dir, "-plot " + dir + ": is a directory"},
		{filepath.Join(file, "x.png"), "-plot " + filepath.Join(file, "x.png") + ": " + file + " is not a directory"},
	} {
		err := WritableFile("plot", tc.path)
		require.Error(t, err, tc.path)
		assert.Contains(t, err.Error(), tc.msg)
	}
}

func TestWritableDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ckpt", "sub")
	require.NoError(t, WritableDir("ckpt", dir))
	entries, err := os.ReadDir(dir)
	require.NoError(t, err)
	assert.Empty(t, entries)
	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o644))
	assert.EqualError(t, WritableDir("ckpt", file), "-ckpt "+file+": not a directory")
	assert.ErrorContains(t, WritableDir("ckpt", filepath.Join(file, "x")), "-ckpt "+filepath.Join(file, "x")+": not a directory")
}

func TestReadFileBound(t *testing.T) {
	path := filepath.Join(t.TempDir(), "t.txt")
	require.NoError(t, os.WriteFile(path, []byte("12345"), 0o644))
	b, err := ReadFile("text", path, 5)
	require.NoError(t, err)
	assert.Equal(t, "12345", string(b))
	_, err = ReadFile("text", path, 4)
	assert.EqualError(t, err, "-text "+path+": larger than 4 bytes, the most this example reads")
	_, err = ReadFile("text", filepath.Dir(path), 4)
	assert.ErrorContains(t, err, "is a directory")
	_, err = ReadFile("text", path+".missing", 4)
	assert.EqualError(t, err, "-text "+path+".missing: no such file or directory")
	if _, err := os.Stat("/dev/zero"); err == nil {
		start := time.Now()
		_, err = ReadFile("text", "/dev/zero", 1<<20)
		assert.EqualError(t, err, "-text /dev/zero: larger than 1 MiB, the most this example reads")
		assert.Less(t, time.Since(start), time.Minute)
	}
	// An endless pipe, as <(yes) gives.
	r, w, err := os.Pipe()
	require.NoError(t, err)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		line := []byte(strings.Repeat("y\n", 512))
		for {
			if _, err := w.Write(line); err != nil {
				return
			}
		}
	}()
	_, err = ReadFile("text", "/dev/fd/"+strconv.Itoa(int(r.Fd())), 64<<10)
	r.Close()
	w.Close()
	wg.Wait()
	if runtime.GOOS == "linux" {
		assert.ErrorContains(t, err, "larger than 64 KiB")
	}
}

func TestReadText(t *testing.T) {
	text, name, err := ReadText("", 10)
	require.NoError(t, err)
	assert.Equal(t, "Opticks", name)
	assert.Equal(t, data.Opticks(), text, "the embedded text, whatever the bound")
	dir := t.TempDir()
	path := filepath.Join(dir, "book.txt")
	require.NoError(t, os.WriteFile(path, []byte("Light is\n"), 0o644))
	text, name, err = ReadText(path, 100)
	require.NoError(t, err)
	assert.Equal(t, [2]string{"Light is\n", "book.txt"}, [2]string{text, name})
	_, _, err = ReadText(path, 4)
	assert.EqualError(t, err, "-text "+path+": larger than 4 bytes, the most this example reads")
	bad := filepath.Join(dir, "bad.txt")
	require.NoError(t, os.WriteFile(bad, []byte{'a', 0xff, 'b'}, 0o644))
	_, _, err = ReadText(bad, 100)
	assert.EqualError(t, err, "-text "+bad+": not valid UTF-8")
}

func TestSize(t *testing.T) {
	for n, want := range map[int64]string{64 << 20: "64 MiB", 1 << 30: "1 GiB", 4096: "4 KiB", 1000: "1000 bytes", 1<<20 + 1: "1048577 bytes"} {
		assert.Equal(t, want, Size(n))
	}
}

func TestCheckpointsLast(t *testing.T) {
	none := &Checkpoints{Flag: "ckpt", Unit: "epoch"}
	assert.Equal(t, "no checkpoint was saved (-ckpt DIR saves one every epoch and resumes from it)", none.Last())
	c := &Checkpoints{Dir: "ck", Flag: "ckpt", Unit: "step"}
	assert.Equal(t, "no checkpoint was saved in ck yet (the first comes after the first step)", c.Last())
	c.Resumed(100)
	assert.Equal(t, "the last checkpoint is step 100 in ck: run the same command again to resume from it", c.Last())
	assert.Error(t, c.Save(200, func() error { return errors.New("disk full") }))
	assert.Contains(t, c.Last(), "step 100", "a failed save is not the last checkpoint")
	require.NoError(t, c.Save(200, func() error { return nil }))
	assert.Contains(t, c.Last(), "step 200 in ck")

	// moe and charrnn save at every evaluation, not every step: an
	// interruption at step 8 said the first checkpoint came after the
	// first step.
	every := &Checkpoints{Flag: "ckpt", Unit: "step", Every: 100}
	assert.Equal(t, "no checkpoint was saved (-ckpt DIR saves one every 100 steps and resumes from it)", every.Last())
	every.Dir = "ck"
	assert.Equal(t, "no checkpoint was saved in ck yet (the first comes after step 100)", every.Last())
	every.Every = 1
	assert.Equal(t, "no checkpoint was saved in ck yet (the first comes after the first step)", every.Last())
}
