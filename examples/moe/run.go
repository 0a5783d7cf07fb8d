package main

import (
	"errors"
	"fmt"
	"io"
	"math"
	"time"

	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/examples/internal/report"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// params is about the number of parameters of a model of this
// configuration, computed without building it (for the bound on -dim and
// the others).
func (c modelConfig) params() int {
	d, e, h := c.dim, c.experts, c.hidden
	block := 4*d*d + 4*d + 4*d + d*e + e*(2*d*h+h+d)
	if c.ffn == ffnDense {
		block = 4*d*d + 4*d + 2*d*h
	}
	return 2*c.vocab*d + c.vocab + c.context*d + c.layers*block + 2*d
}

// schedule is the learning rate of a run of the given number of steps:
// a linear warmup over the first tenth (at most 50 steps), then a cosine
// decay to a tenth of the peak at the last step.
func schedule(lr float64, steps int) optim.Schedule {
	warmup := min(50, steps/10)
	return optim.WarmupCosineDecay(0, lr, warmup, max(steps, warmup+1), lr/10)
}

// build makes the trainer of a strategy with its mesh; a mesh that does
// not fit (too many devices, a batch it does not divide, experts it does
// not split) is a usage error.
func build(cfg config, model Model, s strategy) (tr *trainer, err error) {
	defer func() {
		// A configuration the checks above missed must still end in one
		// line, not a goroutine trace.
		if p := recover(); p != nil {
			tr, err = nil, cli.Usagef("strategy %v: %v", s, p)
		}
	}()
	defer func() {
		if tr != nil {
			tr.policy = cfg.policy // -dtype: the loss casts the model
		}
	}()
	opt := optim.Adam(schedule(cfg.lr, cfg.steps))
	if s == single {
		return newTrainer(model, s, nil, opt, 0)
	}
	desc := cfg.mesh
	what := fmt.Sprintf("-mesh %q", desc)
	if desc == "" {
		desc = s.defaultMesh(len(shard.Devices()))
		what = fmt.Sprintf("the default mesh %q of strategy %v", desc, s)
	}
	mesh, err := shard.ParseMesh(desc)
	if err != nil {
		return nil, cli.Usagef("%s: %v", what, err)
	}
	if n := len(shard.Devices()); mesh.Size() > n {
		return nil, cli.Usagef("%s needs %d devices; the pool has %d (set %s)", what, mesh.Size(), n, shard.DevicesEnv)
	}
	if cfg.batch%mesh.Size() != 0 {
		return nil, cli.Usagef("-batch %d is not a multiple of the %d devices of %v", cfg.batch, mesh.Size(), mesh)
	}
	if s.dense() {
		// No experts to split.
	} else if ep := mesh.AxisSize("ep"); cfg.experts%ep != 0 {
		return nil, cli.Usagef("-experts %d does not split over the %d devices of the axis ep of %v", cfg.experts, ep, mesh)
	}
	tr, err = newTrainer(model, s, mesh, opt, 0)
	if err != nil {
		return nil, cli.Usage(fmt.Errorf("%s: %w", what, err))
	}
	return tr, nil
}

// runner is a training run: the loop, its evaluations, checkpoints and
// history.
type runner struct {
	cfg       config
	c         *corpus
	tr        *trainer
	sampleKey tensor.Key
	out       io.Writer
	errOut    io.Writer
	cps       *cli.Checkpoints
	rec       runRecord // saved with every checkpoint
	first     int       // steps done before this run
	notes     []string  // lines printed after the header (resuming)
	hist      history
}

// validation returns the mean cross-entropy on evenly spaced windows of
// the held-out end of the text (or of the token file).
func (r *runner) validation() (func() (float64, error), error) {
	cfg, c := r.cfg, r.c
	need := cfg.context + 1
	nVal := cfg.evalBatches * cfg.batch
	last := len(c.val) - need
	if c.windows != nil {
		last = c.valSet.Len() - 1
	}
	starts := make([]int, nVal)
	for i := range starts {
		starts[i] = i * last / max(1, nVal-1)
	}
	return func() (float64, error) {
		sum := 0.0
		for b := range cfg.evalBatches {
			x, y, err := c.windowsAt(starts[b*cfg.batch:(b+1)*cfg.batch], cfg.context)
			if err != nil {
				return 0, err
			}
			ce, err := r.tr.evalCE(x, y)
			if err != nil {
				return 0, err
			}
			sum += ce
		}
		return sum / float64(cfg.evalBatches), nil
	}, nil
}

// train runs the steps from r.first on, evaluating, printing and saving a
// checkpoint every -eval-every steps and at the end, then generates the
// sample and writes the plot.
func (r *runner) train() error {
	cfg, c := r.cfg, r.c
	validate, err := r.validation()
	if err != nil {
		return err
	}
	src := newBatches(cfg, c, r.first)
	defer src.close()
	cpu0 := cputime.Used()
	t0 := time.Now()
	var trainSum, dropSum float64
	var load []float64
	n := 0
	tick := time.Now()
	for step := r.first; step < cfg.steps; step++ {
		x, y, err := src.next()
		if err != nil {
			return err
		}
		st, err := r.tr.trainStep(x, y)
		if err != nil && !errors.Is(err, parallel.ErrNonFiniteLoss) {
			return err
		}
		if math.IsNaN(st.Loss) || math.IsInf(st.Loss, 0) {
			return fmt.Errorf("step %d: the training loss is %v (diverged; a smaller -lr than %g may train); %s", step+1, st.Loss, cfg.lr, r.cps.Last())
		}
		trainSum += st.CE
		dropSum += st.Dropped / float64(cfg.layers*cfg.batch*cfg.context*cfg.topK)
		if load == nil {
			load = make([]float64, len(st.Load)) // [layers·E]
		}
		for i, v := range st.Load {
			load[i] += v
		}
		n++
		if (step+1)%cfg.evalEvery != 0 && step+1 != cfg.steps {
			continue
		}
		secs := time.Since(tick).Seconds()
		val, err := validate()
		if err != nil {
			return err
		}
		frac := shares(load, cfg.experts)
		r.hist.add(step+1, trainSum/float64(n), val, frac)
		fmt.Fprintf(r.out, "step %5d  loss %.3f  val loss %.3f (%.3f bits/%s)  %6.0f tokens/s  dropped %4.1f%%  load max/mean %.2f\n",
			step+1, trainSum/float64(n), val, val/math.Ln2, c.bitsPer(), float64(n*cfg.batch*cfg.context)/secs, 100*dropSum/float64(n), balance(frac, cfg.experts))
		if cfg.ckpt != "" {
			if err := r.cps.Save(step+1, func() error { return saveCheckpoint(cfg.ckpt, step+1, r.tr, r.hist, r.rec) }); err != nil {
				return err
			}
		}
		trainSum, dropSum, load, n = 0, 0, nil, 0
		tick = time.Now()
	}
	wall, cpu := time.Since(t0), cputime.Used()-cpu0
	if cfg.steps > r.first {
		report.Trained(r.out, cfg.steps-r.first, wall, cpu)
		memoryLine(r.out)
	}
	return r.finish()
}

// finish generates the sample and writes the plot.
func (r *runner) finish() error {
	cfg, c := r.cfg, r.c
	if cfg.sampleLen > 0 {
		prompt, decode, err := c.prompt(cfg)
		if err != nil {
			return err
		}
		params := r.tr.hostParams() // gathers from every process
		if !cfg.follower {
			gen := params.sample(r.sampleKey, prompt, cfg.sampleLen, cfg.temperature)
			if decode {
				fmt.Fprintf(r.out, "sample:\n%s%s\n", cfg.prompt, c.tok.Decode(gen))
			} else {
				fmt.Fprintf(r.out, "sample (token ids: the tokenizer's vocabulary of %d is not the file's %d):\n%v\n", c.tok.Size(), c.size, gen)
			}
		}
	}
	if cfg.plot != "" && len(r.hist.step) > 0 && !cfg.follower {
		if err := r.hist.plot(cfg.plot, fmt.Sprintf("gonox moe on %s (%v)", c.name, r.tr.strat)); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "curves written to %s\n", cfg.plot)
	}
	return nil
}

// memoryLine prints the process's peak resident memory so far and the
// allocator cache's counters (tensor.ReadCacheStats): how many allocations
// reused donated storage, how many took fresh storage from the collector,
// what the cache holds and gave back, and the collection cycles it paced.
func memoryLine(out io.Writer) {
	cs := tensor.ReadCacheStats()
	fmt.Fprintf(out, "memory: peak resident %s; allocator cache %d hits, %d fresh (%s), holds %s, gave back %s, %d paced collections\n",
		report.Bytes(cputime.PeakResident()), cs.Hits, cs.Fresh, report.Bytes(cs.FreshBytes), report.Bytes(cs.HeldBytes), report.Bytes(cs.DroppedBytes), cs.PacedCycles)
}
