package parallel_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// BenchmarkDPStep times a DP training step (forward, backward, Adam) of
// the MLP 784-1024-1024-10 on batches of 256 on meshes of 1, 2 and 8
// simulated devices, the same step with its weight gradients unfolded
// (Config.UnfoldedGradients: computed whole, then reduce-scattered), the
// same step with its updated blocks copied into the all-gather's result
// rather than written there by Adam (CopyUpdatedBlocks), the same step
// with its new moments in fresh storage rather than over the old ones
// (FreshState), the same step with every device's forward products
// computed alone (UnsharedForward), and its gradient phase alone.
func BenchmarkDPStep(b *testing.B) {
	for _, n := range []int{1, 2, 8} {
		mesh, trainer, placed := dpBench(b, n)
		tr, unf := trainer(false), trainer(true)
		// step: the whole training step; unfolded: the same without the
		// fold; copied: the same with the updated blocks copied; after:
		// the same with the update after every folded gradient (not
		// consuming them as they are computed); fresh: the same with the
		// new moments in fresh storage; grad: its loss and gradient alone (forward, backward and
		// the all-reduce, without the Adam update).
		for _, phase := range []struct {
			name string
			tr   *parallel.Trainer[nn.MLP, batch]
			run  func() error
		}{
			{"step", tr, func() error { _, err := tr.Step(placed); return err }},
			{"unfolded", unf, func() error { _, err := unf.Step(placed); return err }},
			{"copied", tr, func() error {
				defer parallel.CopyUpdatedBlocks()()
				_, err := tr.Step(placed)
				return err
			}},
			{"after", tr, func() error {
				defer parallel.UpdateAfterFolds()()
				_, err := tr.Step(placed)
				return err
			}},
			{"unshared", tr, func() error {
				defer parallel.UnsharedForward()()
				_, err := tr.Step(placed)
				return err
			}},
			{"fresh", tr, func() error {
				defer parallel.FreshState()()
				_, err := tr.Step(placed)
				return err
			}},
			{"grad", tr, func() error { _, _, err := tr.LossAndGrad(placed); return err }},
		} {
			b.Run(fmt.Sprintf("devices=%d/%s", n, phase.name), func(b *testing.B) {
				if err := phase.run(); err != nil {
					b.Fatal(err)
				}
				var m meetings
				cpu0 := cputime.Used()
				for b.Loop() {
					_ = phase.run()
					m.add(phase.tr.Comm(), mesh) // each step resets the trainer's Comm
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
				// CPU time of the process (all devices) per step: steadier
				// than wall time on a shared machine.
				b.ReportMetric((cputime.Used()-cpu0).Seconds()/float64(b.N)*1e3, "cpu-ms/step")
				m.report(b, mesh)
			})
		}
	}
}

// dpBench returns BenchmarkDPStep's mesh of n devices, a function making
// its trainer (of the MLP 784-1024-1024-10 with Adam, folded or not) and
// its batch of 256 rows, placed.
func dpBench(b *testing.B, n int) (*shard.Mesh, func(unfolded bool) *parallel.Trainer[nn.MLP, batch], batch) {
	m, _ := guideModel([]int{784, 1024, 1024, 10}, 1, 4)
	_, bt := guideModel([]int{784, 10}, 256, 5)
	mesh := shard.NewMesh([]int{n}, []string{"dp"})
	trainer := func(unfolded bool) *parallel.Trainer[nn.MLP, batch] {
		tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Strategy: parallel.DP, Mesh: mesh,
			Optimizer: optim.Adam(optim.Constant(1e-3)), UnfoldedGradients: unfolded})
		if err != nil {
			b.Fatal(err)
		}
		return tr
	}
	sh := trainer(false).BatchSharding()
	return mesh, trainer, batch{shard.Put(bt.X, sh), shard.Put(bt.Y, sh)}
}

// BenchmarkDPStepTimeline is BenchmarkDPStep's step ("step") and the step
// updating after every folded gradient ("after") on 2 and 8 devices, with
// the time, averaged over the devices and the steps, at which a device
// has done its forward and backward passes ("bwd-ms"), waited for its
// gradients but those the update consumes as their folds compute them
// ("reduced-ms"), updated its blocks, every fold computed
// ("updated-ms"), and all-gathered the parameters ("gathered-ms"), in
// milliseconds after Trainer.Step was called, and when the first and the
// last device of a step had done its backward pass ("first-bwd-ms",
// "last-bwd-ms"). With more devices than cores the devices finish their
// backward passes a core's pair at a time, and a pair goes on to its folds
// before the next one runs: bwd-ms, an average over the devices, then lies
// well after the first device's end (see docs/performance.md, dp8c's
// paragraph in "The 8-device forward products computed by the devices
// together"). Meaningful only where the devices have the cores to
// themselves (an idle machine, or chrt).
func BenchmarkDPStepTimeline(b *testing.B) {
	names := []string{"bwd-ms", "reduced-ms", "updated-ms", "gathered-ms"}
	for _, n := range []int{2, 8} {
		_, trainer, placed := dpBench(b, n)
		tr := trainer(false)
		for _, after := range []bool{false, true} {
			name := "step"
			if after {
				name = "after"
			}
			b.Run(fmt.Sprintf("devices=%d/%s", n, name), func(b *testing.B) {
				if after {
					defer parallel.UpdateAfterFolds()()
				}
				if _, err := tr.Step(placed); err != nil {
					b.Fatal(err)
				}
				var mu sync.Mutex
				var t0 time.Time
				sums := make([]time.Duration, len(names))
				var first, last, firstSum, lastSum time.Duration // a step's first and last backward pass done
				defer parallel.TracePhases(func(phase int) {
					mu.Lock()
					d := time.Since(t0)
					sums[phase] += d
					if phase == 0 {
						if first < 0 || d < first {
							first = d
						}
						last = max(last, d)
					}
					mu.Unlock()
				})()
				for b.Loop() {
					mu.Lock()
					t0, first, last = time.Now(), -1, 0
					mu.Unlock()
					_, _ = tr.Step(placed)
					mu.Lock()
					firstSum, lastSum = firstSum+first, lastSum+last
					mu.Unlock()
				}
				b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
				for i, d := range sums {
					b.ReportMetric(d.Seconds()*1e3/float64(b.N*n), names[i])
				}
				b.ReportMetric(firstSum.Seconds()*1e3/float64(b.N), "first-bwd-ms")
				b.ReportMetric(lastSum.Seconds()*1e3/float64(b.N), "last-bwd-ms")
			})
		}
	}
}

// meetings sums, over a benchmark's steps, the collectives issued (each
// counted once for all devices) and the time the devices waited in them:
// in one process, the time they waited for slower devices.
type meetings struct {
	calls int
	wait  time.Duration
}

// add adds the last step's counts of comm, which the trainer resets at
// every step.
func (m *meetings) add(comm *shard.Comm, mesh *shard.Mesh) {
	for _, k := range comm.Kinds() {
		m.calls += comm.Calls(k)
	}
	for _, d := range mesh.Devices() {
		m.wait += comm.Waited(d)
	}
}

// report reports the collectives per step ("colls/step") and the time a
// device waited in them per step, averaged over the devices
// ("wait-ms/step").
func (m *meetings) report(b *testing.B, mesh *shard.Mesh) {
	steps := float64(b.N)
	b.ReportMetric(float64(m.calls)/steps, "colls/step")
	b.ReportMetric(m.wait.Seconds()/float64(mesh.Size())/steps*1e3, "wait-ms/step")
}

// path forces a strategy onto the shard.Map step or onto sharding
// propagation, to compare the two.
type path struct {
	parallel.Strategy
	mapStep bool
}

func (p path) Place(mesh *shard.Mesh, params any) (parallel.Placement, error) {
	pl, err := p.Strategy.Place(mesh, params)
	pl.MapStep = p.mapStep
	return pl, err
}

// BenchmarkStep times a training step (forward, backward, Adam) for each
// strategy on 8 devices (DP and FSDP also on 2), on both paths: the shard.Map step ("map") and
// sharding propagation ("prop"), for two MLPs: "large", 784-1024-1024-10
// on batches of 256, and "small", 64-128-10 on batches of 64 (the model of
// examples/mlp -strategy compare). It reports wall and CPU time per step
// (CPU time is steadier on a shared machine) and the bytes device 0 sends.
// The strategies ship with the path that wins here.
func BenchmarkStep(b *testing.B) {
	for _, size := range []struct {
		name  string
		sizes []int
		batch int
	}{{"large", []int{784, 1024, 1024, 10}, 256}, {"small", []int{64, 128, 10}, 64}} {
		m, _ := guideModel(size.sizes, 1, 4)
		m = unsplitOutput(m)
		_, bt := guideModel([]int{size.sizes[0], size.sizes[len(size.sizes)-1]}, size.batch, 5)
		for _, c := range []struct {
			s    parallel.Strategy
			mesh *shard.Mesh
		}{
			{parallel.DP, shard.NewMesh([]int{2}, []string{"dp"})},
			{parallel.DP, shard.NewMesh([]int{8}, []string{"dp"})},
			{parallel.FSDP, shard.NewMesh([]int{2}, []string{"dp"})},
			{parallel.FSDP, shard.NewMesh([]int{8}, []string{"dp"})},
			{parallel.TP, shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})},
			{parallel.FSDPTP, shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})},
		} {
			s, mesh := c.s, c.mesh
			for _, mapStep := range []bool{true, false} {
				name := map[bool]string{true: "map", false: "prop"}[mapStep]
				b.Run(fmt.Sprintf("%s/%v/devices=%d/%s", size.name, s, mesh.Size(), name), func(b *testing.B) {
					tr, err := parallel.New(m, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Strategy: path{s, mapStep}, Mesh: mesh,
						Optimizer: optim.Adam(optim.Constant(1e-3))})
					if err != nil {
						b.Fatal(err)
					}
					placed := batch{shard.Put(bt.X, tr.BatchSharding()), shard.Put(bt.Y, tr.BatchSharding())}
					if _, err := tr.Step(placed); err != nil {
						b.Fatal(err)
					}
					cpu0 := cputime.Used()
					for b.Loop() {
						_, _ = tr.Step(placed)
					}
					b.ReportMetric(b.Elapsed().Seconds()/float64(b.N)*1e3, "ms/step")
					b.ReportMetric((cputime.Used()-cpu0).Seconds()/float64(b.N)*1e3, "cpu-ms/step")
					var sent int64
					for _, k := range tr.Comm().Kinds() {
						sent += tr.Comm().Bytes(mesh.Devices()[0], k)
					}
					b.ReportMetric(float64(sent)/(1<<10), "KiB/step")
				})
			}
		}
	}
}

// unsplitOutput drops the logical name of the last layer's output
// dimension (the classes), which TP then leaves whole, as examples/mlp
// does.
func unsplitOutput(m nn.MLP) nn.MLP {
	m.Layers = append([]nn.Linear(nil), m.Layers...)
	last := &m.Layers[len(m.Layers)-1]
	last.W = tensor.WithLogicalAxes(last.W, last.W.LogicalAxes()[0], "")
	last.B = tensor.WithLogicalAxes(last.B, "")
	return m
}
