package main

import (
	"math"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// modelConfig is the shape of a model.
type modelConfig struct {
	vocab, embed, hidden int
}

// params is the number of parameters of a model of this configuration,
// computed without building it.
func (c modelConfig) params() int {
	return c.vocab*c.embed + (c.embed+c.hidden+1)*4*c.hidden + (c.hidden+1)*c.vocab
}

// Model is the character LSTM: an embedding of the characters, one
// LSTMCell, and a linear read-out of the next character's logits from
// the hidden state.
type Model struct {
	Embed nn.Embedding
	Cell  nn.LSTMCell
	Out   nn.Linear
}

func newModel(key tensor.Key, c modelConfig) Model {
	k := key.Split(3)
	return Model{
		Embed: nn.NewEmbedding(k[0], c.vocab, c.embed, nn.EmbeddingOptions{}),
		Cell:  nn.NewLSTMCell(k[1], c.embed, c.hidden, nn.RNNOptions{}),
		Out:   nn.NewLinear(k[2], c.hidden, c.vocab, nn.LinearOptions{}),
	}
}

// batch is a batch of windows, time-major for the scan: X holds the
// characters and Y the next ones, both i32[T, B].
type batch struct {
	X, Y *tensor.Tensor
}

// carry is what the scan threads from character to character: the LSTM's
// state and the sum of the steps' losses so far.
type carry struct {
	State nn.LSTMState
	Loss  *tensor.Tensor // f32 scalar
}

// Loss is the mean next-character cross-entropy over the batch, in nats.
// The scan sums each step's mean loss in its carry and returns no per-step
// outputs: with remat, what the backward pass keeps is O(√T) carries and
// one segment's recomputed steps.
func (m Model) Loss(b batch, remat bool) *tensor.Tensor { return m.loss(b, remat, nil) }

// loss is Loss, applying probe (if not nil) to the carry's hidden state
// at every step: the benchmark's memory probe.
func (m Model) loss(b batch, remat bool, probe func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	T, B := b.X.Dim(0), b.X.Dim(1)
	init := carry{State: m.Cell.ZeroState(B), Loss: tensor.Scalar(0)}
	step := func(c carry, x batch) (carry, struct{}) {
		s := m.Cell.Forward(m.Embed.Forward(x.X), c.State)
		if probe != nil {
			s.H = probe(s.H)
		}
		l := tensor.Mean(tensor.SoftmaxCrossEntropy(m.Out.Forward(s.H), x.Y))
		return carry{State: s, Loss: tensor.Add(c.Loss, l)}, struct{}{}
	}
	var opts []autodiff.ScanOption
	if remat {
		opts = append(opts, autodiff.ScanRemat(0))
	}
	final, _ := autodiff.Scan(step, init, b, opts...)
	return tensor.MulScalar(final.Loss, 1/float32(T))
}

// sqrtCeil is ⌈√T⌉, the segment length of ScanRemat(0).
func sqrtCeil(t int) int { return int(math.Ceil(math.Sqrt(float64(t)))) }

// segments is the number of checkpointed segments of a remat scan of t
// steps.
func segments(t int) int {
	k := sqrtCeil(t)
	return (t + k - 1) / k
}

// Sample continues prompt (ids) by n characters drawn at the given
// temperature, one step of the cell at a time.
func (m Model) Sample(key tensor.Key, prompt []int32, n int, temperature float64) []int32 {
	s := m.Cell.ZeroState(1)
	var logits *tensor.Tensor
	feed := func(id int32) {
		s = m.Cell.Forward(m.Embed.Forward(tensor.FromInt32([]int32{id}, 1)), s)
		logits = m.Out.Forward(s.H)
	}
	for _, id := range prompt {
		feed(id)
	}
	out := make([]int32, 0, n)
	for _, k := range key.Split(max(n, 1))[:n] {
		id := tensor.Categorical(k, tensor.MulScalar(logits, float32(1/temperature)), -1).Int32s()[0]
		out = append(out, id)
		feed(id)
	}
	return out
}
