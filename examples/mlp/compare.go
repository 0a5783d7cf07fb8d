package main

import (
	"fmt"
	"io"

	"github.com/gonox/gonox/examples/internal/report"
	"github.com/gonox/gonox/examples/internal/strategy"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
)

// compare runs one step of every strategy from identical weights on the
// same batch and prints what each costs next to the single-device baseline.
// Every strategy is set up before anything is printed: one that does not
// fit (too few devices for its mesh, a batch its data axes do not divide)
// is a usage error.
func compare(cfg config, devices int, model nn.MLP, train *data.InMemory, out io.Writer) error {
	entries, err := report.SetUp(func(s parallel.Strategy) (*shard.Mesh, *parallel.Trainer[nn.MLP, data.Batch], error) {
		mesh, err := strategy.Mesh(cfg.mesh, s, devices)
		if err != nil {
			return nil, nil, err
		}
		tr, err := newTrainer(model, s, mesh, cfg.lr)
		if err != nil {
			return nil, nil, err
		}
		return mesh, tr, strategy.CheckBatch(min(cfg.batch, train.Len()), tr)
	})
	if err != nil {
		return err
	}
	return report.Strategies(out, entries, train, cfg.batch, func(n int) string {
		return fmt.Sprintf("gonox mlp: one step of each strategy on a batch of %d from %s, model %d parameters", n, cfg.data, report.ParamCount(model))
	})
}
