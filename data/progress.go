package data

import (
	"cmp"
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// IsTerminal reports whether w is a terminal (a character device a person
// is watching): an *os.File, or anything with an Fd method, whose
// descriptor is a terminal. Buffers, pipes and regular files are not.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(interface{ Fd() uintptr })
	return ok && term.IsTerminal(int(f.Fd()))
}

// Progress is a progress bar for long work, drawn on one line of a
// terminal: a description, the bar, the count done, the rate and the time
// left. It is quiet (draws nothing, costs nothing) when its writer is not a
// terminal, so programs can always create one and still log cleanly to a
// file or a pipe. The bar is drawn at most every 100ms.
//
// A nil *Progress is a quiet one. Its methods may be called from several
// goroutines.
type Progress struct {
	bar  *progressbar.ProgressBar
	done atomic.Bool // Finish or Stop was called
}

// NewProgress returns a progress bar counting up to total units of work on
// w, headed by description; unit names the work in the rate ("batch" shows
// "12 batch/s"; "" means "it"). It is quiet unless w is a terminal (see
// IsTerminal) and total is positive.
func NewProgress(w io.Writer, total int, description, unit string) *Progress {
	return newProgress(w, total, description, unit, IsTerminal(w))
}

// newProgress is NewProgress that draws when visible, whatever w is.
func newProgress(w io.Writer, total int, description, unit string, visible bool) *Progress {
	if !visible || total <= 0 || w == nil {
		return &Progress{}
	}
	p := &Progress{}
	p.bar = progressbar.NewOptions(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(description),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionShowIts(),
		progressbar.OptionSetItsString(cmp.Or(unit, "it")),
		progressbar.OptionThrottle(100*time.Millisecond),
		// The spinner ticker goroutine only runs for bars of unknown length;
		// turn it off anyway so a bar never owns a goroutine.
		progressbar.OptionSetSpinnerChangeInterval(0),
		progressbar.OptionOnCompletion(func() { fmt.Fprintln(w) }),
	)
	_ = p.bar.RenderBlank()
	return p
}

// Add records n more units of work done.
func (p *Progress) Add(n int) {
	if p.visible() {
		_ = p.bar.Add(n)
	}
}

// Describe changes the description, for example to show the latest loss.
func (p *Progress) Describe(description string) {
	if p.visible() {
		p.bar.Describe(description)
	}
}

// Finish fills the bar and ends its line: the work is complete. Only the
// first call of Finish or Stop has an effect.
func (p *Progress) Finish() {
	if p.visible() && p.done.CompareAndSwap(false, true) {
		_ = p.bar.Finish()
	}
}

// Stop ends the bar's line as last drawn, for work abandoned before the
// end. Only the first call of Finish or Stop has an effect.
func (p *Progress) Stop() {
	if p.visible() && p.done.CompareAndSwap(false, true) {
		_ = p.bar.Exit() // runs the completion function, which ends the line
	}
}

// Visible reports whether the bar draws anything.
func (p *Progress) Visible() bool { return p.visible() }

func (p *Progress) visible() bool { return p != nil && p.bar != nil }
