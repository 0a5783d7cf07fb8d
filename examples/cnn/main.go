// Command cnn trains a small convolutional network with gonox on
// Fashion-MNIST (Debian's dataset-fashion-mnist; without it, on the
// handwritten digits embedded in the module, with a one-line note), on one
// device or on a mesh of simulated devices with data, fully-sharded,
// tensor or hybrid parallelism.
//
//	go run ./examples/cnn                                   # Fashion-MNIST, one device
//	go run ./examples/cnn -strategy fsdp_tp -mesh dp=2,tp=2
//	go run ./examples/cnn -strategy compare                 # one step of each strategy, side by side
//	go run ./examples/cnn -ckpt /tmp/cnn -epochs 2          # resumable; rerun with -epochs 4 to go on
//
// The model is two blocks of a 3×3 convolution, batch normalisation, ReLU
// and 2×2 max pooling, then a linear layer. Batch normalisation keeps
// running statistics in an nn.State, which the trainer carries from step
// to step and the checkpoints save with the parameters.
//
// Each epoch prints the mean training loss, train and test accuracy,
// throughput, and the wall and CPU time its training took (on a shared
// machine the CPU time is the steadier measure of the work). At the end a
// figure (-plot) shows the loss and accuracy curves, the confusion matrix
// of the test set and a grid of misclassified test images with their true
// and predicted classes. With -ckpt, every
// epoch is saved (with the curves so far) and a rerun resumes, on any
// strategy and mesh.
//
// Every flag and gonox environment variable is checked before any work: a
// mistake exits with status 2 and one line naming the flag or variable;
// failures while running (a dataset or checkpoint that cannot be read or
// written) exit with status 1. Ctrl-C says where the last checkpoint is
// and exits with status 130.
package main

import (
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/examples/internal/curves"
	"github.com/gonox/gonox/examples/internal/fit"
	"github.com/gonox/gonox/examples/internal/report"
	"github.com/gonox/gonox/examples/internal/strategy"
	"github.com/gonox/gonox/internal/cputime"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// config is the command line: the flags, checked by parseFlags, and
// what it derives from them.
type config struct {
	data         string
	dataExplicit bool // -data was given: no fallback to the digits
	channels     [2]int
	batch        int
	epochs       int
	lr           float64
	decay        float64
	augment      bool
	seed         uint64
	strategy     string
	mesh         string
	plot         string
	ckpt         string
	quiet        bool
	dtype        string
	policy       nn.Policy
}

// Bounds of the flags: sizes a 2-core machine can hold, far beyond what
// the example needs.
const (
	maxBatch    = 1 << 16
	maxEpochs   = 100000
	maxChannels = 4096
	maxLR       = 1 // Adam moves a parameter by about lr a step
)

// trainEvalExamples is how many training examples the train accuracy of
// each epoch is measured on (the first ones): enough for a figure to
// 0.3 %, at a sixth of the cost of the 60,000 of Fashion-MNIST.
const trainEvalExamples = 10000

func main() { cli.Main("cnn", run) }

// mainExit runs the command as main does, without the process, and
// returns its exit status.
func mainExit(args []string, out, errOut io.Writer) int {
	return cli.Run("cnn", args, out, errOut, run)
}

// parseFlags parses and checks the command line; a mistake is a
// cli.UsageError naming the flag.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	f := cli.NewFlags("cnn", errOut)
	f.String(&cfg.data, "data", "fashion-mnist", `dataset: "fashion-mnist" (from `+data.FashionMNISTDir+`; the embedded digits if it is not installed), "digits" (embedded), or a directory of MNIST-style IDX files`)
	channels := ""
	f.String(&channels, "channels", "32,64", "channels after the first and the second convolution")
	f.Int(&cfg.batch, "batch", 128, 1, maxBatch, "batch size")
	f.Int(&cfg.epochs, "epochs", 6, 0, maxEpochs, "epochs")
	f.Float(&cfg.lr, "lr", 2e-3, cli.Positive(maxLR), "Adam learning rate")
	f.Float(&cfg.decay, "decay", 0.7, cli.Range{Min: 0, Max: 1, MinOpen: true}, "factor the learning rate is multiplied by over each epoch (smoothly, step by step; 1: constant)")
	f.Bool(&cfg.augment, "augment", false, "augment the training images: random crops (2 pixels of padding) and horizontal flips")
	f.Uint64(&cfg.seed, "seed", 0, "random seed (initialisation, shuffling, augmentation, the digits' split)")
	f.String(&cfg.plot, "plot", filepath.Join("out", "cnn.png"), "where to write the curves, confusion matrix and misclassified images (empty: no plot)")
	f.String(&cfg.ckpt, "ckpt", "", "checkpoint directory: save every epoch, resume from the latest step")
	f.Bool(&cfg.quiet, "quiet", false, "no progress bar")
	f.String(&cfg.dtype, "dtype", "f32", "compute dtype: f32, or bf16 / f16 mixed precision (float32 parameters, statistics and loss)")
	f.Check(func() (err error) {
		if cfg.policy, err = nn.ParsePolicy(cfg.dtype); err != nil {
			return fmt.Errorf("-dtype: %w", err)
		}
		return nil
	})
	f.Check(func() (err error) {
		cfg.channels, err = parseChannels(channels)
		return err
	})
	strategy.Flags(f, &cfg.strategy, &cfg.mesh)
	if err := f.Parse(args); err != nil {
		return cfg, err
	}
	cfg.dataExplicit = f.Changed("data")
	if !cli.Leader() {
		// Under mpirun (binary built with -tags mpi) every process trains
		// its part of the mesh; only process 0 prints and plots.
		cfg.plot, cfg.quiet = "", true
	}
	return cfg, nil
}

// parseChannels parses -channels: two positive sizes, comma-separated.
func parseChannels(s string) ([2]int, error) {
	var c [2]int
	parts := strings.Split(s, ",")
	if len(parts) != 2 {
		return c, fmt.Errorf("-channels %q: want two sizes, as in 32,64", s)
	}
	for i, part := range parts {
		n, err := strconv.Atoi(strings.TrimSpace(part))
		if err != nil || n <= 0 || n > maxChannels {
			return c, fmt.Errorf("-channels %q: %q is not an integer from 1 to %d", s, strings.TrimSpace(part), maxChannels)
		}
		c[i] = n
	}
	return c, nil
}

// trainer is the trainer of the example's model and batches.
type trainer = parallel.Trainer[CNN, data.Batch]

// newTrainer returns the trainer of strategy s on mesh, for epochs of
// stepsPerEpoch steps (the learning rate decays by cfg.decay over each).
func newTrainer(model CNN, state nn.State, cfg config, s parallel.Strategy, mesh *shard.Mesh, stepsPerEpoch int) (*trainer, error) {
	tr, err := parallel.New(model, parallel.Config[CNN, data.Batch]{
		StateLoss:  lossFunc(cfg.policy),
		ModelState: state,
		Strategy:   s,
		Mesh:       mesh,
		Optimizer:  optim.Adam(optim.Exponential(cfg.lr, stepsPerEpoch, cfg.decay)),
	})
	if err != nil {
		// The strategy does not fit the mesh or the model: a flag to change.
		return nil, cli.Usage(err)
	}
	return tr, nil
}

// stepsPerEpoch is the number of full batches of the training set (an
// epoch on a mesh, which drops the last partial batch; one device takes
// it too).
func stepsPerEpoch(cfg config, ds dataset) int { return max(ds.train.Len()/cfg.batch, 1) }

// checkTP reports channels that tensor parallelism cannot split over the
// "tp" axis of mesh.
func checkTP(cfg config, s parallel.Strategy, mesh *shard.Mesh) error {
	if s != parallel.TP && s != parallel.FSDPTP || mesh == nil {
		return nil
	}
	for i, name := range mesh.AxisNames() {
		if name != "tp" {
			continue
		}
		if n := mesh.Shape()[i]; cfg.channels[0]%n != 0 {
			return cli.Usagef("-channels %d,%d: strategy %v splits the first convolution's %d channels over the %d devices of axis \"tp\"; choose a multiple of %d",
				cfg.channels[0], cfg.channels[1], s, cfg.channels[0], n, n)
		}
	}
	return nil
}

// run is the command: it checks the flags, the paths and the data, sets
// up the strategy, resumes from -ckpt if a step is there, and trains.
func run(args []string, out, errOut io.Writer) error {
	cfg, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	if err := cli.CheckOutputs(cfg.plot, cfg.ckpt); err != nil {
		return err
	}
	devices, err := strategy.Devices()
	if err != nil {
		return err
	}
	keys := tensor.NewKey(cfg.seed).Split(3)
	ds, note, err := loadData(cfg.data, cfg.dataExplicit, data.FashionMNISTDir, keys[0])
	if err != nil {
		return err
	}
	h, w := ds.train.X.Dim(1), ds.train.X.Dim(2)
	model, state := nn.MakeWithState(newCNN(keys[1], h, w, cfg.channels, len(ds.classes)))
	if strategy.IsCompare(cfg.strategy) {
		return compare(cfg, devices, model, state, ds, out)
	}
	strat, _ := parallel.ParseStrategy(cfg.strategy) // checked by parseFlags
	mesh, err := strategy.Mesh(cfg.mesh, strat, devices)
	if err != nil {
		return err
	}
	if err := checkTP(cfg, strat, mesh); err != nil {
		return err
	}
	tr, err := newTrainer(model, state, cfg, strat, mesh, stepsPerEpoch(cfg, ds))
	if err != nil {
		return err
	}
	if err := strategy.CheckBatch(cfg.batch, tr); err != nil {
		return err
	}
	where := strategy.Where(mesh)
	r := &runner{cfg: cfg, tr: tr, ds: ds, keys: keys[2], out: out, progress: errOut,
		trainEval: ds.train.Subset(seq(min(trainEvalExamples, ds.train.Len()))),
		rec:       record(cfg, h, w, len(ds.classes), ds, fmt.Sprintf("%v on %s", strat, where)),
		cps:       &cli.Checkpoints{Dir: cfg.ckpt, Flag: "ckpt", Unit: "epoch"}}
	var notes []string
	if cfg.ckpt != "" {
		if r.first, r.hist, notes, err = restoreLatest(cfg.ckpt, tr, r.rec); err != nil {
			return err
		}
		if r.first > 0 {
			r.cps.Resumed(r.first)
		}
	}
	if note != "" {
		fmt.Fprintln(out, note)
	}
	fmt.Fprintf(out, "gonox cnn: %s, %d train / %d test images %d×%d, model %d parameters (channels %d,%d), strategy %v on %s\n",
		ds.name, ds.train.Len(), ds.test.Len(), h, w, report.ParamCount(model), cfg.channels[0], cfg.channels[1], strat, where)
	if r.first > 0 {
		fmt.Fprintf(out, "resumed from %s after epoch %d\n", cfg.ckpt, r.first)
	}
	for _, n := range notes {
		fmt.Fprintln(out, n)
	}
	stop := cli.OnInterrupt("cnn", errOut, r.cps)
	defer stop()
	if err := r.epochs(); err != nil {
		return err
	}
	if cfg.plot != "" && len(r.hist.Points(r.hist.Loss)) > 0 {
		params, mstate := tr.Params(), tr.ModelState()
		pred := predict(cfg.policy, params, mstate, ds.test)
		title := fmt.Sprintf("gonox cnn on %s (%v, %s)", ds.name, strat, plural(cfg.epochs, "epoch"))
		if err := writeFigure(cfg.plot, title, &r.hist, ds, pred); err != nil {
			return err
		}
		fmt.Fprintf(out, "curves, confusion matrix and misclassified images written to %s\n", cfg.plot)
	}
	return nil
}

// runner trains epochs and saves checkpoints.
type runner struct {
	cfg       config
	tr        *trainer
	ds        dataset
	trainEval *data.InMemory // the training examples the train accuracy is measured on
	keys      tensor.Key     // shuffling and augmentation
	out       io.Writer
	progress  io.Writer
	cps       *cli.Checkpoints
	rec       runRecord // saved with every checkpoint
	first     int       // epochs done before this run
	hist      curves.Epochs
}

// epochs trains from r.first to the last epoch, printing a line and
// saving a checkpoint after each.
func (r *runner) epochs() error {
	cfg, tr := r.cfg, r.tr
	mesh := tr.Mesh()
	loader := &data.Loader{Dataset: r.ds.train, BatchSize: cfg.batch, Shuffle: true, Key: r.keys, DropLast: mesh != nil, Prefetch: 2}
	if cfg.augment {
		loader.Augment = data.Augmentations{data.RandomCrop{Padding: 2}, data.HorizontalFlip{}}
	}
	if mesh != nil {
		loader.Sharding = tr.BatchSharding()
	}
	progress := r.progress
	if cfg.quiet {
		progress = nil
	}
	for epoch := r.first; epoch < cfg.epochs; epoch++ {
		start, cpu0 := time.Now(), cputime.Used()
		loss, n, err := fit.Epoch(tr, loader, epoch, cfg.epochs, progress, cfg.lr, r.cps)
		if err != nil {
			return err
		}
		secs, cpu := time.Since(start).Seconds(), (cputime.Used() - cpu0).Seconds()
		params, state := tr.Params(), tr.ModelState()
		trainAcc := accuracy(predict(cfg.policy, params, state, r.trainEval), r.trainEval)
		testAcc := accuracy(predict(cfg.policy, params, state, r.ds.test), r.ds.test)
		r.hist.Add(epoch+1, loss, trainAcc, testAcc)
		fmt.Fprintf(r.out, "epoch %3d/%d  loss %.4f  train %5.1f%%  test %5.1f%%  %6.0f images/s  (%.1fs, %.1f cpu-s)\n",
			epoch+1, cfg.epochs, loss, 100*trainAcc, 100*testAcc, float64(n*cfg.batch)/secs, secs, cpu)
		if cfg.ckpt != "" {
			err := r.cps.Save(epoch+1, func() error { return saveCheckpoint(cfg.ckpt, epoch+1, tr, &r.hist, r.rec) })
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// seq returns the indices 0 to n-1.
func seq(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = i
	}
	return s
}

// plural returns "1 epoch", "2 epochs": n and the noun, in the plural
// unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return fmt.Sprintf("%d %s", n, noun)
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
