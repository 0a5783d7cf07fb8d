// Command mlp trains an MLP classifier with gonox: on the handwritten digits
// embedded in the module by default, or on Fashion-MNIST, on one device or
// on a mesh of simulated devices with data, fully-sharded, tensor or hybrid
// parallelism.
//
//	go run ./examples/mlp                                  # digits, one device
//	go run ./examples/mlp -data fashion-mnist -epochs 5    # Debian's dataset-fashion-mnist
//	go run ./examples/mlp -strategy fsdp_tp -mesh dp=4,tp=2
//	go run ./examples/mlp -strategy compare                # one step of each strategy, side by side
//
// Each epoch prints the mean training loss, train and test accuracy and
// throughput; the curves are written to a PNG (-plot). With -ckpt, every
// epoch is saved (with the curves so far) and a rerun resumes.
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
	"github.com/gonox/gonox/examples/internal/strategy"

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
	data     string
	hidden   []int
	batch    int
	epochs   int
	lr       float64
	seed     uint64
	strategy string
	mesh     string
	plot     string
	ckpt     string
	quiet    bool
	dtype    string
	policy   nn.Policy
}

// Bounds of the flags: sizes a 2-core machine can hold, far beyond what
// the example needs.
const (
	maxBatch  = 1 << 16
	maxEpochs = 100000
	maxWidth  = 1 << 16 // of a hidden layer
	maxLayers = 32
	maxLR     = 1 // Adam moves a parameter by about lr a step
	// maxParams bounds the model: with Adam's two moments and a gradient
	// it takes 16 bytes a parameter, 4 GiB at this bound.
	maxParams = 1 << 28
)

func main() { cli.Main("mlp", run) }

// mainExit runs the command as main does, without the process, and
// returns its exit status.
func mainExit(args []string, out, errOut io.Writer) int {
	return cli.Run("mlp", args, out, errOut, run)
}

// parseFlags parses and checks the command line; a mistake is a
// cli.UsageError naming the flag.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	f := cli.NewFlags("mlp", errOut)
	f.String(&cfg.data, "data", "digits", `dataset: "digits" (embedded), "fashion-mnist" (from `+data.FashionMNISTDir+`), or a directory of MNIST-style IDX files`)
	hidden := ""
	f.String(&hidden, "hidden", "128", "comma-separated hidden layer sizes")
	f.Int(&cfg.batch, "batch", 64, 1, maxBatch, "batch size")
	f.Int(&cfg.epochs, "epochs", 20, 0, maxEpochs, "epochs")
	f.Float(&cfg.lr, "lr", 3e-3, cli.Positive(maxLR), "Adam learning rate")
	f.Uint64(&cfg.seed, "seed", 0, "random seed (initialisation, split, shuffling)")
	f.String(&cfg.plot, "plot", filepath.Join("out", "mlp.png"), "where to write the loss and accuracy curves (empty: no plot)")
	f.String(&cfg.ckpt, "ckpt", "", "checkpoint directory: save every epoch, resume from the latest step")
	f.Bool(&cfg.quiet, "quiet", false, "no progress bar")
	f.String(&cfg.dtype, "dtype", "f32", "compute dtype: f32, or bf16 / f16 mixed precision (float32 parameters and loss)")
	f.Check(func() (err error) {
		if cfg.policy, err = nn.ParsePolicy(cfg.dtype); err != nil {
			return fmt.Errorf("-dtype: %w", err)
		}
		return nil
	})
	f.Check(func() (err error) {
		cfg.hidden, err = parseHidden(hidden)
		return err
	})
	strategy.Flags(f, &cfg.strategy, &cfg.mesh)
	if err := f.Parse(args); err != nil {
		return cfg, err
	}
	if !cli.Leader() {
		// Under mpirun (binary built with -tags mpi) every process trains
		// its part of the mesh; only process 0 prints and plots.
		cfg.plot, cfg.quiet = "", true
	}
	return cfg, nil
}

// parseHidden parses -hidden: comma-separated positive sizes; an empty
// string is no hidden layer (a linear classifier).
func parseHidden(s string) ([]int, error) {
	var sizes []int
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	for i, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			return nil, fmt.Errorf("-hidden %q: size %d is empty", s, i+1)
		}
		n, err := strconv.Atoi(part)
		if err != nil || n <= 0 || n > maxWidth {
			return nil, fmt.Errorf("-hidden %q: %q is not an integer from 1 to %d", s, part, maxWidth)
		}
		sizes = append(sizes, n)
	}
	if len(sizes) > maxLayers {
		return nil, fmt.Errorf("-hidden %q: %d hidden layers, at most %d", s, len(sizes), maxLayers)
	}
	return sizes, nil
}

// newModel returns the classifier: Linear layers with the Megatron logical
// axes, whose last output (the classes) is not split.
func newModel(key tensor.Key, sizes []int) nn.MLP {
	axes := nn.MegatronAxes(len(sizes) - 1)
	axes[len(axes)-1][1] = ""
	return nn.NewMLP(key, sizes, nn.MLPOptions{Axes: axes})
}

// loss is the mean softmax cross-entropy of the model's logits.
func loss(m nn.MLP, b data.Batch) *tensor.Tensor {
	return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y))
}

// newTrainer returns the trainer of strategy s on mesh (nil for one
// device), with Adam at the constant learning rate lr.
func newTrainer(model nn.MLP, s parallel.Strategy, mesh *shard.Mesh, lr float64) (*parallel.Trainer[nn.MLP, data.Batch], error) {
	tr, err := parallel.New(model, parallel.Config[nn.MLP, data.Batch]{
		Loss:      loss,
		Strategy:  s,
		Mesh:      mesh,
		Optimizer: optim.Adam(optim.Constant(lr)),
	})
	if err != nil {
		// The strategy does not fit the mesh or the model: a flag to change.
		return nil, cli.Usage(err)
	}
	return tr, nil
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
	train, test, err := loadData(cfg.data, keys[0])
	if err != nil {
		return err
	}
	sizes := append(append([]int{train.X.Dim(1)}, cfg.hidden...), 10)
	if n := mlpParams(sizes); n > maxParams {
		return cli.Usagef("-hidden %v: a model %v has %d parameters, more than this example trains (%d)", cfg.hidden, sizes, n, maxParams)
	}
	model := newModel(keys[1], sizes).WithPolicy(cfg.policy)
	if strategy.IsCompare(cfg.strategy) {
		return compare(cfg, devices, model, train, out)
	}
	strat, _ := parallel.ParseStrategy(cfg.strategy) // checked by parseFlags
	mesh, err := strategy.Mesh(cfg.mesh, strat, devices)
	if err != nil {
		return err
	}
	tr, err := newTrainer(model, strat, mesh, cfg.lr)
	if err != nil {
		return err
	}
	if err := strategy.CheckBatch(cfg.batch, tr); err != nil {
		return err
	}
	where := strategy.Where(mesh)
	r := &runner{cfg: cfg, tr: tr, train: train, test: test, shuffle: keys[2], out: out, progress: errOut,
		rec: record(cfg, sizes, train, test, fmt.Sprintf("%v on %s", strat, where)),
		cps: &cli.Checkpoints{Dir: cfg.ckpt, Flag: "ckpt", Unit: "epoch"}}
	var notes []string
	if cfg.ckpt != "" {
		if r.first, r.hist, notes, err = restoreLatest(cfg.ckpt, tr, r.rec); err != nil {
			return err
		}
		if r.first > 0 {
			r.cps.Resumed(r.first)
		}
	}
	fmt.Fprintf(out, "gonox mlp: %s, %d train / %d test examples, model %v, strategy %v on %s\n",
		cfg.data, train.Len(), test.Len(), sizes, strat, where)
	if r.first > 0 {
		fmt.Fprintf(out, "resumed from %s after epoch %d\n", cfg.ckpt, r.first)
	}
	for _, n := range notes {
		fmt.Fprintln(out, n)
	}
	stop := cli.OnInterrupt("mlp", errOut, r.cps)
	defer stop()
	if err := r.epochs(); err != nil {
		return err
	}
	if cfg.plot != "" && len(r.hist.Points(r.hist.Loss)) > 0 {
		if err := writePlot(cfg.plot, fmt.Sprintf("gonox mlp on %s (%v)", cfg.data, strat), &r.hist); err != nil {
			return err
		}
		fmt.Fprintf(out, "curves written to %s\n", cfg.plot)
	}
	return nil
}

// mlpParams is the number of parameters of an MLP of the given layer
// sizes (weights and biases), computed without building it.
func mlpParams(sizes []int) int {
	n := 0
	for i := 1; i < len(sizes); i++ {
		n += (sizes[i-1] + 1) * sizes[i]
	}
	return n
}

// runner trains epochs and saves checkpoints.
type runner struct {
	cfg         config
	tr          *parallel.Trainer[nn.MLP, data.Batch]
	train, test *data.InMemory
	shuffle     tensor.Key
	out         io.Writer
	progress    io.Writer
	cps         *cli.Checkpoints
	rec         runRecord // saved with every checkpoint
	first       int       // epochs done before this run
	hist        curves.Epochs
}

// epochs trains from r.first to the last epoch, printing a line and
// saving a checkpoint after each.
func (r *runner) epochs() error {
	cfg, tr := r.cfg, r.tr
	mesh := tr.Mesh()
	loader := &data.Loader{Dataset: r.train, BatchSize: cfg.batch, Shuffle: true, Key: r.shuffle, DropLast: mesh != nil, Prefetch: 2}
	if mesh != nil {
		loader.Sharding = tr.BatchSharding()
	}
	progress := r.progress
	if cfg.quiet {
		progress = nil
	}
	for epoch := r.first; epoch < cfg.epochs; epoch++ {
		start := time.Now()
		loss, n, err := fit.Epoch(tr, loader, epoch, cfg.epochs, progress, cfg.lr, r.cps)
		if err != nil {
			return err
		}
		secs := time.Since(start).Seconds()
		params := tr.Params()
		trainAcc, testAcc := accuracy(params, r.train), accuracy(params, r.test)
		r.hist.Add(epoch+1, loss, trainAcc, testAcc)
		fmt.Fprintf(r.out, "epoch %3d/%d  loss %.4f  train %5.1f%%  test %5.1f%%  %8.0f samples/s  (%.1fs)\n",
			epoch+1, cfg.epochs, loss, 100*trainAcc, 100*testAcc, float64(n*cfg.batch)/secs, secs)
		if cfg.ckpt != "" {
			err := r.cps.Save(epoch+1, func() error { return saveCheckpoint(cfg.ckpt, epoch+1, tr, &r.hist, r.rec) })
			if err != nil {
				return err
			}
		}
	}
	return nil
}

// accuracy evaluates a host model on a dataset.
func accuracy(m nn.MLP, d *data.InMemory) float64 {
	const chunk = 2048
	right := 0
	for lo := 0; lo < d.Len(); lo += chunk {
		hi := min(lo+chunk, d.Len())
		x := tensor.SliceAxis(d.X, 0, lo, hi)
		y := tensor.SliceAxis(d.Y, 0, lo, hi)
		pred := tensor.ArgMax(m.Forward(x), -1)
		right += int(tensor.Sum(tensor.AsType(tensor.Equal(pred, y), tensor.Int32)).Item())
	}
	return float64(right) / float64(d.Len())
}
