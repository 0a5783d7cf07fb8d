package main

import (
	"github.com/gonox/gonox/examples/internal/curves"
	"github.com/gonox/gonox/examples/internal/plots"
)

// writePlot writes the loss curve above the accuracy curves (on an axis
// from 0 to 1) as a PNG.
func writePlot(path, title string, h *curves.Epochs) error {
	lp, err := h.LossPlot(title)
	if err != nil {
		return err
	}
	ap, err := h.AccuracyPlot(0)
	if err != nil {
		return err
	}
	return plots.WriteStacked(path, lp, ap)
}
