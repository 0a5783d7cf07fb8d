package report

import (
	"bytes"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/examples/internal/cli"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// model is an MLP 6-8-3 with the Megatron axes (the classes not split).
func model() nn.MLP {
	axes := nn.MegatronAxes(2)
	axes[1][1] = ""
	return nn.NewMLP(tensor.NewKey(1), []int{6, 8, 3}, nn.MLPOptions{Axes: axes})
}

func setup(s parallel.Strategy) (*shard.Mesh, *parallel.Trainer[nn.MLP, data.Batch], error) {
	desc := map[parallel.Strategy]string{parallel.DP: "dp=4", parallel.FSDP: "dp=2", parallel.TP: "dp=2,tp=2", parallel.FSDPTP: "dp=1,tp=2"}[s]
	var mesh *shard.Mesh
	if desc != "" {
		var err error
		if mesh, err = shard.ParseMesh(desc); err != nil {
			return nil, nil, err
		}
	}
	tr, err := parallel.New(model(), parallel.Config[nn.MLP, data.Batch]{
		Loss: func(m nn.MLP, b data.Batch) *tensor.Tensor {
			return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y))
		},
		Strategy: s, Mesh: mesh, Optimizer: optim.SGD(optim.Constant(0.1)),
	})
	return mesh, tr, err
}

func TestParamCount(t *testing.T) {
	assert.Equal(t, 6*8+8+8*3+3, ParamCount(model()))
	assert.Equal(t, 0, ParamCount(struct{}{}))
}

func TestSetUpJoinsErrors(t *testing.T) {
	entries, err := SetUp(setup)
	require.NoError(t, err)
	require.Len(t, entries, len(parallel.Strategies()))
	for i, e := range entries {
		assert.Equal(t, parallel.Strategies()[i], e.Strategy)
		assert.Equal(t, e.Mesh, e.Trainer.Mesh())
	}
	_, err = SetUp(func(s parallel.Strategy) (*shard.Mesh, *parallel.Trainer[nn.MLP, data.Batch], error) {
		if s == parallel.TP || s == parallel.DP {
			return nil, nil, errors.New("no")
		}
		return setup(s)
	})
	require.Error(t, err)
	assert.True(t, cli.IsUsage(err))
	assert.Equal(t, "-strategy compare: dp: no; tp: no", err.Error())
}

// The table has a row per strategy, in order, with the mesh spelt as a
// flag, the same loss to rounding (the batch is the same) and gradients within
// float32 rounding of the first row's.
func TestStrategies(t *testing.T) {
	entries, err := SetUp(setup)
	require.NoError(t, err)
	key := tensor.NewKey(2).Split(2)
	train := data.FromTensors(tensor.Normal(key[0], 20, 6), tensor.RandInt(key[1], 0, 3, 20))
	var out bytes.Buffer
	require.NoError(t, Strategies(&out, entries, train, 8, func(n int) string { return fmt.Sprintf("heading: a batch of %d", n) }))
	lines := strings.Split(strings.TrimRight(out.String(), "\n"), "\n")
	require.Len(t, lines, 3+len(entries), out.String())
	assert.Equal(t, "heading: a batch of 8", lines[0])
	assert.Empty(t, lines[1])
	assert.Regexp(t, `^\s*strategy\s+mesh\s+loss\s+max \|Δgrad\|\s+step time\s+comm/device\s+residuals/device\s+params\+opt/device$`, lines[2])
	row := regexp.MustCompile(`^\s*(\S+)\s+(\S+)\s+([0-9.]+)\s+(\S+)\s+\S+\s+[0-9.]+ (B|KiB|MiB)\s+[0-9.]+ (B|KiB|MiB)\s+[0-9.]+ (B|KiB|MiB)$`)
	meshes := []string{"-", "dp=4", "dp=2", "dp=2,tp=2", "dp=1,tp=2"}
	var loss0 float64
	for i, e := range entries {
		m := row.FindStringSubmatch(lines[3+i])
		require.NotNil(t, m, "%q", lines[3+i])
		assert.Equal(t, e.Strategy.String(), m[1])
		assert.Equal(t, meshes[i], m[2])
		loss, err := strconv.ParseFloat(m[3], 64)
		require.NoError(t, err)
		if i == 0 {
			loss0 = loss
			assert.Equal(t, "0.0e+00", m[4])
		}
		assert.InDelta(t, loss0, loss, 2e-6, "%v", e.Strategy)
		d, err := strconv.ParseFloat(m[4], 64)
		require.NoError(t, err)
		assert.Less(t, d, 1e-5, "%v", e.Strategy)
	}
	// A batch larger than the data takes all of it.
	out.Reset()
	entries, err = SetUp(setup)
	require.NoError(t, err)
	require.NoError(t, Strategies(&out, entries, train, 64, func(n int) string { return fmt.Sprint(n) }))
	assert.True(t, strings.HasPrefix(out.String(), "20\n\n"), out.String())
}
