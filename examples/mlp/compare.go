package main

import (
	"fmt"
	"io"
	"math"
	"text/tabwriter"
	"time"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
)

// compare runs one step of every strategy from identical weights on the
// same batch and prints what each costs next to the single-device baseline.
// A strategy that does not fit the mesh (too few devices, a batch the data
// axes do not divide) gets its error in its row.
func compare(cfg config, devices int, model nn.MLP, train *data.InMemory, out io.Writer) error {
	b, err := train.Batch(seq(min(cfg.batch, train.Len())))
	if err != nil {
		return err
	}
	base, err := newTrainer(model, parallel.Single, nil, cfg.lr)
	if err != nil {
		return err
	}
	_, baseGrad, err := base.LossAndGrad(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "gonox mlp: one step of each strategy on a batch of %d from %s, model %d parameters\n\n",
		b.X.Dim(0), cfg.data, paramCount(model))
	tw := tabwriter.NewWriter(out, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tmesh\tloss\tmax |Δgrad|\tstep time\tcomm/device\tresiduals/device\tparams+opt/device\t")
	for _, s := range parallel.Strategies() {
		mesh, err := meshFor(cfg, s, devices)
		if err != nil {
			fmt.Fprintf(tw, "%v\t%v\t%v\t\t\t\t\t\t\n", s, cfg.mesh, err)
			continue
		}
		row, err := compareRow(cfg, s, mesh, model, b, baseGrad)
		if err != nil {
			row = fmt.Sprintf("%v\t\t\t\t\t\t", err)
		}
		fmt.Fprintf(tw, "%v\t%v\t%s\t\n", s, meshName(mesh), row)
	}
	return tw.Flush()
}

// compareRow measures one strategy.
func compareRow(cfg config, s parallel.Strategy, mesh *shard.Mesh, model nn.MLP, b data.Batch, baseGrad nn.MLP) (string, error) {
	tr, err := newTrainer(model, s, mesh, cfg.lr)
	if err != nil {
		return "", err
	}
	if err := checkBatch(b.X.Dim(0), tr); err != nil {
		return "", err
	}
	if mesh != nil {
		b.X, b.Y = shard.Put(b.X, tr.BatchSharding()), shard.Put(b.Y, tr.BatchSharding())
	}
	loss, grad, err := tr.LossAndGrad(b)
	if err != nil {
		return "", err
	}
	diff := maxAbsDiff(baseGrad, grad)
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
		best.Round(10*time.Microsecond), byteSize(comm), byteSize(int64(st.Residuals.Bytes)), byteSize(st.ParamBytes+st.StateBytes)), nil
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

func maxAbsDiff(a, b nn.MLP) float64 {
	la, lb := pytree.Leaves(a), pytree.Leaves(b)
	worst := 0.0
	for i := range la {
		x, y := la[i].Float64s(), lb[i].Float64s()
		for j := range x {
			worst = math.Max(worst, math.Abs(x[j]-y[j]))
		}
	}
	return worst
}

func byteSize(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}
