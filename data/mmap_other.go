//go:build !unix

package data

import "os"

// mapFile, where memory mapping is not available, reads the file with
// ReadAt on each access instead (the file is never read whole either).
func mapFile(f *os.File, size int64) (*mapping, error) { return &mapping{f: f}, nil }

// mapping reads a file with ReadAt.
type mapping struct{ f *os.File }

func (m *mapping) readAt(p []byte, off int64) error {
	_, err := m.f.ReadAt(p, off)
	return err
}

func (m *mapping) bytes(off, n int64) ([]byte, bool) { return nil, false }

func (m *mapping) close() error { return nil }
