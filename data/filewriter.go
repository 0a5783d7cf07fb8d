package data

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
)

// fileWriter writes a file with a fixed-size header through a buffer to a
// temporary file beside its path; close writes the final header, syncs and
// renames the file into place, so a file at that path is only ever
// replaced by a complete one.
type fileWriter struct {
	path string
	f    *os.File
	bw   *bufio.Writer
	err  error
	done bool
}

// createFile starts the temporary file, with header as a placeholder.
func createFile(path string, header []byte) (*fileWriter, error) {
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, fmt.Errorf("data: creating %s: %w", path, err)
	}
	w := &fileWriter{path: path, f: f, bw: bufio.NewWriterSize(f, 1<<20)}
	if err := w.write(header); err != nil {
		w.discard()
		return nil, err
	}
	return w, nil
}

// write appends p; after an error every call fails with it.
func (w *fileWriter) write(p []byte) error {
	if w.err != nil {
		return w.err
	}
	if w.done {
		return fmt.Errorf("data: writing %s: writer is closed", w.path)
	}
	if _, err := w.bw.Write(p); err != nil {
		w.err = fmt.Errorf("data: writing %s: %w", w.path, err)
	}
	return w.err
}

// close completes the file with its final header. After an earlier error
// it removes the temporary file and returns that error.
func (w *fileWriter) close(header []byte) error {
	if w.done {
		return w.err
	}
	if w.err != nil {
		w.discard()
		return w.err
	}
	w.done = true
	err := w.bw.Flush()
	if err == nil {
		_, err = w.f.WriteAt(header, 0)
	}
	if err == nil {
		err = w.f.Sync()
	}
	if cerr := w.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(w.f.Name(), w.path)
	}
	if err != nil {
		os.Remove(w.f.Name())
		w.err = fmt.Errorf("data: writing %s: %w", w.path, err)
	}
	return w.err
}

// discard removes the temporary file, leaving the path as it was.
func (w *fileWriter) discard() {
	if w.done {
		return
	}
	w.done = true
	w.f.Close()
	os.Remove(w.f.Name())
}
