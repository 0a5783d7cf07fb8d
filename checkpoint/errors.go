package checkpoint

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Sentinel errors. Errors returned by this package wrap one of them when it
// applies, so callers can test with errors.Is; the *Error around it says
// which step, tensor and file were involved.
var (
	// ErrNotFound: the step (or file) does not exist.
	ErrNotFound = errors.New("not found")
	// ErrExists: the step exists already and overwriting was not asked for.
	ErrExists = errors.New("step exists")
	// ErrCorrupt: a manifest, header or shard that does not parse, fails
	// its checksum, is truncated or is missing.
	ErrCorrupt = errors.New("corrupt checkpoint")
	// ErrMismatch: the checkpoint does not fit the tree given to restore
	// it into (paths, shapes or dtypes differ) or the placement asked for.
	ErrMismatch = errors.New("does not match")
	// ErrUnsafePath: a file name in a manifest would leave the checkpoint
	// directory (.., an absolute path, a symlink pointing outside).
	ErrUnsafePath = errors.New("unsafe file name")
)

// Error is the error this package returns: what was being done, to which
// step, tensor and file, and why.
type Error struct {
	Op   string // "save", "restore", "export", "import", "manager"
	Step int    // the step, or -1
	Path string // the tensor's tree path, or "" when not about one tensor
	File string // the file, relative to the step directory, or ""
	Err  error  // the cause, often wrapping one of the sentinel errors
}

// Error returns "checkpoint: restore step 100: tensor Layers[0].W: file d0001.bin: cause".
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint: ")
	b.WriteString(e.Op)
	if e.Step >= 0 {
		b.WriteString(" step ")
		b.WriteString(strconv.Itoa(e.Step))
	}
	if e.Path != "" {
		fmt.Fprintf(&b, ": tensor %s", e.Path)
	}
	if e.File != "" {
		fmt.Fprintf(&b, ": file %s", e.File)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// errf builds a cause wrapping a sentinel: errf(ErrCorrupt, "frame %d: %v", i, err).
func errf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}
