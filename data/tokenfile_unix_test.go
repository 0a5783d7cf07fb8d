//go:build unix

package data

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// TestOpenFIFO: a FIFO is refused at once (opening it would block until a
// writer came).
func TestOpenFIFO(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo.tok")
	require.NoError(t, unix.Mkfifo(path, 0o644))
	done := make(chan error, 3)
	go func() {
		_, err := OpenTokens(path)
		done <- err
		_, err = OpenRawTokens(path, Uint16, 10)
		done <- err
		_, err = OpenImages(path)
		done <- err
	}()
	for range 3 {
		select {
		case err := <-done:
			assert.ErrorIs(t, err, ErrNotRegular)
			assert.EqualError(t, err, "data: "+path+": not a regular file: it is a named pipe (FIFO)") // not "(p---------)"
		case <-time.After(10 * time.Second):
			t.Fatal("opening a FIFO blocked")
		}
	}
}

// TestTokenFileTruncatedWhileMapped: a file cut short by another program
// after it was mapped gives an error, not a crash.
func TestTokenFileTruncatedWhileMapped(t *testing.T) {
	ids := make([]int32, 1<<14)
	path := writeTokens(t, t.TempDir(), "cut.tok", Uint16, 10, ids)
	f, err := OpenTokens(path)
	require.NoError(t, err)
	defer f.Close()
	require.NoError(t, os.Truncate(path, 32))
	err = f.Read(make([]int32, 10), int64(len(ids)-10))
	require.Error(t, err)
	assert.Contains(t, err.Error(), path)
	assert.Contains(t, err.Error(), "changed while in use")
}
