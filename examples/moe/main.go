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
//	go run ./examples/moe -strategy single -ffn dense -hidden 512  # the dense transformer: one MLP per block
//	go run ./examples/moe -ffn dense -hidden 512 -mesh dp=4        # the dense transformer under FSDP (-strategy fsdp)
//	go run ./examples/moe -strategy fsdp_ep -mesh dp=2,ep=4
//	go run ./examples/moe -strategy compare            # one step of each strategy
//	go run ./examples/moe -text book.txt -steps 3000   # any UTF-8 text
//	go run ./examples/moe -tokenizer bpe               # word pieces: a BPE of 1,024 tokens learnt from the text
//	go run ./examples/moe -data train.tok              # a token file of any size (package data)
//	go run ./examples/moe -strategy single -dtype bf16 # bf16 mixed precision (nn.MixedBFloat16)
//
// With -dtype bf16 the model trains in automatic mixed precision
// (nn.WithPolicy with nn.MixedBFloat16): the products of attention's
// projections, the experts (or the dense FFN) and the head run in
// bfloat16 from the float32 weights and activations, rounded as the gemm
// reads them, with float32 results; embeddings, LayerNorm, attention's
// softmax, the router, the residual stream, the loss, every gradient and
// Adam's state stay float32. It trains the experts on one device
// (-strategy single: expert.Forward computes in float32) and the dense
// model with every strategy (sharded weights are cast to bfloat16 layer
// by layer). See docs/performance.md for what it gains on a CPU with
// AVX512-BF16.
//
// With -tokenizer bpe the text is cut into GPT-2-style word pieces: a
// byte-level BPE vocabulary of -bpe-size tokens learnt from the training
// text, or GPT-2's own (-bpe-vocab DIR holding encoder.json and
// vocab.bpe). With -data the model trains on a token file (data.OpenTokens:
// written by data.WriteTokens, of any size, memory-mapped) through a
// shuffled data.Stream of windows at every offset, the first 90% training
// and the last 10% validating; a checkpoint resumes the stream mid-epoch
// exactly. The sample is decoded with the tokenizer when its vocabulary
// is the file's.
//
// With -ffn dense every block's feed-forward layer is one MLP, and the
// model is a GPT-style decoder that trains on one device (-strategy
// single) or on a mesh with the one axis dp, with parallel.DP (dp) or
// parallel.FSDP (fsdp, the default for a dense model: on dp=4 every
// process holds a quarter of the parameters, gradients and Adam state).
// GPT-2 small's shape with a character vocabulary, about 85 M
// parameters, trains under mpirun on 4 processes:
//
//	mpirun -np 4 ./moe -ffn dense -dim 768 -layers 12 -heads 12 -hidden 3072 -context 128 -batch 4 -mesh dp=4
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
// Every flag and environment variable is checked before any work: a
// mistake (a value out of range, a mesh the strategy cannot use, a prompt
// with a character the text lacks) exits with status 2 and one line
// naming the flag; failures while running (a file or checkpoint that
// cannot be read or written) exit with status 1, and under mpirun the
// message names the process. Ctrl-C says where the last checkpoint is and
// exits with status 130.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"unicode/utf8"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/examples/internal/report"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// config is the command line: the flags, checked by parseFlags.
type config struct {
	text, data, tokenizer, bpeVocab     string
	bpeSize                             int
	strategy, mesh                      string
	ffn                                 string
	dtype                               string
	policy                              nn.Policy // of -dtype
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

// Bounds of the flags and of the input: far beyond what the example needs
// on a 2-core machine, and small enough that a mistake is an error rather
// than an out-of-memory kill.
const (
	maxSteps    = 10_000_000
	maxBatch    = 4096
	maxContext  = 4096
	maxTokens   = 1 << 20 // characters per batch, -batch × -context
	maxDim      = 8192
	maxLayers   = 64
	maxExperts  = 1024
	maxHidden   = 1 << 16
	maxEvals    = 1000 // -eval-batches
	maxSample   = 100_000
	maxCapacity = 64
	maxLR       = 1 // Adam moves a parameter by about lr a step
	maxTemp     = 100
	// maxTextBytes bounds -text: the ids of its characters take 4 bytes
	// each.
	maxTextBytes = 64 << 20
	// maxVocab bounds the vocabulary: distinct characters of the text.
	maxVocab = 4096
	// maxParams bounds the model: with Adam's two moments and a gradient
	// it takes 16 bytes a parameter, 4 GiB at this bound.
	maxParams = 1 << 28
)

func main() { cli.Main("moe", run) }

// mainExit runs the command as main does, without the process, and
// returns its exit status: 2 for a usage mistake, 1 for a failure while
// running. Under mpirun (binary built with -tags mpi) every process trains
// its devices of the mesh; only process 0 prints (out is mpi.Output),
// generates the sample and plots, and an error names the process it
// happened on.
func mainExit(args []string, out, errOut io.Writer) int {
	return cli.Run("moe", args, out, errOut, run)
}

// parseFlags parses and checks the command line; a mistake is a
// cli.UsageError naming the flag.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	f := cli.NewFlags("moe", errOut)
	f.String(&cfg.text, "text", "", "UTF-8 text file to train on (default: Newton's Opticks, embedded; at most "+cli.Size(maxTextBytes)+")")
	f.String(&cfg.data, "data", "", "token file to train on instead of text (data.OpenTokens; any size: it is memory-mapped)")
	f.String(&cfg.tokenizer, "tokenizer", "char", "char (characters of the text) or bpe (GPT-2's byte-level BPE)")
	f.String(&cfg.bpeVocab, "bpe-vocab", "", "with -tokenizer bpe: directory of encoder.json and vocab.bpe to load (default: learn a vocabulary of -bpe-size from the text)")
	f.Int(&cfg.bpeSize, "bpe-size", 1024, minBPE, maxTokenVocab, "with -tokenizer bpe: tokens of the vocabulary learnt from the text")
	f.String(&cfg.strategy, "strategy", "dp_ep", "single, ep, dp_ep, fsdp_ep, or compare (one step of each, side by side); with -ffn dense: single, dp or fsdp, and fsdp in place of dp_ep by default")
	f.String(&cfg.mesh, "mesh", "", `device mesh with axes dp and ep, e.g. "dp=2,ep=4" (default: ep=8 for ep, dp=2,ep=4 otherwise)`)
	f.Int(&cfg.steps, "steps", 400, 0, maxSteps, "training steps")
	f.Int(&cfg.batch, "batch", 32, 1, maxBatch, "sequences per batch (a multiple of the number of devices)")
	f.Int(&cfg.context, "context", 64, 1, maxContext, "characters per sequence")
	f.Int(&cfg.dim, "dim", 128, 1, maxDim, "model width")
	f.Int(&cfg.layers, "layers", 4, 1, maxLayers, "transformer blocks")
	f.Int(&cfg.heads, "heads", 4, 1, maxDim, "attention heads")
	f.String(&cfg.ffn, "ffn", "moe", "feed-forward layers: moe (-experts experts of -hidden, top -topk) or dense (one MLP dim-hidden-dim, GELU; -strategy single, dp or fsdp)")
	f.Int(&cfg.experts, "experts", 8, 1, maxExperts, "experts per MoE layer")
	f.Int(&cfg.hidden, "hidden", 256, 1, maxHidden, "hidden width of each expert")
	f.Int(&cfg.topK, "topk", 2, 1, maxExperts, "experts per token")
	f.Float(&cfg.capacity, "capacity", 1.25, cli.Positive(maxCapacity), "capacity factor (per-sender capacity = ceil(tokens·k/E·factor))")
	f.Float(&cfg.lr, "lr", 3e-3, cli.Positive(maxLR), "peak Adam learning rate (warmup, then cosine decay to a tenth)")
	f.Int(&cfg.evalEvery, "eval-every", 100, 1, maxSteps, "steps between evaluations")
	f.Int(&cfg.evalBatches, "eval-batches", 4, 1, maxEvals, "validation batches per evaluation")
	f.String(&cfg.dtype, "dtype", "f32", "compute dtype: f32, or bf16 for mixed precision (nn.MixedBFloat16: float32 weights, optimizer and loss, bf16 compute; pays on CPUs with AVX512-BF16 or AMX)")
	f.Uint64(&cfg.seed, "seed", 0, "random seed")
	f.String(&cfg.plot, "plot", filepath.Join("out", "moe.png"), "where to write the curves and the expert-load heat map (empty: none)")
	f.String(&cfg.ckpt, "ckpt", "", "checkpoint directory: save at every evaluation, resume from the latest step (on any mesh)")
	f.String(&cfg.prompt, "prompt", "Light is ", "prompt of the generated sample (characters of the text)")
	f.Int(&cfg.sampleLen, "sample", 300, 0, maxSample, "characters to generate (0: none)")
	f.Float(&cfg.temperature, "temperature", 0.8, cli.Positive(maxTemp), "sampling temperature")
	f.Check(func() error {
		// A dense model's default strategy is FSDP (dp_ep needs experts).
		if cfg.ffn == "dense" && !f.Changed("strategy") {
			cfg.strategy = fsdpDense.String()
		}
		return nil
	})
	f.Check(func() error {
		switch {
		case cfg.topK > cfg.experts:
			return fmt.Errorf("-topk %d exceeds -experts %d", cfg.topK, cfg.experts)
		case cfg.dim%cfg.heads != 0:
			return fmt.Errorf("-heads %d does not divide -dim %d", cfg.heads, cfg.dim)
		case cfg.batch*cfg.context > maxTokens:
			return fmt.Errorf("-batch %d × -context %d: %d characters a batch, more than %d", cfg.batch, cfg.context, cfg.batch*cfg.context, maxTokens)
		case !utf8.ValidString(cfg.prompt):
			return fmt.Errorf("-prompt %q: not valid UTF-8", cfg.prompt)
		case cfg.ffn != "moe" && cfg.ffn != "dense":
			return fmt.Errorf("-ffn %q: want moe or dense", cfg.ffn)
		case cfg.ffn == "dense" && (f.Changed("experts") || f.Changed("topk") || f.Changed("capacity")):
			return fmt.Errorf("-ffn dense has no experts: leave out -experts, -topk and -capacity")
		case cfg.ffn == "dense" && !slices.Contains([]string{"single", "dp", "fsdp"}, cfg.strategy):
			return fmt.Errorf("-strategy %q: -ffn dense trains with single, dp or fsdp", cfg.strategy)
		case cfg.ffn != "dense" && (cfg.strategy == "dp" || cfg.strategy == "fsdp"):
			return fmt.Errorf("-strategy %s trains a dense model: add -ffn dense (experts train with ep, dp_ep or fsdp_ep)", cfg.strategy)
		case cfg.dtype != "f32" && cfg.dtype != "bf16":
			return fmt.Errorf("-dtype %q: want f32 or bf16", cfg.dtype)
		case cfg.dtype == "bf16" && cfg.ffn != "dense" && cfg.strategy != "single":
			return fmt.Errorf("-dtype bf16 trains experts with -strategy single (expert.Forward computes in float32), or a dense model (-ffn dense)")
		case cfg.tokenizer != "char" && cfg.tokenizer != "bpe":
			return fmt.Errorf("-tokenizer %q: want char or bpe", cfg.tokenizer)
		case cfg.tokenizer != "bpe" && (f.Changed("bpe-vocab") || f.Changed("bpe-size")):
			return fmt.Errorf("-bpe-vocab and -bpe-size go with -tokenizer bpe")
		case cfg.bpeVocab != "" && f.Changed("bpe-size"):
			return fmt.Errorf("-bpe-size %d: a vocabulary loaded from -bpe-vocab has its own size", cfg.bpeSize)
		}
		return nil
	})
	f.Check(func() error { return checkStrategyMesh(cfg.strategy, cfg.mesh) })
	if err := f.Parse(args); err != nil {
		return cfg, err
	}
	cfg.policy, _ = nn.ParsePolicy(cfg.dtype) // checked above
	if cfg.ffn == "dense" {
		// One expert that takes every token (the history and the
		// plot's load rows count it so).
		cfg.experts, cfg.topK = 1, 1
	}
	if !cli.Leader() {
		// Under mpirun only process 0 generates the sample and plots.
		cfg.follower, cfg.plot = true, ""
	}
	return cfg, nil
}

// checkStrategyMesh checks -strategy and -mesh together: a known
// strategy, a mesh that parses, has only the axes dp and ep, and fits the
// strategy.
func checkStrategyMesh(name, desc string) error {
	if name == "compare" {
		if desc != "" {
			return fmt.Errorf("-mesh %q: -strategy compare runs every strategy on its default mesh; leave -mesh out", desc)
		}
		return nil
	}
	s, err := parseStrategy(name)
	if err != nil {
		return err
	}
	if desc == "" {
		return nil
	}
	if s == single {
		return fmt.Errorf("-mesh %q: -strategy single trains on one device; choose ep, dp_ep or fsdp_ep (dp or fsdp with -ffn dense) to use a mesh", desc)
	}
	m, err := shard.ParseMesh(desc)
	if err != nil {
		return fmt.Errorf("-mesh %q: %v", desc, err)
	}
	names := m.AxisNames()
	if s.dense() {
		if len(names) != 1 || names[0] != "dp" {
			return fmt.Errorf("-mesh %q: strategy %v wants a mesh with the one axis dp", desc, s)
		}
		return nil
	}
	for _, n := range names {
		if n != "dp" && n != "ep" {
			return fmt.Errorf("-mesh %q: axis %q: strategy %v uses the axes dp and ep only", desc, n, s)
		}
	}
	switch {
	case s == epOnly && (len(names) != 1 || names[0] != "ep"):
		return fmt.Errorf("-mesh %q: strategy ep wants a mesh with the one axis ep (use dp_ep for dp and ep)", desc)
	case s != epOnly && !slices.Contains(names, "ep"):
		return fmt.Errorf("-mesh %q: strategy %v needs an axis ep for the experts", desc, s)
	case s == fsdpEP && !slices.Contains(names, "dp"):
		return fmt.Errorf("-mesh %q: strategy fsdp_ep needs an axis dp to split the parameters over", desc)
	}
	return nil
}

// corpus is what the model trains on: the ids of the text split by
// position (the first 90% trains, the rest validates), or with -data the
// windows of a token file split likewise; and the tokenizer of the text.
type corpus struct {
	tok        tokenizer
	train, val []int32 // the text's ids (not with -data)
	name       string
	digest     string // the first 16 hex digits of the text's SHA-256
	size       int    // the model's vocabulary
	unit       string // "characters" or "tokens"

	windows          *data.TokenWindows // -data
	trainSet, valSet data.Dataset       // -data: its windows before and after the cut
}

// loadCorpus reads -text (or the embedded Opticks) through the size bound
// and numbers its characters, refusing a vocabulary beyond maxVocab.
func loadCorpus(path string) (*corpus, error) {
	return openCorpus(config{text: path, tokenizer: "char"})
}

// openCorpus reads -text (or the embedded Opticks) through the size bound,
// makes the tokenizer of -tokenizer and encodes the text, or with -data
// opens the token file.
func openCorpus(cfg config) (*corpus, error) {
	text, name, err := cli.ReadText(cfg.text, maxTextBytes)
	if err != nil {
		return nil, err
	}
	tok, err := newTokenizer(cfg, text)
	if err != nil {
		return nil, err
	}
	c := &corpus{tok: tok, name: name, size: tok.Size(), unit: "characters"}
	if cfg.tokenizer == "bpe" {
		c.unit = "tokens"
	}
	if cfg.data != "" {
		return c, openTokenFile(cfg, c)
	}
	ids, err := tok.Encode(text)
	if err != nil {
		return nil, err
	}
	cut := len(ids) * 9 / 10
	sum := sha256.Sum256([]byte(text))
	c.train, c.val, c.digest = ids[:cut], ids[cut:], hex.EncodeToString(sum[:8])
	return c, nil
}

// checkCorpus checks the flags that depend on the text: windows of
// -context fit in both parts, and the prompt is made of its characters.
func checkCorpus(cfg config, c *corpus) error {
	need := cfg.context + 1
	if c.windows != nil {
		if err := checkTokenFile(cfg, c); err != nil {
			return err
		}
	} else if len(c.train) < need || len(c.val) < need {
		return cli.Usagef("-context %d: %s has %d characters, too few for windows of %d in both the training part and the last 10%% that validates",
			cfg.context, c.name, len(c.train)+len(c.val), need)
	}
	if v, ok := c.tok.(*data.Vocab); ok && cfg.sampleLen > 0 && c.tok.Size() == c.size {
		for _, r := range cfg.prompt {
			if _, ok := v.ID(r); !ok {
				return cli.Usagef("-prompt %q: the character %q is not in %s (the sample is generated from characters of the text; set -prompt, or -sample 0)", cfg.prompt, r, c.name)
			}
		}
	}
	return nil
}

// windows returns the windows of n+1 characters of ids starting at
// starts, one row each, as inputs (the first n) and next-character
// targets (the last n).
func windows(ids []int32, starts []int, n int) (x, y *tensor.Tensor) {
	xs := make([]int32, 0, len(starts)*n)
	ys := make([]int32, 0, len(starts)*n)
	for _, s := range starts {
		xs = append(xs, ids[s:s+n]...)
		ys = append(ys, ids[s+1:s+n+1]...)
	}
	return tensor.FromInt32(xs, len(starts), n), tensor.FromInt32(ys, len(starts), n)
}

// run is the command: it checks the flags, the paths and the text, sets
// up the strategy, resumes from -ckpt if a step is there, trains,
// generates a sample and plots.
func run(args []string, out, errOut io.Writer) error {
	cfg, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	return runConfig(cfg, out, errOut)
}

// runConfig runs the command with parsed flags.
func runConfig(cfg config, out, errOut io.Writer) error {
	if err := cli.CheckOutputs(cfg.plot, cfg.ckpt); err != nil {
		return err
	}
	c, err := openCorpus(cfg)
	if err != nil {
		return err
	}
	if c.windows != nil {
		defer c.windows.Close()
	}
	if err := checkCorpus(cfg, c); err != nil {
		return err
	}
	mc := cfg.model(c.size)
	if n := mc.params(); n > maxParams {
		return cli.Usagef("-dim %d, -layers %d, -experts %d, -hidden %d: a model of %d parameters, more than this example trains (%d)",
			cfg.dim, cfg.layers, cfg.experts, cfg.hidden, n, maxParams)
	}
	keys := tensor.NewKey(cfg.seed).Split(2)
	model := newModel(keys[0], mc)
	if cfg.strategy == "compare" {
		return compare(cfg, model, c, out)
	}
	s, _ := parseStrategy(cfg.strategy) // checked by parseFlags
	tr, err := build(cfg, model, s)
	if err != nil {
		return err
	}
	where := "one device"
	if tr.mesh != nil {
		where = tr.mesh.String()
	}
	r := &runner{cfg: cfg, c: c, tr: tr, sampleKey: keys[1], out: out, errOut: errOut,
		rec: record(cfg, c, fmt.Sprintf("%v on %s", s, where)), hist: history{experts: cfg.experts},
		cps: &cli.Checkpoints{Dir: cfg.ckpt, Flag: "ckpt", Unit: "step", Every: min(cfg.evalEvery, cfg.steps)}}
	if cfg.ckpt != "" {
		if err := r.resume(); err != nil {
			return err
		}
	}
	if c.windows != nil {
		fmt.Fprintf(out, "gonox moe: %s, %d train / %d validation windows of %d tokens, vocabulary %d\n", c.name, c.trainSet.Len(), c.valSet.Len(), cfg.context+1, c.size)
	} else {
		fmt.Fprintf(out, "gonox moe: %s, %d train / %d validation %s, vocabulary %d\n", c.name, len(c.train), len(c.val), c.unit, c.size)
	}
	ffn := fmt.Sprintf("%d experts of %d (top-%d, capacity factor %g)", cfg.experts, cfg.hidden, cfg.topK, cfg.capacity)
	if mc.ffn == ffnDense {
		ffn = fmt.Sprintf("dense FFN %d-%d-%d", cfg.dim, cfg.hidden, cfg.dim)
	}
	fmt.Fprintf(out, "model: %d layers, width %d, %d heads, %s, context %d, %d parameters\n",
		cfg.layers, cfg.dim, cfg.heads, ffn, cfg.context, report.ParamCount(model))
	fmt.Fprintf(out, "strategy %v on %s, batch %d×%d %s, %d steps\n", s, where, cfg.batch, cfg.context, c.unit, cfg.steps)
	if cfg.policy != nn.Float32Policy {
		fmt.Fprintf(out, "mixed precision: %v\n", cfg.policy)
	}
	for _, note := range r.notes {
		fmt.Fprintln(out, note)
	}
	stop := cli.OnInterrupt("moe", errOut, r.cps)
	defer stop()
	return r.train()
}

// model returns the model configuration of the flags for a vocabulary.
func (cfg config) model(vocab int) modelConfig {
	mc := modelConfig{vocab: vocab, context: cfg.context, dim: cfg.dim, layers: cfg.layers, heads: cfg.heads,
		experts: cfg.experts, hidden: cfg.hidden, topK: cfg.topK, capacity: cfg.capacity}
	if cfg.ffn == "dense" {
		mc.ffn = ffnDense
	}
	return mc
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
