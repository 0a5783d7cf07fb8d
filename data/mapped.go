package data

import (
	"os"
)

// mappedFile is an open file mapped into memory (or read with ReadAt where
// mapping is not available), shared by TokenFile and ImageFile.
type mappedFile struct {
	path string
	f    *os.File
	m    *mapping
}

// mapOpen maps the size bytes of f, closing f on failure.
func mapOpen(path string, f *os.File, size int64) (mappedFile, error) {
	if int64(int(size)) != size {
		f.Close()
		return mappedFile{}, fileErr(path, -1, "%w: %d bytes cannot be mapped by this program", ErrTooLarge, size)
	}
	m, err := mapFile(f, size)
	if err != nil {
		f.Close()
		return mappedFile{}, fileErr(path, -1, "mapping: %w", err)
	}
	return mappedFile{path: path, f: f, m: m}, nil
}

// Path returns the file's path.
func (mf *mappedFile) Path() string { return mf.path }

// bytes returns the n bytes at off: the mapped memory itself, or a copy in
// scratch (grown as needed) where the file is read with ReadAt. Reading
// mapped memory of a file another program truncated faults: callers defer
// recoverFault around their use of the bytes.
func (mf *mappedFile) bytes(scratch *[]byte, off, n int64) ([]byte, error) {
	if mf.m == nil {
		return nil, fileErr(mf.path, -1, "file is closed")
	}
	if b, ok := mf.m.bytes(off, n); ok {
		return b, nil
	}
	if int64(cap(*scratch)) < n {
		*scratch = make([]byte, n)
	}
	b := (*scratch)[:n]
	if err := mf.m.readAt(b, off); err != nil {
		return nil, fileErr(mf.path, off, "%w", err)
	}
	return b, nil
}

// Close unmaps and closes the file. Reading afterwards is an error; a
// second Close does nothing.
func (mf *mappedFile) Close() error {
	if mf.m == nil {
		return nil
	}
	err := mf.m.close()
	mf.m = nil
	if cerr := mf.f.Close(); err == nil {
		err = cerr
	}
	return err
}

// recoverFault turns a memory fault in reading a mapped file (a file that
// another program truncated) into an error naming the file and the
// offset; any other panic goes on.
func recoverFault(err *error, path string, at *int64) {
	r := recover()
	if r == nil {
		return
	}
	if _, fault := r.(interface{ Addr() uintptr }); !fault {
		panic(r)
	}
	*err = fileErr(path, *at, "reading the mapped file failed (changed while in use?): %v", r)
}
