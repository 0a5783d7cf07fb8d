package cli

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"unicode/utf8"

	"github.com/gonox/gonox/data"
)

// WritableFile checks, before any work, that a file can be written at
// path (the -plot of an example), without creating it or its directory:
// path must not be a directory, a FIFO or a socket; an existing file must
// open for writing (it is not changed); otherwise its nearest existing
// ancestor must be a directory in which a file can be created (probed by
// creating and removing a temporary file there). Errors name the flag.
func WritableFile(flagName, path string) error {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("-%s %s: %s", flagName, path, fmt.Sprintf(format, args...))
	}
	if st, err := os.Stat(path); err == nil {
		switch {
		case st.IsDir():
			return fail("is a directory; want a file name such as %s", filepath.Join(path, "curves.png"))
		case st.Mode()&(fs.ModeNamedPipe|fs.ModeSocket) != 0:
			return fail("is a %s, not a file", kind(st.Mode()))
		}
		f, err := os.OpenFile(path, os.O_WRONLY, 0)
		if err != nil {
			return fail("cannot be written: %v", unwrapPath(err))
		}
		return f.Close()
	} else if !missing(err) {
		return fail("%v", unwrapPath(err))
	}
	dir := filepath.Dir(path)
	for {
		st, err := os.Stat(dir)
		if err == nil {
			if !st.IsDir() {
				return fail("%s is not a directory", dir)
			}
			break
		}
		if !missing(err) {
			return fail("%v", unwrapPath(err))
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return fail("%v", unwrapPath(err))
		}
		dir = parent
	}
	if err := probe(dir); err != nil {
		return fail("cannot create a file in %s: %v", dir, err)
	}
	return nil
}

// missing reports whether a Stat error says the path does not exist, or
// runs through a file as if it were a directory (found on the way up).
func missing(err error) bool {
	return errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR)
}

// WritableDir makes sure files can be written in dir (the -ckpt of an
// example) before any work: it creates dir if needed and probes it by
// creating and removing a temporary file. Errors name the flag.
func WritableDir(flagName, dir string) error {
	if st, err := os.Stat(dir); err == nil && !st.IsDir() {
		return fmt.Errorf("-%s %s: not a directory", flagName, dir)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-%s %s: %v", flagName, dir, unwrapPath(err))
	}
	if err := probe(dir); err != nil {
		return fmt.Errorf("-%s %s: cannot write there: %v", flagName, dir, err)
	}
	return nil
}

// CheckOutputs checks, before any work, that the plot (-plot; "" for
// none) and the checkpoints (-ckpt; "" for none) can be written.
func CheckOutputs(plot, ckpt string) error {
	if plot != "" {
		if err := WritableFile("plot", plot); err != nil {
			return err
		}
	}
	if ckpt != "" {
		return WritableDir("ckpt", ckpt)
	}
	return nil
}

// probe creates and removes a temporary file in dir.
func probe(dir string) error {
	f, err := os.CreateTemp(dir, ".gonox-write-test-*")
	if err != nil {
		return unwrapPath(err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
}

// ReadFile reads the file named by a flag (the -text of an example)
// through a bound: more than limit bytes is an error naming the flag, the
// file and the bound, after reading at most limit+1 bytes (so /dev/zero
// or an endless pipe fail at once). Directories are refused.
func ReadFile(flagName, path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("-%s %s: %v", flagName, path, unwrapPath(err))
	}
	defer f.Close()
	if st, err := f.Stat(); err == nil && st.IsDir() {
		return nil, fmt.Errorf("-%s %s: is a directory, want a file", flagName, path)
	}
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, fmt.Errorf("-%s %s: %v", flagName, path, unwrapPath(err))
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("-%s %s: larger than %s, the most this example reads", flagName, path, Size(limit))
	}
	return b, nil
}

// ReadText reads the text the -text flag of a language-model example
// names: the file at path through ReadFile's bound of limit bytes, which
// must be valid UTF-8, named by its base name; or, if path is empty,
// Newton's Opticks embedded in the module (data.Opticks), named
// "Opticks".
func ReadText(path string, limit int64) (text, name string, err error) {
	if path == "" {
		return data.Opticks(), "Opticks", nil
	}
	b, err := ReadFile("text", path, limit)
	if err != nil {
		return "", "", err
	}
	if !utf8.Valid(b) {
		return "", "", fmt.Errorf("-text %s: not valid UTF-8", path)
	}
	return string(b), filepath.Base(path), nil
}

// Size formats a byte count the way the limits are written: "64 MiB".
func Size(n int64) string {
	switch {
	case n >= 1<<30 && n%(1<<30) == 0:
		return fmt.Sprintf("%d GiB", n>>30)
	case n >= 1<<20 && n%(1<<20) == 0:
		return fmt.Sprintf("%d MiB", n>>20)
	case n >= 1<<10 && n%(1<<10) == 0:
		return fmt.Sprintf("%d KiB", n>>10)
	}
	return fmt.Sprintf("%d bytes", n)
}

// unwrapPath drops the operation and path of an *fs.PathError, which the
// messages here already name.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func kind(m fs.FileMode) string {
	if m&fs.ModeNamedPipe != 0 {
		return "named pipe (FIFO)"
	}
	return "socket"
}
