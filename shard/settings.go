package shard

// This file holds the environment variables package shard reads, parsed
// strictly in one place: the device pool, Install and the asynchronous
// collectives use these parsers, EnvSettings reports them to programs
// (a usage error before any work) and to package shard/mpi (whose Init
// makes the processes of a job agree on them).

import (
	"fmt"
	"os"
	"strconv"
	"time"
)

// MaxDevices is the largest value GONOX_DEVICES accepts: every simulated
// device has a goroutine and blocks of its own, and a pool beyond this is
// a typing mistake rather than a mesh.
const MaxDevices = 4096

// The bounds of the durations package shard reads.
const (
	// MinTimeout is the shortest GONOX_TIMEOUT other than 0 (wait
	// forever): a shorter one would abort healthy jobs.
	MinTimeout = time.Second
	// MaxProgress is the longest GONOX_ASYNC_PROGRESS: a started
	// collective tested less often than this no longer overlaps anything.
	MaxProgress = time.Second
)

// defaultTimeout is GONOX_TIMEOUT's default.
const defaultTimeout = 10 * time.Minute

// defaultProgress is GONOX_ASYNC_PROGRESS's default.
const defaultProgress = 100 * time.Microsecond

// Setting is one environment variable gonox reads and what a process
// takes from it.
type Setting struct {
	// Name is the variable and Value its value in the environment (""
	// when unset or empty, which means the default).
	Name, Value string
	// Canon is the setting the value gives, spelt one way for all the
	// spellings of one setting ("90s" and "1m30s" give "1m30s"; unset
	// gives the default's): processes agree when their Canons are equal.
	Canon string
}

// EnvSettings parses the environment variables package shard reads, in
// this order, each strictly (an unknown value is an error, never the
// default):
//
//	GONOX_DEVICES         an integer from 1 to MaxDevices (default 8; 1 per process under mpirun)
//	GONOX_DEBUG           0 or 1 (default 0)
//	GONOX_TIMEOUT         0 (wait forever) or a duration of at least MinTimeout (default 10m)
//	GONOX_ASYNC_PROGRESS  a duration from 0 to MaxProgress (default 100µs)
//
// It returns an error naming the first variable whose value is refused
// and what it wants. The device pool panics with that error when first
// used, and Install returns it; programs call EnvSettings (or package
// shard/mpi's, which adds its own variables) first, to report a mistake
// as a usage error before any work.
func EnvSettings() ([]Setting, error) {
	var out []Setting
	for _, p := range []struct {
		name  string
		canon func(string) (string, error)
	}{
		{DevicesEnv, func(v string) (string, error) {
			n, err := parseDevices(v)
			return strconv.Itoa(n), err
		}},
		{DebugEnv, func(v string) (string, error) {
			d, err := parseDebug(v)
			return strconv.FormatBool(d), err
		}},
		{TimeoutEnv, func(v string) (string, error) {
			d, err := parseTimeout(v)
			return d.String(), err
		}},
		{ProgressEnv, func(v string) (string, error) {
			d, err := parseProgress(v)
			return d.String(), err
		}},
	} {
		v := os.Getenv(p.name)
		c, err := p.canon(v)
		if err != nil {
			return nil, err
		}
		if v == "" && p.name == DevicesEnv {
			c = "" // the default depends on the launcher (8 alone, 1 under mpirun)
		}
		out = append(out, Setting{Name: p.name, Value: v, Canon: c})
	}
	return out, nil
}

// DevicesFromEnv returns the number of devices $GONOX_DEVICES asks for
// (8 when it is unset or empty), or an error if it is set to anything but
// an integer from 1 to MaxDevices. Programs call it (or EnvSettings)
// before anything else to report a bad value as a usage error, where
// Devices would panic.
func DevicesFromEnv() (int, error) { return parseDevices(os.Getenv(DevicesEnv)) }

func parseDevices(s string) (int, error) {
	if s == "" {
		return defaultDevices, nil
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return 0, fmt.Errorf("shard: %s=%q: want a positive integer (at most %d)", DevicesEnv, s, MaxDevices)
	}
	if v > MaxDevices {
		return 0, fmt.Errorf("shard: %s=%q: at most %d simulated devices", DevicesEnv, s, MaxDevices)
	}
	return v, nil
}

func parseDebug(s string) (bool, error) {
	switch s {
	case "", "0":
		return false, nil
	case "1":
		return true, nil
	}
	return false, fmt.Errorf("shard: %s=%q: want 0 or 1", DebugEnv, s)
}

func parseTimeout(s string) (time.Duration, error) {
	if s == "" {
		return defaultTimeout, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || (d > 0 && d < MinTimeout) {
		return 0, fmt.Errorf("shard: %s=%q: want a duration such as 90s or 10m (0 waits forever, else at least %v)", TimeoutEnv, s, MinTimeout)
	}
	return d, nil
}

func parseProgress(s string) (time.Duration, error) {
	if s == "" {
		return defaultProgress, nil
	}
	d, err := time.ParseDuration(s)
	if err != nil || d < 0 || d > MaxProgress {
		return 0, fmt.Errorf("shard: %s=%q: want a duration such as 100us, from 0 to %v", ProgressEnv, s, MaxProgress)
	}
	return d, nil
}
