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
// throughput; the curves are written to a PNG (-plot).
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
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

func main() {
	cfg, err := parseFlags(os.Args[1:], os.Stderr)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		fmt.Fprintln(os.Stderr, "mlp:", err)
		os.Exit(2)
	}
	if err := run(cfg, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "mlp:", err)
		os.Exit(1)
	}
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
		return cfg, err
	}
	if fs.NArg() > 0 {
		return cfg, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	var err error
	if cfg.policy, err = nn.ParsePolicy(*dtype); err != nil {
		return cfg, fmt.Errorf("-dtype: %w", err)
	}
	for _, s := range strings.Split(*hidden, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		n, err := strconv.Atoi(s)
		if err != nil || n <= 0 {
			return cfg, fmt.Errorf("-hidden %q: %q is not a positive integer", *hidden, s)
		}
		cfg.hidden = append(cfg.hidden, n)
	}
	if cfg.batch <= 0 || cfg.epochs < 0 || cfg.lr <= 0 {
		return cfg, fmt.Errorf("-batch and -lr must be positive and -epochs not negative")
	}
	return cfg, nil
}

// loadData returns the train and test sets and the number of classes.
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

func meshFor(cfg config, s parallel.Strategy) (*shard.Mesh, error) {
	desc := cfg.mesh
	if desc == "" {
		n := len(shard.Devices())
		desc = fmt.Sprintf("dp=%d", n)
		if s == parallel.TP || s == parallel.FSDPTP {
			desc = fmt.Sprintf("dp=%d,tp=2", max(n/2, 1))
		}
	}
	return shard.ParseMesh(desc)
}

func run(cfg config, out io.Writer) error {
	keys := tensor.NewKey(cfg.seed).Split(3)
	train, test, err := loadData(cfg.data, keys[0])
	if err != nil {
		return err
	}
	features := train.X.Dim(1)
	classes := 10
	sizes := append(append([]int{features}, cfg.hidden...), classes)
	model := nn.NewMLP(keys[1], sizes, nn.MLPOptions{Policy: cfg.policy})
	if cfg.strategy == "compare" {
		return compare(cfg, model, train, out)
	}
	strategy, err := parallel.ParseStrategy(cfg.strategy)
	if err != nil {
		return err
	}
	var mesh *shard.Mesh
	if strategy != parallel.Single {
		if mesh, err = meshFor(cfg, strategy); err != nil {
			return err
		}
	}
	tr, err := newTrainer(model, strategy, mesh, cfg.lr)
	if err != nil {
		return err
	}
	where := "one device"
	if mesh != nil {
		where = mesh.String()
	}
	fmt.Fprintf(out, "gonox mlp: %s, %d train / %d test examples, model %v, strategy %v on %s\n",
		cfg.data, train.Len(), test.Len(), sizes, strategy, where)

	loader := &data.Loader{Dataset: train, BatchSize: cfg.batch, Shuffle: true, Key: keys[2], DropLast: mesh != nil, Prefetch: 2}
	if !cfg.quiet {
		loader.Progress = os.Stderr
	}
	if mesh != nil {
		s := tr.BatchSharding()
		if cfg.batch%mesh.AxisSize(strategy.DataAxes(mesh)...) != 0 {
			return fmt.Errorf("-batch %d is not divisible by the %d devices of the data axes %v", cfg.batch, mesh.AxisSize(strategy.DataAxes(mesh)...), strategy.DataAxes(mesh))
		}
		loader.Place = func(b data.Batch) (data.Batch, error) {
			b.X, b.Y = shard.Put(b.X, s), shard.Put(b.Y, s)
			return b, nil
		}
	}
	first := 0
	if cfg.ckpt != "" {
		if first, err = restoreLatest(cfg.ckpt, tr, out); err != nil {
			return err
		}
	}
	var hist history
	for epoch := first; epoch < cfg.epochs; epoch++ {
		start := time.Now()
		sum, n := 0.0, 0
		for b, err := range loader.Epoch(epoch) {
			if err != nil {
				return err
			}
			sum += tr.Step(b.X, b.Y)
			n++
		}
		secs := time.Since(start).Seconds()
		params := tr.Params()
		trainAcc, testAcc := accuracy(params, train), accuracy(params, test)
		hist.add(sum/float64(max(n, 1)), trainAcc, testAcc)
		fmt.Fprintf(out, "epoch %3d/%d  loss %.4f  train %5.1f%%  test %5.1f%%  %8.0f samples/s  (%.1fs)\n",
			epoch+1, cfg.epochs, sum/float64(max(n, 1)), 100*trainAcc, 100*testAcc, float64(n*cfg.batch)/secs, secs)
		if cfg.ckpt != "" {
			if err := saveCheckpoint(cfg.ckpt, epoch+1, tr); err != nil {
				return err
			}
		}
	}
	if cfg.plot != "" && len(hist.loss) > 0 {
		if err := hist.plot(cfg.plot, fmt.Sprintf("gonox mlp on %s (%v)", cfg.data, strategy)); err != nil {
			return err
		}
		fmt.Fprintf(out, "curves written to %s\n", cfg.plot)
	}
	return nil
}

func newTrainer(model nn.MLP, s parallel.Strategy, mesh *shard.Mesh, lr float64) (tr *parallel.Trainer, err error) {
	defer func() {
		// Bad meshes or shapes that do not divide are reported, not crashed on.
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	return parallel.New(model, parallel.Config{
		Strategy:  s,
		Mesh:      mesh,
		Loss:      parallel.CrossEntropy,
		Optimizer: optim.Adam(optim.Constant(lr)),
	}), nil
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
