// Package report holds what the examples print alike: the side-by-side
// table of one step of every parallel.Strategies strategy (-strategy
// compare: SetUp, Strategies), the small helpers its rows and other
// tables are made of (MaxAbsDiff, Bytes, ParamCount), and the line that
// ends a run of training steps (Trained).
package report

import (
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gonox/gonox/pytree"
)

// MaxAbsDiff returns the largest absolute difference between matching
// elements of the tensor leaves of two trees of the same structure (host
// tensors). It panics if the trees have different numbers of leaves or a
// pair of leaves different sizes.
func MaxAbsDiff(a, b any) float64 {
	la, lb := pytree.Leaves(a), pytree.Leaves(b)
	if len(la) != len(lb) {
		panic(fmt.Sprintf("report.MaxAbsDiff: %d leaves against %d", len(la), len(lb)))
	}
	worst := 0.0
	for i := range la {
		x, y := la[i].Float64s(), lb[i].Float64s()
		if len(x) != len(y) {
			panic(fmt.Sprintf("report.MaxAbsDiff: leaf %d is %v against %v", i, la[i], lb[i]))
		}
		for j := range x {
			worst = math.Max(worst, math.Abs(x[j]-y[j]))
		}
	}
	return worst
}

// Trained prints the line that ends a run of steps training steps: the
// wall time they took, the CPU time the process used meanwhile, and their
// ratio, the cores kept busy.
func Trained(out io.Writer, steps int, wall, cpu time.Duration) {
	fmt.Fprintf(out, "trained %d steps in %.1fs wall, %.1fs CPU (%.2f cores busy)\n", steps, wall.Seconds(), cpu.Seconds(), cpu.Seconds()/wall.Seconds())
}

// ParamCount is the number of elements of the tensor leaves of a tree:
// the parameters of a model.
func ParamCount(tree any) int {
	n := 0
	for _, x := range pytree.Leaves(tree) {
		n += x.Size()
	}
	return n
}

// Bytes formats a byte count as B, KiB (one decimal) or MiB (two).
func Bytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
