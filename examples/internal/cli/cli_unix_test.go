//go:build unix

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A FIFO or an unwritable directory is refused before any work.
func TestWritableFileSpecial(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	require.NoError(t, syscall.Mkfifo(fifo, 0o644))
	assert.ErrorContains(t, WritableFile("plot", fifo), "is a named pipe (FIFO), not a file")
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		require.NoError(t, os.Mkdir(ro, 0o555))
		assert.ErrorContains(t, WritableFile("plot", filepath.Join(ro, "x.png")), "cannot create a file in "+ro)
	}
}

// An interruption waits for the save in progress, prints where the last
// checkpoint is and exits with 130 (143 for SIGTERM).
func TestOnInterrupt(t *testing.T) {
	for _, tc := range []struct {
		sig  syscall.Signal
		code int
		word string
	}{{syscall.SIGINT, 130, "interrupted"}, {syscall.SIGTERM, 143, "terminated"}} {
		t.Run(tc.word, func(t *testing.T) {
			codes := make(chan int, 1)
			exit = func(code int) { codes <- code }
			defer func() { exit = os.Exit }()
			c := &Checkpoints{Dir: "ck", Flag: "ckpt", Unit: "epoch"}
			var errOut syncBuffer
			stop := OnInterrupt("cmd", &errOut, c)
			defer stop()
			saving, release := make(chan struct{}), make(chan struct{})
			go func() {
				_ = c.Save(3, func() error { close(saving); <-release; return nil })
			}()
			<-saving
			require.NoError(t, syscall.Kill(os.Getpid(), tc.sig))
			select {
			case <-codes:
				t.Fatal("exited during a save")
			case <-time.After(100 * time.Millisecond):
			}
			close(release)
			select {
			case code := <-codes:
				assert.Equal(t, tc.code, code)
			case <-time.After(10 * time.Second):
				t.Fatal("no exit after the save")
			}
			assert.Equal(t, "\ncmd: "+tc.word+"; the last checkpoint is epoch 3 in ck: run the same command again to resume from it\n", errOut.String())
		})
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
