package fit

import (
	"bytes"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/tensor"
)

// The progress bar and the summary line count epochs the same way.
func TestEpochName(t *testing.T) {
	assert.Equal(t, "epoch 1/20", EpochName(0, 20))
	assert.Equal(t, "epoch 20/20", EpochName(19, 20))
}

func trainer(t *testing.T, scale float32) *parallel.Trainer[nn.MLP, data.Batch] {
	t.Helper()
	m := nn.NewMLP(tensor.NewKey(3), []int{5, 8, 3}, nn.MLPOptions{})
	tr, err := parallel.New(m, parallel.Config[nn.MLP, data.Batch]{
		Loss: func(m nn.MLP, b data.Batch) *tensor.Tensor {
			return tensor.MulScalar(tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y)), scale)
		},
		Strategy:  parallel.Single,
		Optimizer: optim.SGD(optim.Constant(0.1)),
	})
	require.NoError(t, err)
	return tr
}

func dataset() *data.InMemory {
	k := tensor.NewKey(4).Split(2)
	return data.FromTensors(tensor.Normal(k[0], 10, 5), tensor.RandInt(k[1], 0, 3, 10))
}

// Epoch takes a step on every batch (the last one partial) and returns
// the mean of the steps' losses, as the same steps taken one by one.
func TestEpochMeanLoss(t *testing.T) {
	ds := dataset()
	loader := &data.Loader{Dataset: ds, BatchSize: 4, Shuffle: true, Key: tensor.NewKey(5)}
	var progress bytes.Buffer
	loss, steps, err := Epoch(trainer(t, 1), loader, 1, 3, &progress, 0.1, &cli.Checkpoints{Dir: "ck", Unit: "epoch"})
	require.NoError(t, err)
	assert.Equal(t, 3, steps)

	ref := trainer(t, 1)
	sum, n := 0.0, 0
	for b, err := range loader.Epoch(1) {
		require.NoError(t, err)
		l, err := ref.Step(b)
		require.NoError(t, err)
		sum += l
		n++
	}
	require.Equal(t, 3, n)
	assert.InDelta(t, sum/3, loss, 1e-12)
	assert.False(t, math.IsNaN(loss))

	// Without a progress writer: no bar, the same steps.
	loss2, steps, err := Epoch(trainer(t, 1), loader, 1, 3, nil, 0.1, &cli.Checkpoints{Dir: "ck", Unit: "epoch"})
	require.NoError(t, err)
	assert.Equal(t, 3, steps)
	assert.Equal(t, loss, loss2)
}

// A loss that diverges stops the epoch at its first batch, naming it.
func TestEpochDiverges(t *testing.T) {
	loader := &data.Loader{Dataset: dataset(), BatchSize: 4}
	_, steps, err := Epoch(trainer(t, float32(math.Inf(1))), loader, 2, 5, nil, 0.25, &cli.Checkpoints{Dir: "ck", Unit: "epoch"})
	require.Error(t, err)
	assert.Equal(t, 0, steps)
	assert.Equal(t, "epoch 3, batch 1: the training loss is +Inf (diverged; a smaller -lr than 0.25 may train); no checkpoint was saved in ck yet (the first comes after the first epoch)", err.Error())
}
