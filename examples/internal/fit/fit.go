// Package fit holds the epoch loop the examples that train classifiers
// epoch by epoch on a parallel.Trainer share (mlp, cnn): the steps of one
// epoch of a data.Loader with a progress bar, stopped by a diverging loss.
package fit

import (
	"errors"
	"fmt"
	"io"
	"math"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/parallel"
)

// EpochName names epoch i (from 0) of n as both the progress bar and the
// summary line show it: "epoch 1/20".
func EpochName(i, n int) string { return fmt.Sprintf("epoch %d/%d", i+1, n) }

// Epoch takes a step of tr on every batch of epoch i (from 0) of n of
// loader, and returns the mean training loss and the number of steps. A
// progress bar counts the batches on progress, unless it is nil. A loss
// that is NaN or infinite stops the epoch with an error naming the epoch
// and the batch, suggesting a -lr smaller than lr, and saying where the
// last checkpoint of cps is; an error of the loader or of a step stops it
// too. The bar is stopped or finished before Epoch returns.
func Epoch[M any](tr *parallel.Trainer[M, data.Batch], loader *data.Loader, i, n int, progress io.Writer, lr float64, cps *cli.Checkpoints) (loss float64, steps int, err error) {
	var bar *data.Progress
	if progress != nil {
		bar = data.NewProgress(progress, loader.NumBatches(), EpochName(i, n), "batch")
	}
	sum := 0.0
	for b, err := range loader.Epoch(i) {
		if err != nil {
			bar.Stop()
			return 0, steps, err
		}
		l, err := tr.Step(b)
		if errors.Is(err, parallel.ErrNonFiniteLoss) || math.IsNaN(l) || math.IsInf(l, 0) {
			bar.Stop()
			return 0, steps, fmt.Errorf("epoch %d, batch %d: the training loss is %v (diverged; a smaller -lr than %g may train); %s",
				i+1, steps+1, l, lr, cps.Last())
		}
		if err != nil {
			bar.Stop()
			return 0, steps, err
		}
		sum += l
		steps++
		bar.Add(1)
	}
	bar.Finish()
	return sum / float64(max(steps, 1)), steps, nil
}
