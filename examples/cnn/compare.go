package main

import (
	"fmt"
	"io"

	"github.com/gonox/gonox/examples/internal/report"
	"github.com/gonox/gonox/examples/internal/strategy"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
)

// compare runs one step of every strategy from identical weights and
// running statistics on the same batch and prints what each costs next to
// the single-device baseline: the loss and the largest difference of a
// gradient from one device's.
// Every strategy is set up before anything is printed: one that does not
// fit (too few devices for its mesh, channels its "tp" axis does not
// divide, a batch its data axes do not divide) is a usage error.
func compare(cfg config, devices int, model CNN, state nn.State, ds dataset, out io.Writer) error {
	entries, err := report.SetUp(func(s parallel.Strategy) (*shard.Mesh, *trainer, error) {
		mesh, err := strategy.Mesh(cfg.mesh, s, devices)
		if err != nil {
			return nil, nil, err
		}
		if err := checkTP(cfg, s, mesh); err != nil {
			return nil, nil, err
		}
		tr, err := newTrainer(model, state, cfg, s, mesh, stepsPerEpoch(cfg, ds))
		if err != nil {
			return nil, nil, err
		}
		return mesh, tr, strategy.CheckBatch(min(cfg.batch, ds.train.Len()), tr)
	})
	if err != nil {
		return err
	}
	return report.Strategies(out, entries, ds.train, cfg.batch, func(n int) string {
		return fmt.Sprintf("gonox cnn: one step of each strategy on a batch of %d from %s, model %d parameters", n, ds.name, report.ParamCount(model))
	})
}
