package filekind

import (
	"io/fs"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestOf(t *testing.T) {
	for _, c := range []struct {
		m    fs.FileMode
		want string
	}{
		{0o644, "a regular file"},
		{fs.ModeDir | 0o755, "a directory"},
		{fs.ModeSymlink | 0o777, "a symlink"},
		{fs.ModeNamedPipe | 0o600, "a named pipe (FIFO)"},
		{fs.ModeSocket, "a socket"},
		{fs.ModeDevice | fs.ModeCharDevice, "a character device"},
		{fs.ModeDevice, "a device"},
		{fs.ModeIrregular, "a special file (?---------)"},
	} {
		assert.Equal(t, c.want, Of(c.m), "mode %v", c.m)
	}
}
