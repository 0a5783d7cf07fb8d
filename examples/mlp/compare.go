package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gonox/gonox/examples/internal/cli"
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
	type entry struct {
		s    parallel.Strategy
		mesh *shard.Mesh
		tr   *parallel.Trainer[nn.MLP, data.Batch]
	}
	var entries []entry
	var errs []string
	for _, s := range parallel.Strategies() {
		mesh, err := strategy.Mesh(cfg.mesh, s, devices)
		var tr *parallel.Trainer[nn.MLP, data.Batch]
		if err == nil {
			tr, err = newTrainer(model, s, mesh, cfg.lr)
		}
		if err == nil {
			err = strategy.CheckBatch(min(cfg.batch, train.Len()), tr)
		}
		if err != nil {
			errs = append(errs, fmt.Sprintf("%v: %v", s, err))
			continue
		}
		entries = append(entries, entry{s, mesh, tr})
	}
	if len(errs) > 0 {
		// One line, as every usage error.
		return cli.Usagef("-strategy compare: %s", strings.Join(errs, "; "))
	}
	b, err := train.Batch(seq(min(cfg.batch, train.Len())))
	if err != nil {
		return err
	}
	_, baseGrad, err := entries[0].tr.LossAndGrad(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "gonox mlp: one step of each strategy on a batch of %d from %s, model %d parameters\n\n",
		b.X.Dim(0), cfg.data, paramCount(model))
	tw := tabwriter.NewWriter(out, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tmesh\tloss\tmax |Δgrad|\tstep time\tcomm/device\tresiduals/device\tparams+opt/device\t")
	for _, e := range entries {
		row, err := compareRow(e.tr, b, baseGrad)
		if err != nil {
			return fmt.Errorf("%v: %w", e.s, err)
		}
		fmt.Fprintf(tw, "%v\t%v\t%s\t\n", e.s, meshName(e.mesh), row)
	}
	return tw.Flush()
}

// compareRow measures one strategy, from the initial weights.
func compareRow(tr *parallel.Trainer[nn.MLP, data.Batch], b data.Batch, baseGrad nn.MLP) (string, error) {
	if tr.Mesh() != nil {
		b.X, b.Y = shard.Put(b.X, tr.BatchSharding()), shard.Put(b.Y, tr.BatchSharding())
	}
	loss, grad, err := tr.LossAndGrad(b)
	if err != nil {
		return "", err
	}
	diff := report.MaxAbsDiff(baseGrad, grad)
	// Time a full step (forward, backward, update), best of three.
	best := time.Duration(math.MaxInt64)
	for range 3 {
		t0 := time.Now()
		if _, err := tr.Step(b); err != nil {
			return "", err
		}
		best = min(best, time.Since(t0))
	}
	st, err := tr.Stats(b)
	if err != nil {
		return "", err
	}
	var comm int64
	for _, v := range st.CommBytes {
		comm += v
	}
	return fmt.Sprintf("%.6f\t%.1e\t%v\t%s\t%s\t%s", loss, diff,
		best.Round(10*time.Microsecond), report.Bytes(comm), report.Bytes(int64(st.Residuals.Bytes)), report.Bytes(st.ParamBytes+st.StateBytes)), nil
}

func meshName(m *shard.Mesh) string {
	if m == nil {
		return "-"
	}
	s := ""
	for i, n := range m.AxisNames() {
		if i > 0 {
			s += ","
		}
		s += fmt.Sprintf("%s=%d", n, m.Shape()[i])
	}
	return s
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
