//go:build !mpi

package mpi

import "io"

// Available reports whether this binary was built with the mpi tag.
const Available = false

// Init checks the environment (EnvSettings) without the mpi build tag:
// the program is one process.
func Init() error {
	_, err := EnvSettings()
	return err
}

// Finalize does nothing without the mpi build tag.
func Finalize() error { return nil }

// Rank returns this process's rank: 0 without the mpi build tag.
func Rank() int { return 0 }

// Size returns the number of processes: 1 without the mpi build tag.
func Size() int { return 1 }

// Output returns w: without the mpi build tag the program is process 0.
func Output(w io.Writer) io.Writer { return w }

// Hosts returns []int{0}: without the mpi build tag the program is one
// process on one host.
func Hosts() []int { return []int{0} }
