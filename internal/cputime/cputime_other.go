//go:build !unix

package cputime

import "time"

// Used returns 0: this system does not report the process's CPU time.
func Used() time.Duration { return 0 }

// PeakResident returns 0: this system does not report the process's peak
// resident memory.
func PeakResident() int64 { return 0 }
