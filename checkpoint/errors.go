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
	Op   string // "save", "restore", "metadata", "steps", "manager", "export", "import"
	Step int    // the step, or -1
	Path string // the tensor's tree path, or "" when not about one tensor
	// File is the file at fault: a name in the step directory
	// ("manifest.json", "d0001.bin"), the step directory itself (then
	// equal to Dir), or the path given (a safetensors file); "" if none.
	File string
	Dir  string // the step directory (dir/00000100), or "" when not about one
	Err  error  // the cause, often wrapping one of the sentinel errors
}

// Error returns "checkpoint: restore step 100 (ckpt/00000100): tensor
// Layers[0].W: file d0001.bin: cause", leaving out what is not set (and
// File when it is the step directory).
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("checkpoint: ")
	b.WriteString(e.Op)
	if e.Step >= 0 {
		b.WriteString(" step ")
		b.WriteString(strconv.Itoa(e.Step))
	}
	if e.Dir != "" {
		fmt.Fprintf(&b, " (%s)", e.Dir)
	}
	if e.Path != "" {
		fmt.Fprintf(&b, ": tensor %s", e.Path)
	}
	if e.File != "" && e.File != e.Dir {
		fmt.Fprintf(&b, ": file %s", e.File)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// checkDir returns an *Error of op and step if dir is "" (an unset flag,
// say): filepath.Join would read it as the current directory, and
// os.MkdirAll and os.ReadDir fail on it with "no such file or directory",
// which Steps would take for a fresh, empty directory.
func checkDir(op string, step int, dir string) error {
	if dir == "" {
		return &Error{Op: op, Step: step, Err: errors.New(`the checkpoint directory is "" (use "." for the current directory)`)}
	}
	return nil
}

// errf builds a cause wrapping a sentinel: errf(ErrCorrupt, "frame %d: %v", i, err).
func errf(kind error, format string, args ...any) error {
	return fmt.Errorf("%w: %s", kind, fmt.Sprintf(format, args...))
}

// typeString writes a dtype abbreviation and a shape in type notation,
// f32[3,4], the one way this package prints shapes.
func typeString(abbrev string, shape []int) string {
	var b strings.Builder
	b.WriteString(abbrev)
	b.WriteByte('[')
	for i, d := range shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(d))
	}
	b.WriteByte(']')
	return b.String()
}

// inDir sets the step directory of err, if it is an *Error without one.
func inDir(err error, dir string) error {
	var e *Error
	if errors.As(err, &e) && e.Dir == "" {
		e.Dir = dir
	}
	return err
}
