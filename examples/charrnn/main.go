// Command charrnn trains a character-level LSTM language model on Isaac
// Newton's Opticks (embedded in the module) or any UTF-8 text: an
// embedding, an nn.LSTMCell driven over each window by autodiff.Scan, and
// a linear read-out to the next character. The loss of every step is
// summed in the scan's carry, so the scan stacks nothing per step, and
// with -remat (the default) its backward pass keeps every ⌈√T⌉-th carry
// and recomputes the steps between: memory O(√T) in the window length T
// instead of O(T).
//
//	go run ./examples/charrnn                        # Opticks, 1000 steps
//	go run ./examples/charrnn -context 512 -steps 3000
//	go run ./examples/charrnn -remat=false           # the plain scan: same losses, O(T) memory
//	go run ./examples/charrnn -text book.txt         # any UTF-8 text
//
// Every evaluation prints the training loss, the validation loss in nats
// and bits per character and the throughput; at the end a sample is
// generated from a prompt and the curves are written to a PNG (-plot).
// With -ckpt every evaluation is saved, with the curves so far, and a
// rerun resumes.
//
// Every flag is checked before any work: a mistake exits with status 2 and
// one line naming the flag; failures while running (a file or checkpoint
// that cannot be read or written) exit with status 1. Ctrl-C says where
// the last checkpoint is and exits with status 130.
package main

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"
	"unicode/utf8"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/tensor"
)

// config is the command line: the flags, checked by parseFlags.
type config struct {
	text                   string
	steps, batch, context  int
	embed, hidden          int
	remat                  bool
	lr                     float64
	evalEvery, evalBatches int
	seed                   uint64
	plot, ckpt, prompt     string
	sampleLen              int
	temperature            float64
}

// Bounds of the flags and of the input: far beyond what the example needs
// on a 2-core machine, and small enough that a mistake is an error rather
// than an out-of-memory kill.
const (
	maxSteps   = 10_000_000
	maxBatch   = 4096
	maxContext = 1 << 16
	maxTokens  = 1 << 20 // characters per batch, -batch × -context
	maxWidth   = 8192
	maxEvals   = 1000 // -eval-batches
	maxSample  = 100_000
	maxLR      = 1 // Adam moves a parameter by about lr a step
	maxTemp    = 100
	// maxTextBytes bounds -text: the ids of its characters take 4 bytes
	// each.
	maxTextBytes = 64 << 20
	// maxVocab bounds the vocabulary: distinct characters of the text.
	maxVocab = 4096
	// maxParams bounds the model: with Adam's two moments and a gradient
	// it takes 16 bytes a parameter, 4 GiB at this bound.
	maxParams = 1 << 28
)

func main() { cli.Main("charrnn", run) }

// mainExit runs the command as main does, without the process, and
// returns its exit status.
func mainExit(args []string, out, errOut io.Writer) int {
	return cli.Run("charrnn", args, out, errOut, run)
}

// parseFlags parses and checks the command line; a mistake is a
// cli.UsageError naming the flag.
func parseFlags(args []string, errOut io.Writer) (config, error) {
	var cfg config
	f := cli.NewFlags("charrnn", errOut)
	f.String(&cfg.text, "text", "", "UTF-8 text file to train on (default: Newton's Opticks, embedded; at most "+cli.Size(maxTextBytes)+")")
	f.Int(&cfg.steps, "steps", 1000, 0, maxSteps, "training steps")
	f.Int(&cfg.batch, "batch", 32, 1, maxBatch, "windows per batch")
	f.Int(&cfg.context, "context", 128, 1, maxContext, "characters per window: the length T of the scan")
	f.Int(&cfg.embed, "embed", 32, 1, maxWidth, "width of the character embedding")
	f.Int(&cfg.hidden, "hidden", 256, 1, maxWidth, "width of the LSTM's state")
	f.Bool(&cfg.remat, "remat", true, "rematerialise the scan: keep every ⌈√T⌉-th carry for backward and recompute the rest")
	f.Float(&cfg.lr, "lr", 5e-3, cli.Positive(maxLR), "peak Adam learning rate (warmup, then cosine decay to a tenth)")
	f.Int(&cfg.evalEvery, "eval-every", 100, 1, maxSteps, "steps between evaluations")
	f.Int(&cfg.evalBatches, "eval-batches", 4, 1, maxEvals, "validation batches per evaluation")
	f.Uint64(&cfg.seed, "seed", 0, "random seed (initialisation, batches, sample)")
	f.String(&cfg.plot, "plot", filepath.Join("out", "charrnn.png"), "where to write the loss curves (empty: none)")
	f.String(&cfg.ckpt, "ckpt", "", "checkpoint directory: save at every evaluation, resume from the latest step")
	f.String(&cfg.prompt, "prompt", "Light is ", "prompt of the generated sample (characters of the text)")
	f.Int(&cfg.sampleLen, "sample", 300, 0, maxSample, "characters to generate (0: none)")
	f.Float(&cfg.temperature, "temperature", 0.8, cli.Positive(maxTemp), "sampling temperature")
	f.Check(func() error {
		switch {
		case cfg.batch*cfg.context > maxTokens:
			return fmt.Errorf("-batch %d × -context %d: %d characters a batch, more than %d", cfg.batch, cfg.context, cfg.batch*cfg.context, maxTokens)
		case !utf8.ValidString(cfg.prompt):
			return fmt.Errorf("-prompt %q: not valid UTF-8", cfg.prompt)
		}
		return nil
	})
	err := f.Parse(args)
	return cfg, err
}

// corpus is the text the model trains on: the ids of its characters, the
// first 90% training and the rest validating.
type corpus struct {
	vocab      *data.Vocab
	train, val []int32
	name       string
	digest     string // the first 16 hex digits of the text's SHA-256
}

// loadCorpus reads -text (or the embedded Opticks) through the size bound
// and numbers its characters.
func loadCorpus(path string) (*corpus, error) {
	text, name, err := cli.ReadText(path, maxTextBytes)
	if err != nil {
		return nil, err
	}
	v := data.NewVocab(text)
	if v.Size() > maxVocab {
		return nil, fmt.Errorf("-text %s: %d distinct characters, more than the %d this example's vocabulary takes", path, v.Size(), maxVocab)
	}
	ids, err := v.Encode(text)
	if err != nil {
		return nil, err
	}
	cut := len(ids) * 9 / 10
	sum := sha256.Sum256([]byte(text))
	return &corpus{vocab: v, train: ids[:cut], val: ids[cut:], name: name, digest: hex.EncodeToString(sum[:8])}, nil
}

// checkCorpus checks the flags that depend on the text: windows of
// -context fit in both parts, and the prompt is made of its characters.
func checkCorpus(cfg config, c *corpus) error {
	need := cfg.context + 1
	if len(c.train) < need || len(c.val) < need {
		return cli.Usagef("-context %d: %s has %d characters, too few for windows of %d in both the training part and the last 10%% that validates",
			cfg.context, c.name, len(c.train)+len(c.val), need)
	}
	if cfg.sampleLen > 0 {
		for _, r := range cfg.prompt {
			if _, ok := c.vocab.ID(r); !ok {
				return cli.Usagef("-prompt %q: the character %q is not in %s (the sample is generated from characters of the text; set -prompt, or -sample 0)", cfg.prompt, r, c.name)
			}
		}
	}
	return nil
}

// run is the command: it checks the flags, the paths and the text,
// resumes from -ckpt if a step is there, trains, generates a sample and
// plots.
func run(args []string, out, errOut io.Writer) error {
	cfg, err := parseFlags(args, errOut)
	if err != nil {
		return err
	}
	if err := cli.CheckOutputs(cfg.plot, cfg.ckpt); err != nil {
		return err
	}
	c, err := loadCorpus(cfg.text)
	if err != nil {
		return err
	}
	if err := checkCorpus(cfg, c); err != nil {
		return err
	}
	mc := modelConfig{vocab: c.vocab.Size(), embed: cfg.embed, hidden: cfg.hidden}
	if n := mc.params(); n > maxParams {
		return cli.Usagef("-embed %d, -hidden %d: a model of %d parameters, more than this example trains (%d)", cfg.embed, cfg.hidden, n, maxParams)
	}
	keys := tensor.NewKey(cfg.seed).Split(2)
	r := newRunner(cfg, c, newModel(keys[0], mc), keys[1], out)
	if cfg.ckpt != "" {
		if err := r.resume(); err != nil {
			return err
		}
	}
	scan := "plain scan"
	if cfg.remat {
		scan = fmt.Sprintf("scan with remat (%d segments of %d steps)", segments(cfg.context), sqrtCeil(cfg.context))
	}
	fmt.Fprintf(out, "gonox charrnn: %s, %d train / %d validation characters, vocabulary %d\n", c.name, len(c.train), len(c.val), c.vocab.Size())
	fmt.Fprintf(out, "model: embedding %d, LSTM %d, %d parameters; batch %d×%d characters, %d steps, %s\n",
		cfg.embed, cfg.hidden, mc.params(), cfg.batch, cfg.context, cfg.steps, scan)
	for _, note := range r.notes {
		fmt.Fprintln(out, note)
	}
	stop := cli.OnInterrupt("charrnn", errOut, r.cps)
	defer stop()
	return r.train()
}
