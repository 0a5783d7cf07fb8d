//go:build unix

package data

import (
	"os"

	"golang.org/x/sys/unix"
)

// mapFile maps size bytes of f read-only. Access is declared random: a
// window read touches its own pages, without read-ahead around them.
func mapFile(f *os.File, size int64) (*mapping, error) {
	if size == 0 {
		return &mapping{}, nil
	}
	mem, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, err
	}
	_ = unix.Madvise(mem, unix.MADV_RANDOM)
	return &mapping{mem: mem}, nil
}

// mapping is a file mapped into memory.
type mapping struct{ mem []byte }

// readAt copies len(p) bytes at off into p; off and len(p) are in range.
func (m *mapping) readAt(p []byte, off int64) error {
	copy(p, m.mem[off:off+int64(len(p))])
	return nil
}

// bytes returns the mapped bytes [off, off+n) without copying.
func (m *mapping) bytes(off, n int64) ([]byte, bool) { return m.mem[off : off+n], true }

func (m *mapping) close() error {
	if m.mem == nil {
		return nil
	}
	err := unix.Munmap(m.mem)
	m.mem = nil
	return err
}
