//go:build unix

package data

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestReadIDXFileNotRegular: a FIFO where an IDX file belongs is refused
// at once (opening it blocked until a writer came, so LoadMNIST hung), and
// a directory is named as one (was "read DIR: is a directory").
func TestReadIDXFileNotRegular(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "train-images-idx3-ubyte")
	require.NoError(t, unix.Mkfifo(fifo, 0o644))
	for path, kind := range map[string]string{fifo: "a named pipe (FIFO)", dir: "a directory"} {
		done := make(chan error, 1)
		go func() {
			_, err := ReadIDXFile(path)
			done <- err
		}()
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrNotRegular)
			assert.EqualError(t, err, "data: IDX file "+path+": not a regular file: it is "+kind)
		case <-time.After(10 * time.Second):
			t.Fatalf("ReadIDXFile(%s) blocked", kind)
		}
	}
}
