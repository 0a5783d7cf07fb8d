//go:build unix

package cputime

import (
	"runtime"
	"syscall"
	"time"
)

// Used returns the user and system CPU time the process has used so far,
// over all its threads (the garbage collector's included), or 0 if the
// system does not say.
func Used() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// PeakResident returns the most resident memory the process has had, in
// bytes (getrusage's ru_maxrss), or 0 if the system does not say.
func PeakResident() int64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss) // bytes there
	}
	return int64(ru.Maxrss) << 10 // KiB elsewhere
}
