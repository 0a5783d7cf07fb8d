package checkpoint

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
	"strings"

	"github.com/gonox/gonox/internal/filekind"
)

// Every file this package opens for reading is opened so that nothing can
// block the open or the read: its type is checked first (Lstat or Stat),
// the open is non-blocking (a FIFO put in place after the check returns at
// once instead of waiting for a writer), and the opened file is checked
// again.

var errNotRegular = errors.New("not a regular file")

// notRegular is the error for a file of mode m where a regular file
// belongs.
func notRegular(m fs.FileMode) error {
	return fmt.Errorf("%w: it is %s", errNotRegular, filekind.Of(m))
}

// openRegular opens name in root for reading, refusing anything but a
// regular file. Callers check with Lstat first.
func openRegular(root *os.Root, name string) (*os.File, error) {
	f, err := root.OpenFile(name, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, err
	}
	return checkOpened(f)
}

// openRegularPath opens the file at path for reading, refusing anything
// but a regular file. Symlinks are followed: a model file is often a link
// into a download cache.
func openRegularPath(path string) (*os.File, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, notRegular(fi.Mode())
	}
	f, err := os.OpenFile(path, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, err
	}
	return checkOpened(f)
}

// checkOpened closes f and fails unless it is a regular file.
func checkOpened(f *os.File) (*os.File, error) {
	fi, err := f.Stat()
	if err == nil && !fi.Mode().IsRegular() {
		err = notRegular(fi.Mode())
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// readDir is os.ReadDir for a directory that may be something else: a
// FIFO named like the checkpoint directory fails instead of blocking.
func readDir(dir string) ([]fs.DirEntry, error) {
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, err
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("%s is not a directory: it is %s", dir, filekind.Of(fi.Mode()))
	}
	f, err := os.OpenFile(dir, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	ents, err := f.ReadDir(-1)
	slices.SortFunc(ents, func(a, b fs.DirEntry) int { return strings.Compare(a.Name(), b.Name()) })
	return ents, err
}
