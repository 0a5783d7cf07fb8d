package data

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// openPTY opens a pseudo-terminal and returns its controller and the
// terminal end, or skips the test where that is not possible.
func openPTY(t *testing.T) (ctl, tty *os.File) {
	t.Helper()
	ctl, err := os.OpenFile("/dev/ptmx", os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	var n uint32
	rc, err := ctl.SyscallConn()
	require.NoError(t, err)
	var ioErr error
	require.NoError(t, rc.Control(func(fd uintptr) {
		if ioErr = unix.IoctlSetPointerInt(int(fd), unix.TIOCSPTLCK, 0); ioErr == nil {
			n, ioErr = unix.IoctlGetUint32(int(fd), unix.TIOCGPTN)
		}
	}))
	if ioErr != nil {
		ctl.Close()
		t.Skipf("no pseudo-terminals: %v", ioErr)
	}
	tty, err = os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|syscall.O_NOCTTY, 0)
	if err != nil {
		ctl.Close()
		t.Skipf("no pseudo-terminals: %v", err)
	}
	return ctl, tty
}

// TestLoaderProgressOnTerminal runs an epoch with Progress set to a real
// terminal and reads what a person would see.
func TestLoaderProgressOnTerminal(t *testing.T) {
	ctl, tty := openPTY(t)
	defer ctl.Close()
	var (
		wg     sync.WaitGroup
		screen strings.Builder
	)
	wg.Go(func() { _, _ = io.Copy(&screen, ctl) }) // ends with EIO once tty is closed

	assert.True(t, IsTerminal(tty))
	l := &Loader{Dataset: rowsDataset(100), BatchSize: 10, Progress: tty, Prefetch: 2}
	for _, err := range l.Epoch(4) {
		require.NoError(t, err)
	}
	// An epoch left early ends its line without claiming completion.
	for b, err := range l.Epoch(5) {
		require.NoError(t, err)
		if b.Step == 1 {
			break
		}
	}
	require.NoError(t, tty.Close())
	wg.Wait()

	out := strings.ReplaceAll(screen.String(), "\r\n", "\n") // the terminal's ONLCR
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.Len(t, lines, 2, "one line per epoch: %q", out)
	last := lines[0][strings.LastIndex(lines[0], "\r")+1:]
	assert.Contains(t, last, "epoch 4 100%")
	assert.Contains(t, last, "(10/10")
	assert.Contains(t, last, "batch/")
	assert.Contains(t, lines[1], "epoch 5")
	assert.NotContains(t, lines[1], "100%")
}
