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
// Mistakes in the flags or in $GONOX_DEVICES are reported before anything
// else is printed, with exit status 2; failures while running (a dataset or
// checkpoint that cannot be read or written) exit with status 1.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/shard/mpi"
	"github.com/gonox/gonox/tensor"
)

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
	policy   nn.Policy
}

// usageError is a mistake in the command line or the environment: exit
// status 2.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usagef(format string, args ...any) error { return usageError{fmt.Errorf(format, args...)} }

func main() {
	if err := mpi.Init(); err != nil {
		fmt.Fprintln(os.Stderr, "mlp:", err)
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

// mainExit runs the command and returns its exit status.
func mainExit(args []string, out, errOut io.Writer) int {
	cfg, err := parseFlags(args, errOut)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err == nil && mpi.Rank() != 0 {
		// Under mpirun (binary built with -tags mpi) every process trains
		// its part of the mesh; only process 0 prints and plots.
		cfg.plot, cfg.quiet = "", true
	}
	if err == nil {
		err = run(cfg, out, errOut)
	}
	if err == nil {
		return 0
	}
	if mpi.Size() > 1 {
		fmt.Fprintf(errOut, "mlp: process %d: %v\n", mpi.Rank(), err)
	} else {
		fmt.Fprintln(errOut, "mlp:", err)
	}
	if errors.As(err, new(usageError)) {
		return 2
	}
	return 1
}

func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	fs := flag.NewFlagSet("mlp", flag.ContinueOnError)
	fs.SetOutput(errOut)
	fs.StringVar(&cfg.data, "data", "digits", `dataset: "digits" (embedded), "fashion-mnist" (from `+data.FashionMNISTDir+`), or a directory of MNIST-style IDX files`)
	hidden := fs.String("hidden", "128", "comma-separated hidden layer sizes")
	fs.IntVar(&cfg.batch, "batch", 64, "batch size")
	fs.IntVar(&cfg.epochs, "epochs", 20, "epochs")
	fs.Float64Var(&cfg.lr, "lr", 3e-3, "Adam learning rate")
	fs.Uint64Var(&cfg.seed, "seed", 0, "random seed (initialisation, split, shuffling)")
	fs.StringVar(&cfg.strategy, "strategy", "single", "single, dp, fsdp, tp, fsdp_tp, or compare (one step of each, side by side)")
	fs.StringVar(&cfg.mesh, "mesh", "", `device mesh, e.g. "dp=8" or "dp=4,tp=2" (default: dp=8, or dp=4,tp=2 for tp and fsdp_tp)`)
	fs.StringVar(&cfg.plot, "plot", filepath.Join("out", "mlp.png"), "where to write the loss and accuracy curves (empty: no plot)")
	fs.StringVar(&cfg.ckpt, "ckpt", "", "checkpoint directory: save every epoch, resume from the latest step")
	fs.BoolVar(&cfg.quiet, "quiet", false, "no progress bar")
	dtype := fs.String("dtype", "f32", "compute dtype: f32, or bf16 / f16 mixed precision (float32 parameters and loss)")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return cfg, err
		}
		return cfg, usageError{err}
	}
	if fs.NArg() > 0 {
		return cfg, usagef("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.policy, err = nn.ParsePolicy(*dtype); err != nil {
		return cfg, usagef("-dtype: %w", err)
	}
	for _, s := range strings.Split(*hidden, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return cfg, usagef("-hidden %q: %q is not a positive integer", *hidden, s)
		}
		cfg.hidden = append(cfg.hidden, n)
	}
	switch {
	case cfg.batch <= 0:
		return cfg, usagef("-batch %d: want a positive batch size", cfg.batch)
	case cfg.epochs < 0:
		return cfg, usagef("-epochs %d: want 0 or more epochs", cfg.epochs)
	case !(cfg.lr > 0) || math.IsInf(cfg.lr, 0):
		return cfg, usagef("-lr %v: want a positive learning rate", cfg.lr)
	case cfg.mesh != "" && strings.EqualFold(cfg.strategy, "single"):
		return cfg, usagef("-mesh %q: -strategy single trains on one device; choose dp, fsdp, tp or fsdp_tp to use a mesh", cfg.mesh)
	}
	if !strings.EqualFold(cfg.strategy, "compare") {
		if _, err := parallel.ParseStrategy(cfg.strategy); err != nil {
			return cfg, usagef("-strategy: %v", err)
		}
	}
	return cfg, nil
}

// loadData returns the train and test sets.
func loadData(name string, key tensor.Key) (train, test *data.InMemory, err error) {
	switch name {
	case "digits":
		train, test = data.DigitsSplit(key, 0.2)
		return train, test, nil
	case "fashion-mnist":
		train, test, err = data.LoadFashionMNIST(data.FashionMNISTDir)
		if err != nil {
			err = fmt.Errorf("%w (on Debian: apt-get install dataset-fashion-mnist)", err)
		}
	default:
		train, test, err = data.LoadMNIST(name)
	}
	if err != nil {
		return nil, nil, err
	}
	return train.Flatten(), test.Flatten(), nil
}

// meshFor returns the -mesh mesh, or the default one for strategy s on n
// devices: every device on "dp", or half of them with "tp" of 2 for the
// tensor-parallel strategies. Single has no mesh.
func meshFor(cfg config, s parallel.Strategy, n int) (*shard.Mesh, error) {
	if s == parallel.Single {
		return nil, nil
	}
	desc := cfg.mesh
	if desc == "" {
		desc = fmt.Sprintf("dp=%d", n)
		if s == parallel.TP || s == parallel.FSDPTP {
			desc = fmt.Sprintf("dp=%d,tp=2", max(n/2, 1))
		}
	}
	what := fmt.Sprintf("-mesh %q", desc)
	if cfg.mesh == "" {
		what = fmt.Sprintf("the default mesh %q of strategy %v", desc, s)
	}
	m, err := shard.ParseMesh(desc)
	if err != nil {
		return nil, usagef("%s: %v", what, err)
	}
	if m.Size() < 1 || m.Size() > n {
		return nil, usagef("%s: %d devices; the pool has %d (set %s)", what, m.Size(), n, shard.DevicesEnv)
	}
	return m, nil
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

func newTrainer(model nn.MLP, s parallel.Strategy, mesh *shard.Mesh, lr float64) (*parallel.Trainer[nn.MLP, data.Batch], error) {
	tr, err := parallel.New(model, parallel.Config[nn.MLP, data.Batch]{
		Loss:      loss,
		Strategy:  s,
		Mesh:      mesh,
		Optimizer: optim.Adam(optim.Constant(lr)),
	})
	if err != nil {
		// The strategy does not fit the mesh or the model: a flag to change.
		return nil, usageError{err}
	}
	return tr, nil
}

// checkBatch reports a batch size the data axes do not divide.
func checkBatch(batch int, tr *parallel.Trainer[nn.MLP, data.Batch]) error {
	if tr.Mesh() == nil || len(tr.DataAxes()) == 0 {
		return nil
	}
	if n := tr.Mesh().AxisSize(tr.DataAxes()...); batch%n != 0 {
		return usagef("-batch %d is not divisible by the %d devices of the data axes %v of %v", batch, n, tr.DataAxes(), tr.Mesh())
	}
	return nil
}

// epochName names epoch i (from 0) of n as both the progress bar and the
// summary line show it: "epoch 1/20".
func epochName(i, n int) string { return fmt.Sprintf("epoch %d/%d", i+1, n) }

func run(cfg config, out, progress io.Writer) error {
	devices, err := shard.DevicesFromEnv()
	if err != nil {
		return usageError{err}
	}
	if shard.ProcessCount() > 1 {
		// Under mpirun $GONOX_DEVICES counts one process's devices; the
		// meshes take theirs from the whole pool.
		devices = len(shard.Devices())
	}
	keys := tensor.NewKey(cfg.seed).Split(3)
	train, test, err := loadData(cfg.data, keys[0])
	if err != nil {
		return err
	}
	sizes := append(append([]int{train.X.Dim(1)}, cfg.hidden...), 10)
	model := newModel(keys[1], sizes).WithPolicy(cfg.policy)
	if strings.EqualFold(cfg.strategy, "compare") {
		return compare(cfg, devices, model, train, out)
	}
	strategy, _ := parallel.ParseStrategy(cfg.strategy) // checked by parseFlags
	mesh, err := meshFor(cfg, strategy, devices)
	if err != nil {
		return err
	}
	tr, err := newTrainer(model, strategy, mesh, cfg.lr)
	if err != nil {
		return err
	}
	if err := checkBatch(cfg.batch, tr); err != nil {
		return err
	}
	if cfg.ckpt != "" {
		if err := checkWritable(cfg.ckpt); err != nil {
			return err
		}
	}
	var hist history
	first := 0
	if cfg.ckpt != "" {
		if first, hist, err = restoreLatest(cfg.ckpt, tr); err != nil {
			return err
		}
	}

	where := "one device"
	if mesh != nil {
		where = mesh.String()
	}
	fmt.Fprintf(out, "gonox mlp: %s, %d train / %d test examples, model %v, strategy %v on %s\n",
		cfg.data, train.Len(), test.Len(), sizes, strategy, where)
	if first > 0 {
		fmt.Fprintf(out, "resumed from %s after epoch %d\n", cfg.ckpt, first)
	}

	loader := &data.Loader{Dataset: train, BatchSize: cfg.batch, Shuffle: true, Key: keys[2], DropLast: mesh != nil, Prefetch: 2}
	if mesh != nil {
		s := tr.BatchSharding()
		loader.Place = func(b data.Batch) (data.Batch, error) {
			b.X, b.Y = shard.Put(b.X, s), shard.Put(b.Y, s)
			return b, nil
		}
	}
	for epoch := first; epoch < cfg.epochs; epoch++ {
		var bar *data.Progress
		if !cfg.quiet {
			bar = data.NewProgress(progress, loader.NumBatches(), epochName(epoch, cfg.epochs), "batch")
		}
		start := time.Now()
		sum, n := 0.0, 0
		for b, err := range loader.Epoch(epoch) {
			if err != nil {
				bar.Stop()
				return err
			}
			l, err := tr.Step(b)
			if err != nil {
				bar.Stop()
				return err
			}
			sum += l
			n++
			bar.Add(1)
		}
		bar.Finish()
		secs := time.Since(start).Seconds()
		params := tr.Params()
		trainAcc, testAcc := accuracy(params, train), accuracy(params, test)
		hist.add(epoch+1, sum/float64(max(n, 1)), trainAcc, testAcc)
		fmt.Fprintf(out, "epoch %3d/%d  loss %.4f  train %5.1f%%  test %5.1f%%  %8.0f samples/s  (%.1fs)\n",
			epoch+1, cfg.epochs, sum/float64(max(n, 1)), 100*trainAcc, 100*testAcc, float64(n*cfg.batch)/secs, secs)
		if cfg.ckpt != "" {
			if err := saveCheckpoint(cfg.ckpt, epoch+1, tr, hist); err != nil {
				return err
			}
		}
	}
	if cfg.plot != "" && len(hist.points(hist.loss)) > 0 {
		if err := hist.plot(cfg.plot, fmt.Sprintf("gonox mlp on %s (%v)", cfg.data, strategy)); err != nil {
			return err
		}
		fmt.Fprintf(out, "curves written to %s\n", cfg.plot)
	}
	return nil
}

// checkWritable makes sure checkpoints can be written to dir before any
// training is spent: it creates dir if needed and a file in it.
func checkWritable(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("-ckpt %s: %w", dir, err)
	}
	f, err := os.CreateTemp(dir, ".write-test-*")
	if err != nil {
		return fmt.Errorf("-ckpt %s: cannot write checkpoints there: %w", dir, err)
	}
	name := f.Name()
	f.Close()
	return os.Remove(name)
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

// paramCount is the number of parameters of a model.
func paramCount(m nn.MLP) int {
	n := 0
	for _, x := range pytree.Leaves(m) {
		n += x.Size()
	}
	return n
}
