package cli

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// Checkpoints records where a run's checkpoints go and the last step
// saved, for the message on interruption. Its zero value is a run without
// checkpoints. Save holds a lock while a checkpoint is written, so that
// an interruption waits for a save in progress to finish (checkpoints are
// atomic: an interrupted save would leave the previous one, but then the
// message could not say which one is last).
type Checkpoints struct {
	// Dir is the checkpoint directory ("" for a run without -ckpt); Flag
	// names the flag that sets it and Unit what a step counts ("epoch",
	// "step").
	Dir, Flag, Unit string
	// Every is how many units apart the checkpoints are saved (0 means
	// 1): moe and charrnn save at every evaluation.
	Every int

	mu    sync.Mutex
	step  int
	saved bool
}

// Resumed records that the run resumed from step.
func (c *Checkpoints) Resumed(step int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.step, c.saved = step, true
}

// Save runs save, the writing of the checkpoint of step, under the lock,
// and records the step if it succeeds.
func (c *Checkpoints) Save(step int, save func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := save(); err != nil {
		return err
	}
	c.step, c.saved = step, true
	return nil
}

// Last describes the last checkpoint: "the last checkpoint is epoch 3 in
// ckpt: run the same command again to resume from it", or why there is
// none. The caller holds the lock or knows that no save runs.
func (c *Checkpoints) last() string {
	every, first := c.Unit, "the first "+c.Unit
	if c.Every > 1 {
		every, first = fmt.Sprintf("%d %ss", c.Every, c.Unit), fmt.Sprintf("%s %d", c.Unit, c.Every)
	}
	switch {
	case c.Dir == "":
		return fmt.Sprintf("no checkpoint was saved (-%s DIR saves one every %s and resumes from it)", c.Flag, every)
	case !c.saved:
		return fmt.Sprintf("no checkpoint was saved in %s yet (the first comes after %s)", c.Dir, first)
	}
	return fmt.Sprintf("the last checkpoint is %s %d in %s: run the same command again to resume from it", c.Unit, c.step, c.Dir)
}

// Last is the description the interruption message gives.
func (c *Checkpoints) Last() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.last()
}

// exit ends the process; tests replace it.
var exit = os.Exit

// OnInterrupt makes an interruption (SIGINT, Ctrl-C) or termination
// (SIGTERM) print, once any checkpoint being saved is complete, where the
// last checkpoint is on errOut and exit with status 130 (SIGINT) or 143
// (SIGTERM). Under mpirun only process 0 prints. A second signal while
// the first waits for a save exits at once. stop ends the handling; call
// it when the run ends.
func OnInterrupt(name string, errOut io.Writer, c *Checkpoints) (stop func()) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var sig os.Signal
		select {
		case sig = <-sigs:
		case <-done:
			return
		}
		code, what := StatusInterrupted, "interrupted"
		if sig == syscall.SIGTERM {
			code, what = StatusTerminated, "terminated"
		}
		locked := make(chan struct{})
		go func() {
			c.mu.Lock()
			close(locked)
		}()
		select {
		case <-locked:
			if Leader() {
				fmt.Fprintf(errOut, "\n%s: %s; %s\n", name, what, c.last())
			}
		case <-sigs:
			if Leader() {
				fmt.Fprintf(errOut, "\n%s: %s again while a checkpoint was being saved; the one before it is intact\n", name, what)
			}
		}
		exit(code)
		// Reached only when tests replace exit.
		<-locked
		c.mu.Unlock()
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
		wg.Wait()
	}
}
