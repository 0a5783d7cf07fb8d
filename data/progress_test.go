package data

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestProgressQuietWhenNotATerminal(t *testing.T) {
	f, err := os.Create(filepath.Join(t.TempDir(), "log"))
	require.NoError(t, err)
	defer f.Close()
	var buf bytes.Buffer
	for _, w := range []interface {
		Write([]byte) (int, error)
	}{&buf, f} {
		assert.False(t, IsTerminal(w))
		p := NewProgress(w, 10, "work", "")
		assert.False(t, p.Visible())
		p.Add(3)
		p.Describe("loss 0.5")
		p.Finish()
		p.Stop()
	}
	assert.Zero(t, buf.Len())
	st, err := f.Stat()
	require.NoError(t, err)
	assert.Zero(t, st.Size())

	// A nil Progress and an empty job are quiet too.
	var p *Progress
	p.Add(1)
	p.Describe("x")
	p.Finish()
	p.Stop()
	assert.False(t, p.Visible())
	assert.False(t, newProgress(&buf, 0, "nothing", "", true).Visible())
	assert.Zero(t, buf.Len())

	// A Loader with a non-terminal Progress writer writes nothing.
	l := &Loader{Dataset: rowsDataset(20), BatchSize: 3, Progress: &buf}
	for _, err := range l.Epoch(0) {
		require.NoError(t, err)
	}
	assert.Zero(t, buf.Len())
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func TestProgressDraws(t *testing.T) {
	var buf syncBuffer
	p := newProgress(&buf, 4, "epoch 3", "batch", true)
	require.True(t, p.Visible())
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() { p.Add(1) })
	}
	wg.Wait()
	p.Finish()
	p.Finish()
	p.Stop()
	out := buf.String()
	assert.Contains(t, out, "epoch 3")
	assert.Contains(t, out, "100%")
	assert.Contains(t, out, "(4/4")
	assert.Contains(t, out, "batch/s")
	assert.True(t, strings.HasSuffix(out, "\n"), "the finished bar ends its line: %q", out)
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line end: %q", out)

	buf = syncBuffer{}
	p = newProgress(&buf, 10, "epoch 0", "", true)
	p.Add(3)
	p.Stop()
	p.Stop()
	out = buf.String()
	assert.NotContains(t, out, "100%")
	assert.Contains(t, out, " it/")
	assert.Equal(t, 1, strings.Count(out, "\n"), "one line end: %q", out)
}
