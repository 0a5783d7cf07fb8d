package main

import (
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"time"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/examples/internal/report"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// schedule is the learning rate of a run of the given number of steps: a
// linear warmup over the first tenth (at most 50 steps), then a cosine
// decay to a tenth of the peak at the last step.
func schedule(lr float64, steps int) optim.Schedule {
	warmup := min(50, steps/10)
	return optim.WarmupCosineDecay(0, lr, warmup, max(steps, warmup+1), lr/10)
}

// newOptimizer is Adam after clipping the gradient to a global norm of 1,
// the usual guard of an LSTM against the occasional exploding gradient.
func newOptimizer(cfg config) optim.Transform {
	return optim.Chain(optim.ClipByGlobalNorm(1), optim.Adam(schedule(cfg.lr, cfg.steps)))
}

// runner is a training run: the model, the optimizer, the loop, its
// evaluations, checkpoints and history.
type runner struct {
	cfg       config
	c         *corpus
	model     Model
	opt       optim.Transform
	state     optim.State
	sampleKey tensor.Key
	out       io.Writer
	cps       *cli.Checkpoints
	rec       runRecord // saved with every checkpoint
	first     int       // steps done before this run
	notes     []string  // lines printed after the header (resuming)
	hist      history
}

func newRunner(cfg config, c *corpus, model Model, sampleKey tensor.Key, out io.Writer) *runner {
	opt := newOptimizer(cfg)
	return &runner{cfg: cfg, c: c, model: model, opt: opt, state: opt.Init(model), sampleKey: sampleKey, out: out,
		rec: record(cfg, c), cps: &cli.Checkpoints{Dir: cfg.ckpt, Flag: "ckpt", Unit: "step", Every: min(cfg.evalEvery, cfg.steps)}}
}

// windows returns the batch of windows of n+1 characters of ids starting
// at starts, time-major: X[t, b] = ids[starts[b]+t], Y[t, b] the next one.
func windows(ids []int32, starts []int, n int) batch {
	B := len(starts)
	xs, ys := make([]int32, n*B), make([]int32, n*B)
	for b, s := range starts {
		for t := range n {
			xs[t*B+b], ys[t*B+b] = ids[s+t], ids[s+t+1]
		}
	}
	return batch{X: tensor.FromInt32(xs, n, B), Y: tensor.FromInt32(ys, n, B)}
}

// trainBatch is the batch of step (from 0): windows at random offsets of
// the training part, drawn from the seed and the step alone, so that a
// resumed run sees the batches an uninterrupted one would.
func trainBatch(cfg config, c *corpus, step int) batch {
	r := rand.New(rand.NewPCG(cfg.seed, uint64(step)))
	starts := make([]int, cfg.batch)
	for i := range starts {
		starts[i] = r.IntN(len(c.train) - cfg.context)
	}
	return windows(c.train, starts, cfg.context)
}

// validation returns the mean cross-entropy on -eval-batches batches of
// evenly spaced windows of the held-out end of the text (the plain scan:
// no gradient, nothing kept).
func (r *runner) validation() func() float64 {
	cfg, c := r.cfg, r.c
	nVal := cfg.evalBatches * cfg.batch
	last := len(c.val) - cfg.context - 1
	starts := make([]int, nVal)
	for i := range starts {
		starts[i] = i * last / max(1, nVal-1)
	}
	return func() float64 {
		sum := 0.0
		for b := range cfg.evalBatches {
			sum += r.model.Loss(windows(c.val, starts[b*cfg.batch:(b+1)*cfg.batch], cfg.context), false).Float64s()[0]
		}
		return sum / float64(cfg.evalBatches)
	}
}

// train runs the steps from r.first on, evaluating, printing and saving a
// checkpoint every -eval-every steps and at the end, then generates the
// sample and writes the plot.
func (r *runner) train() error {
	cfg := r.cfg
	validate := r.validation()
	lossAndGrad := autodiff.ValueAndGradWith(func(m Model, b batch) *tensor.Tensor { return m.Loss(b, cfg.remat) })
	cpu0 := cputime.Used()
	t0 := time.Now()
	trainSum, n := 0.0, 0
	tick := time.Now()
	for step := r.first; step < cfg.steps; step++ {
		loss, grads := lossAndGrad(r.model, trainBatch(cfg, r.c, step))
		l := loss.Float64s()[0]
		if math.IsNaN(l) || math.IsInf(l, 0) {
			return fmt.Errorf("step %d: the training loss is %v (diverged; a smaller -lr than %g may train); %s", step+1, l, cfg.lr, r.cps.Last())
		}
		r.model, r.state = optim.Step(r.opt, r.model, grads, r.state)
		trainSum += l
		n++
		if (step+1)%cfg.evalEvery != 0 && step+1 != cfg.steps {
			continue
		}
		secs := time.Since(tick).Seconds()
		val := validate()
		r.hist.add(step+1, time.Since(t0).Seconds()+r.hist.offset(), trainSum/float64(n), val)
		fmt.Fprintf(r.out, "step %5d  loss %.3f  val loss %.3f (%.3f bits/character)  %6.0f characters/s\n",
			step+1, trainSum/float64(n), val, val/math.Ln2, float64(n*cfg.batch*cfg.context)/secs)
		if cfg.ckpt != "" {
			if err := r.cps.Save(step+1, func() error { return saveCheckpoint(cfg.ckpt, step+1, r, r.hist) }); err != nil {
				return err
			}
		}
		trainSum, n = 0, 0
		tick = time.Now()
	}
	wall, cpu := time.Since(t0), cputime.Used()-cpu0
	if cfg.steps > r.first {
		report.Trained(r.out, cfg.steps-r.first, wall, cpu)
	}
	return r.finish()
}

// finish generates the sample and writes the plot.
func (r *runner) finish() error {
	cfg, c := r.cfg, r.c
	if cfg.sampleLen > 0 {
		prompt, err := c.vocab.Encode(cfg.prompt) // its characters were checked
		if err != nil {
			return err
		}
		gen := r.model.Sample(r.sampleKey, prompt, cfg.sampleLen, cfg.temperature)
		fmt.Fprintf(r.out, "sample:\n%s%s\n", cfg.prompt, c.vocab.Decode(gen))
	}
	if cfg.plot != "" && len(r.hist.step) > 0 {
		if err := r.hist.plot(cfg.plot, fmt.Sprintf("gonox charrnn on %s (LSTM %d)", c.name, cfg.hidden)); err != nil {
			return err
		}
		fmt.Fprintf(r.out, "curves written to %s\n", cfg.plot)
	}
	return nil
}
