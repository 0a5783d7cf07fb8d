// Command moe trains a character-level transformer language model whose
// feed-forward layers are mixtures of experts, on Isaac Newton's Opticks
// (embedded in the module) or any UTF-8 text, with expert parallelism over
// a mesh of simulated devices: experts split over the ep axis, tokens over
// dp×ep, token choices beyond an expert's capacity dropped on the sender
// (the residual stream carries those tokens), ragged all-to-all there and
// back (package expert). It trains on parallel.Trainer with the strategies
// parallel.EP and parallel.FSDPEP and a DeviceLoss that runs every MoE
// layer with expert.Forward.
//
//	go run ./examples/moe                              # dp=2,ep=4 on 8 devices
//	go run ./examples/moe -strategy single             # one device
//	go run ./examples/moe -strategy fsdp_ep -mesh dp=2,ep=4
//	go run ./examples/moe -strategy compare            # one step of each strategy
//	go run ./examples/moe -text book.txt -steps 3000   # any UTF-8 text
//
// Every evaluation prints the training loss, the validation loss in nats
// and bits per character, throughput, the fraction of dropped token
// choices and the expert-load balance; at the end a sample is generated
// from a prompt and the curves and an expert-load heat map are written to
// a PNG (-plot).
//
// Built with -tags mpi it runs under mpirun too: every process trains its
// devices of the mesh (the pool is GONOX_DEVICES per process), tokens and
// experts move between processes by ragged all-to-all, and only process 0
// prints, generates the sample and plots, with the same lines as one
// process on as many devices:
//
//	go build -tags mpi -o moe ./examples/moe
//	GONOX_DEVICES=4 mpirun -np 2 -x GONOX_DEVICES ./moe -mesh dp=2,ep=4
//
// Mistakes in the flags exit with status 2, failures while running with
// status 1; under mpirun the message names the process.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/internal/cputime"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

type config struct {
	text                                string
	strategy, mesh                      string
	steps, batch, context               int
	dim, layers, heads, experts, hidden int
	topK                                int
	capacity                            float64
	lr                                  float64
	evalEvery, evalBatches              int
	seed                                uint64
	plot, ckpt, prompt                  string
	sampleLen                           int
	temperature                         float64
	follower                            bool // a process other than 0 under mpirun: no sample, no plot
}

func main() {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "moe:", err)
		os.Exit(1)
	}
	code := mainExit(os.Args[1:], mpi.Output(os.Stdout), os.Stderr)
	if code == 0 || mpi.Size() == 1 {
		// On failure in a job of several processes, no Finalize: the
		// others may wait for this process; exiting non-zero makes mpirun
		// end the job.
		mpi.Finalize()
	}
	os.Exit(code)
}

// mainExit runs the command and returns its exit status: 2 for a mistake
// in the flags, 1 for a failure while running. Under mpirun (binary built
// with -tags mpi) every process trains its devices of the mesh; only
// process 0 prints (out is mpi.Output), generates the sample and plots,
// and an error names the process it happened on.
func mainExit(args []string, out, errOut io.Writer) int {
	cfg, err := parseFlags(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	code := 2
	if err == nil {
		cfg.follower = mpi.Rank() != 0
		err, code = run(cfg, out), 1
	}
	if err == nil {
		return 0
	}
	if mpi.Size() > 1 {
		fmt.Fprintf(errOut, "moe: process %d: %v\n", mpi.Rank(), err)
	} else {
		fmt.Fprintln(errOut, "moe:", err)
	}
	return code
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var c config
	fs := flag.NewFlagSet("moe", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&c.text, "text", "", "UTF-8 text file to train on (default: Newton's Opticks, embedded)")
	fs.StringVar(&c.strategy, "strategy", "dp_ep", "single, ep, dp_ep, fsdp_ep, or compare (one step of each, side by side)")
	fs.StringVar(&c.mesh, "mesh", "", `device mesh with axes dp and ep, e.g. "dp=2,ep=4" (default: ep=8 for ep, dp=2,ep=4 otherwise)`)
	fs.IntVar(&c.steps, "steps", 400, "training steps")
	fs.IntVar(&c.batch, "batch", 32, "sequences per batch (a multiple of the number of devices)")
	fs.IntVar(&c.context, "context", 64, "characters per sequence")
	fs.IntVar(&c.dim, "dim", 128, "model width")
	fs.IntVar(&c.layers, "layers", 4, "transformer blocks")
	fs.IntVar(&c.heads, "heads", 4, "attention heads")
	fs.IntVar(&c.experts, "experts", 8, "experts per MoE layer")
	fs.IntVar(&c.hidden, "hidden", 256, "hidden width of each expert")
	fs.IntVar(&c.topK, "topk", 2, "experts per token")
	fs.Float64Var(&c.capacity, "capacity", 1.25, "capacity factor (per-sender capacity = ceil(tokens·k/E·factor))")
	fs.Float64Var(&c.lr, "lr", 3e-3, "peak Adam learning rate (warmup, then cosine decay to a tenth)")
	fs.IntVar(&c.evalEvery, "eval-every", 100, "steps between evaluations")
	fs.IntVar(&c.evalBatches, "eval-batches", 4, "validation batches per evaluation")
	fs.Uint64Var(&c.seed, "seed", 0, "random seed")
	fs.StringVar(&c.plot, "plot", filepath.Join("out", "moe.png"), "where to write the curves and the expert-load heat map (empty: none)")
	fs.StringVar(&c.ckpt, "ckpt", "", "checkpoint directory: save at every evaluation, resume from the latest step (on any mesh)")
	fs.StringVar(&c.prompt, "prompt", "Light is ", "prompt of the generated sample")
	fs.IntVar(&c.sampleLen, "sample", 300, "characters to generate (0: none)")
	fs.Float64Var(&c.temperature, "temperature", 0.8, "sampling temperature")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	if fs.NArg() > 0 {
		return c, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	for _, v := range []struct {
		name string
		n    int
	}{{"steps", c.steps + 1}, {"batch", c.batch}, {"context", c.context}, {"dim", c.dim}, {"layers", c.layers},
		{"heads", c.heads}, {"experts", c.experts}, {"hidden", c.hidden}, {"topk", c.topK}, {"eval-every", c.evalEvery},
		{"eval-batches", c.evalBatches}, {"sample", c.sampleLen + 1}} {
		if v.n <= 0 {
			return c, fmt.Errorf("-%s must be positive", v.name)
		}
	}
	if c.topK > c.experts {
		return c, fmt.Errorf("-topk %d exceeds -experts %d", c.topK, c.experts)
	}
	if c.dim%c.heads != 0 {
		return c, fmt.Errorf("-heads %d does not divide -dim %d", c.heads, c.dim)
	}
	if !(c.capacity > 0) || !(c.lr > 0) || !(c.temperature > 0) {
		return c, fmt.Errorf("-capacity, -lr and -temperature must be positive")
	}
	return c, nil
}

// corpus is the text split by position: the first 90% trains, the rest
// validates.
type corpus struct {
	vocab      *data.Vocab
	train, val []int32
	name       string
}

func loadCorpus(path string) (*corpus, error) {
	text, name := "", "Opticks"
	if path == "" {
		text = data.Opticks()
	} else {
		b, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		if !utf8.Valid(b) {
			return nil, fmt.Errorf("%s: not valid UTF-8", path)
		}
		text, name = string(b), filepath.Base(path)
	}
	v := data.NewVocab(text)
	ids, err := v.Encode(text)
	if err != nil {
		return nil, err
	}
	cut := len(ids) * 9 / 10
	return &corpus{vocab: v, train: ids[:cut], val: ids[cut:], name: name}, nil
}

// batch returns rows windows of n+1 characters of ids starting at starts,
// as inputs and next-character targets.
func windows(ids []int32, starts []int, n int) (x, y *tensor.Tensor) {
	xs := make([]int32, 0, len(starts)*n)
	ys := make([]int32, 0, len(starts)*n)
	for _, s := range starts {
		xs = append(xs, ids[s:s+n]...)
		ys = append(ys, ids[s+1:s+n+1]...)
	}
	return tensor.FromInt32(xs, len(starts), n), tensor.FromInt32(ys, len(starts), n)
}

func run(cfg config, out io.Writer) error {
	c, err := loadCorpus(cfg.text)
	if err != nil {
		return err
	}
	need := cfg.context + 1
	if len(c.train) < need || len(c.val) < need {
		return fmt.Errorf("%s: %d characters is too short for -context %d (the last 10%% validates)", c.name, len(c.train)+len(c.val), cfg.context)
	}
	mc := modelConfig{vocab: c.vocab.Size(), context: cfg.context, dim: cfg.dim, layers: cfg.layers, heads: cfg.heads,
		experts: cfg.experts, hidden: cfg.hidden, topK: cfg.topK, capacity: cfg.capacity}
	keys := tensor.NewKey(cfg.seed).Split(2)
	model := newModel(keys[0], mc)
	if cfg.strategy == "compare" {
		return compare(cfg, model, c, out)
	}
	s, err := parseStrategy(cfg.strategy)
	if err != nil {
		return err
	}
	tr, err := build(cfg, model, s)
	if err != nil {
		return err
	}
	where := "one device"
	if tr.mesh != nil {
		where = tr.mesh.String()
	}
	fmt.Fprintf(out, "gonox moe: %s, %d train / %d validation characters, vocabulary %d\n", c.name, len(c.train), len(c.val), c.vocab.Size())
	fmt.Fprintf(out, "model: %d layers, width %d, %d heads, %d experts of %d (top-%d, capacity factor %g), context %d, %d parameters\n",
		cfg.layers, cfg.dim, cfg.heads, cfg.experts, cfg.hidden, cfg.topK, cfg.capacity, cfg.context, paramCount(model))
	fmt.Fprintf(out, "strategy %v on %s, batch %d×%d characters, %d steps\n", s, where, cfg.batch, cfg.context, cfg.steps)

	first := 0
	if cfg.ckpt != "" {
		if first, err = restoreLatest(cfg.ckpt, tr, out); err != nil {
			return err
		}
	}
	// Validation windows: evenly spaced over the held-out end of the text.
	nVal := cfg.evalBatches * cfg.batch
	valStarts := make([]int, nVal)
	for i := range valStarts {
		valStarts[i] = i * (len(c.val) - need) / max(1, nVal-1)
	}
	validate := func() (float64, error) {
		sum := 0.0
		for b := range cfg.evalBatches {
			x, y := windows(c.val, valStarts[b*cfg.batch:(b+1)*cfg.batch], cfg.context)
			ce, err := tr.evalCE(x, y)
			if err != nil {
				return 0, err
			}
			sum += ce
		}
		return sum / float64(cfg.evalBatches), nil
	}

	rng := rand.New(rand.NewPCG(cfg.seed, 0x6d6f65))
	for range first * cfg.batch { // the windows the restored steps used
		rng.IntN(len(c.train) - need + 1)
	}
	h := history{experts: cfg.experts}
	starts := make([]int, cfg.batch)
	cpu0 := cputime.Used()
	t0 := time.Now()
	var trainSum, dropSum float64
	var load []float64
	n := 0
	tick := time.Now()
	for step := first; step < cfg.steps; step++ {
		for i := range starts {
			starts[i] = rng.IntN(len(c.train) - need + 1)
		}
		x, y := windows(c.train, starts, cfg.context)
		st, err := tr.trainStep(x, y)
		if err != nil {
			return err
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
		if (step+1)%cfg.evalEvery == 0 || step+1 == cfg.steps {
			secs := time.Since(tick).Seconds()
			val, err := validate()
			if err != nil {
				return err
			}
			frac := shares(load, cfg.experts)
			h.add(step+1, trainSum/float64(n), val, frac)
			fmt.Fprintf(out, "step %5d  loss %.3f  val loss %.3f (%.3f bits/char)  %6.0f tokens/s  dropped %4.1f%%  load max/mean %.2f\n",
				step+1, trainSum/float64(n), val, val/math.Ln2, float64(n*cfg.batch*cfg.context)/secs, 100*dropSum/float64(n), balance(frac, cfg.experts))
			if cfg.ckpt != "" {
				if err := saveCheckpoint(cfg.ckpt, step+1, tr); err != nil {
					return err
				}
			}
			trainSum, dropSum, load, n = 0, 0, nil, 0
			tick = time.Now()
		}
	}
	wall, cpu := time.Since(t0), cputime.Used()-cpu0
	if len(h.step) > 0 {
		fmt.Fprintf(out, "trained %d steps in %.1fs wall, %.1fs CPU (%.2f cores busy)\n", cfg.steps-first, wall.Seconds(), cpu.Seconds(), cpu.Seconds()/wall.Seconds())
	}
	if cfg.sampleLen > 0 {
		prompt, err := c.vocab.Encode(cfg.prompt)
		if err != nil {
			return fmt.Errorf("-prompt: %w", err)
		}
		if len(prompt) == 0 {
			prompt = c.train[:1]
		}
		params := tr.hostParams() // gathers from every process
		if !cfg.follower {
			gen := params.sample(keys[1], prompt, cfg.sampleLen, cfg.temperature)
			fmt.Fprintf(out, "sample:\n%s%s\n", cfg.prompt, c.vocab.Decode(gen))
		}
	}
	if cfg.plot != "" && len(h.step) > 0 && !cfg.follower {
		if err := h.plot(cfg.plot, fmt.Sprintf("gonox moe on %s (%v)", c.name, s)); err != nil {
			return err
		}
		fmt.Fprintf(out, "curves written to %s\n", cfg.plot)
	}
	return nil
}

// build makes the trainer of a strategy with its mesh; configuration
// mistakes (a mesh that does not fit) are errors.
func build(cfg config, model Model, s strategy) (tr *trainer, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	opt := optim.Adam(optim.WarmupCosineDecay(0, cfg.lr, min(50, cfg.steps/10), max(cfg.steps, min(50, cfg.steps/10)+1), cfg.lr/10))
	if s == single {
		return newTrainer(model, s, nil, opt, 0)
	}
	desc := cfg.mesh
	if desc == "" {
		desc = s.defaultMesh(len(shard.Devices()))
	}
	mesh, err := shard.ParseMesh(desc)
	if err != nil {
		return nil, err
	}
	if cfg.batch%mesh.Size() != 0 {
		return nil, fmt.Errorf("-batch %d is not a multiple of the %d devices of %v", cfg.batch, mesh.Size(), mesh)
	}
	return newTrainer(model, s, mesh, opt, 0)
}

// shares turns per-(layer, expert) counts into each expert's share of its
// layer's token choices.
func shares(load []float64, experts int) []float64 {
	out := make([]float64, len(load))
	for l := 0; l < len(load); l += experts {
		s := 0.0
		for _, x := range load[l : l+experts] {
			s += x
		}
		for e := range experts {
			out[l+e] = load[l+e] / math.Max(s, 1)
		}
	}
	return out
}

// balance is the load of the busiest expert over the mean load, averaged
// over the layers: 1 when balanced, E when one expert gets everything.
func balance(shares []float64, experts int) float64 {
	sum := 0.0
	for l := 0; l < len(shares); l += experts {
		m := 0.0
		for _, f := range shares[l : l+experts] {
			m = math.Max(m, f)
		}
		sum += m * float64(experts)
	}
	return sum / float64(len(shares)/experts)
}

func paramCount(m Model) int {
	n := 0
	for _, x := range pytree.Leaves(m) {
		n += x.Size()
	}
	return n
}
