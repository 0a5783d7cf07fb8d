package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/gonox/gonox/examples/internal/report"

	"github.com/gonox/gonox/shard"
)

// compare runs one step of every strategy from identical weights on the
// same batch and prints what each costs next to the single-device layer
// with the same per-sender capacity rule (one sender per device), which
// every strategy must reproduce.
func compare(cfg config, model Model, c *corpus, out io.Writer) error {
	x, y, err := c.compareBatch(cfg)
	if err != nil {
		return err
	}
	devs := len(shard.Devices())
	if cfg.batch%devs != 0 {
		return fmt.Errorf("-batch %d is not a multiple of the %d devices", cfg.batch, devs)
	}
	fmt.Fprintf(out, "gonox moe: one step of each strategy on %d×%d %s of %s, %d parameters;\n", cfg.batch, cfg.context, c.unit, c.name, report.ParamCount(model))
	fmt.Fprintf(out, "max |Δgrad| against one device with per-sender capacity over %d senders\n\n", devs)

	cfg.steps = max(cfg.steps, 2)
	base, err := build(cfg, model, single)
	if err != nil {
		return err
	}
	base.senders = devs
	_, baseGrad, err := base.lossAndGradients(x, y)
	if err != nil {
		return err
	}

	tw := tabwriter.NewWriter(out, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tmesh\tloss\tmax |Δgrad|\tstep time\tcomm/device\tragged a2a/device\tparams+opt/device\t")
	for _, s := range []strategy{single, epOnly, dpEP, fsdpEP} {
		cs := cfg
		cs.mesh = ""
		tr, err := build(cs, model, s)
		if err != nil {
			fmt.Fprintf(tw, "%v\t\t%v\t\t\t\t\t\t\n", s, err)
			continue
		}
		tr.senders = devs
		st, grad, err := tr.lossAndGradients(x, y)
		if err != nil {
			fmt.Fprintf(tw, "%v\t\t%v\t\t\t\t\t\t\n", s, err)
			continue
		}
		diff := report.MaxAbsDiff(baseGrad, grad)
		var comm, ragged int64
		meshName := "-"
		if tr.mesh != nil {
			meshName = tr.mesh.String()
			d0 := tr.mesh.Devices()[0]
			comm, ragged = tr.tr.Comm().Bytes(d0, ""), tr.tr.Comm().Bytes(d0, "ragged_all_to_all")
		}
		best := time.Duration(math.MaxInt64)
		for range 2 {
			t0 := time.Now()
			if _, err := tr.trainStep(x, y); err != nil {
				return err
			}
			best = min(best, time.Since(t0))
		}
		fmt.Fprintf(tw, "%v\t%s\t%.6f\t%.1e\t%v\t%s\t%s\t%s\t\n", s, meshName, st.Loss, diff,
			best.Round(time.Millisecond), report.Bytes(comm), report.Bytes(ragged), report.Bytes(tr.bytesPerDevice()))
	}
	return tw.Flush()
}
