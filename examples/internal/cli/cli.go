// Package cli is the command-line layer the examples share: the run of a
// main function (MPI start-up and shutdown, exit statuses), flags whose
// ranges are declared with them and checked before any work, checks of
// the environment variables gonox reads, paths probed for writing before
// training starts, input files read through a size bound, and a message on
// interruption naming the last checkpoint.
//
// Exit statuses are the same in every example: 0 on success and for -h, 2
// for a usage mistake (a flag, an environment variable or a combination of
// them: one line naming it, nothing on standard output, before any work),
// 1 for a failure of the outside world while running (a file that cannot
// be read or written, a checkpoint that does not restore), 130 when
// interrupted (Ctrl-C) and 143 when terminated (SIGTERM).
package cli

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/gonox/gonox/shard/mpi"
)

// UsageError is a mistake in the command line or the environment: exit
// status 2.
type UsageError struct{ Err error }

// Error returns the message of the mistake.
func (e UsageError) Error() string { return e.Err.Error() }

// Unwrap returns the error that describes the mistake.
func (e UsageError) Unwrap() error { return e.Err }

// Usagef returns a UsageError with a formatted message; %w wraps as in
// fmt.Errorf.
func Usagef(format string, args ...any) error { return UsageError{fmt.Errorf(format, args...)} }

// Usage marks err as a usage mistake (nil stays nil).
func Usage(err error) error {
	if err == nil || errors.As(err, new(UsageError)) {
		return err
	}
	return UsageError{err}
}

// IsUsage reports whether err is (or wraps) a UsageError.
func IsUsage(err error) bool { return errors.As(err, new(UsageError)) }

// Exit statuses.
const (
	StatusOK          = 0
	StatusFailure     = 1
	StatusUsage       = 2
	StatusInterrupted = 130 // 128 + SIGINT
	StatusTerminated  = 143 // 128 + SIGTERM
)

// Status prints err on errOut, prefixed with the command's name (under
// mpirun: a usage mistake by process 0 alone, a failure by each process,
// naming it), and returns the exit status it calls for: 0 for
// nil and flag.ErrHelp, 2 for a UsageError, 1 otherwise.
func Status(name string, err error, errOut io.Writer) int {
	if err == nil || errors.Is(err, flag.ErrHelp) {
		return StatusOK
	}
	usage := IsUsage(err)
	switch {
	case mpi.Size() > 1 && usage:
		// Every process sees the same flags and environment, so every
		// one finds the mistake: process 0 says it.
		if Leader() {
			fmt.Fprintf(errOut, "%s: %v\n", name, err)
		}
	case mpi.Size() > 1:
		fmt.Fprintf(errOut, "%s: process %d: %v\n", name, mpi.Rank(), err)
	default:
		fmt.Fprintf(errOut, "%s: %v\n", name, err)
	}
	if usage {
		return StatusUsage
	}
	return StatusFailure
}

// Leader reports whether this process prints, samples and plots: always
// in a job of one process, process 0 under mpirun.
func Leader() bool { return mpi.Rank() == 0 }

// Run checks the environment (CheckEnv), calls run unless it is wrong,
// prints the error if any and returns the exit status (see Status). It is
// an example's main function without the process around it, for tests.
func Run(name string, args []string, out, errOut io.Writer, run func(args []string, out, errOut io.Writer) error) int {
	err := CheckEnv()
	if err == nil {
		err = run(args, out, errOut)
	}
	return Status(name, err, errOut)
}

// Main is an example's main function: it checks the environment (before
// MPI starts, which refuses some values less clearly), starts MPI (a no-op
// without the mpi build tag), runs the command as Run does with standard
// output (only process 0's reaches the terminal under mpirun) and
// standard error, shuts MPI down and exits with Run's status.
func Main(name string, run func(args []string, out, errOut io.Writer) error) {
	if err := CheckEnv(); err != nil {
		os.Exit(Status(name, err, os.Stderr))
	}
	if err := mpi.Init(); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(StatusFailure)
	}
	code := Run(name, os.Args[1:], mpi.Output(os.Stdout), os.Stderr, run)
	if code == StatusOK || mpi.Size() == 1 {
		// On failure in a job of several processes, no Finalize: the
		// others may wait for this process; exiting non-zero makes mpirun
		// end the job.
		mpi.Finalize()
	}
	os.Exit(code)
}
