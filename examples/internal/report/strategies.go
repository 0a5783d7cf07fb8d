package report

import (
	"fmt"
	"io"
	"math"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
)

// Entry is one strategy of a side-by-side table, set up: its mesh (nil
// for one device) and its trainer.
type Entry[M any] struct {
	Strategy parallel.Strategy
	Mesh     *shard.Mesh
	Trainer  *parallel.Trainer[M, data.Batch]
}

// SetUp sets up every strategy of parallel.Strategies, in that order,
// with setup, which returns its mesh and trainer. Every strategy is set
// up before anything is printed: those that do not fit (too few devices
// for a mesh, a batch the data axes do not divide) make one usage error
// of one line, "-strategy compare: " and each one's strategy and error,
// separated by "; ".
func SetUp[M any](setup func(s parallel.Strategy) (*shard.Mesh, *parallel.Trainer[M, data.Batch], error)) ([]Entry[M], error) {
	var entries []Entry[M]
	var errs []string
	for _, s := range parallel.Strategies() {
		mesh, tr, err := setup(s)
		if err != nil {
			errs = append(errs, fmt.Sprintf("%v: %v", s, err))
			continue
		}
		entries = append(entries, Entry[M]{s, mesh, tr})
	}
	if len(errs) > 0 {
		return nil, cli.Usagef("-strategy compare: %s", strings.Join(errs, "; "))
	}
	return entries, nil
}

// Strategies runs one step of every entry from its initial weights on the
// same batch, the first batch examples of train (all of them if fewer),
// and prints heading(examples in the batch), a blank line, and a table of
// what each step costs: the loss, the largest difference of its gradient
// from the first entry's (the single-device baseline), the best of three
// step times (forward, backward, update), and per device the bytes
// communicated, the residuals kept for the backward pass, and the
// parameters and optimizer state.
func Strategies[M any](out io.Writer, entries []Entry[M], train *data.InMemory, batch int, heading func(n int) string) error {
	idx := make([]int, min(batch, train.Len()))
	for i := range idx {
		idx[i] = i
	}
	b, err := train.Batch(idx)
	if err != nil {
		return err
	}
	_, baseGrad, err := entries[0].Trainer.LossAndGrad(b)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s\n\n", heading(b.X.Dim(0)))
	tw := tabwriter.NewWriter(out, 2, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "strategy\tmesh\tloss\tmax |Δgrad|\tstep time\tcomm/device\tresiduals/device\tparams+opt/device\t")
	for _, e := range entries {
		row, err := strategyRow(e.Trainer, b, baseGrad)
		if err != nil {
			return fmt.Errorf("%v: %w", e.Strategy, err)
		}
		fmt.Fprintf(tw, "%v\t%v\t%s\t\n", e.Strategy, meshName(e.Mesh), row)
	}
	return tw.Flush()
}

// strategyRow measures one strategy, from the initial weights.
func strategyRow[M any](tr *parallel.Trainer[M, data.Batch], b data.Batch, baseGrad M) (string, error) {
	if tr.Mesh() != nil {
		b.X, b.Y = shard.Put(b.X, tr.BatchSharding()), shard.Put(b.Y, tr.BatchSharding())
	}
	loss, grad, err := tr.LossAndGrad(b)
	if err != nil {
		return "", err
	}
	diff := MaxAbsDiff(baseGrad, grad)
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
		best.Round(10*time.Microsecond), Bytes(comm), Bytes(int64(st.Residuals.Bytes)), Bytes(st.ParamBytes+st.StateBytes)), nil
}

// meshName is a mesh as a -mesh flag spells it ("dp=4,tp=2"), "-" for
// none.
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
