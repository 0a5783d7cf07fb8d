package strategy

import (
	"io"
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

func TestCheckFlags(t *testing.T) {
	for _, tc := range []struct {
		strategy, mesh string
		err            string // "" for none
	}{
		{"single", "", ""},
		{"FSDP_TP", "dp=4,tp=2", ""},
		{"Compare", "", ""},
		{"compare", "dp=2", ""},
		{"dp", "", ""},
		{"foo", "", "-strategy: "},
		{"single", "dp=8", `-mesh "dp=8": -strategy single trains on one device; choose dp, fsdp, tp or fsdp_tp to use a mesh`},
		{"dp", "dp=x", `-mesh "dp=x": `},
		{"compare", "dp=x", `-mesh "dp=x": `},
	} {
		err := CheckFlags(tc.strategy, tc.mesh)
		if tc.err == "" {
			assert.NoError(t, err, "%q %q", tc.strategy, tc.mesh)
			continue
		}
		require.Error(t, err, "%q %q", tc.strategy, tc.mesh)
		assert.Contains(t, err.Error(), tc.err)
	}
}

func TestFlags(t *testing.T) {
	for _, tc := range []struct {
		args           []string
		strategy, mesh string
		err            string
	}{
		{nil, "single", "", ""},
		{[]string{"-strategy", "fsdp_tp", "-mesh", "dp=2,tp=2"}, "fsdp_tp", "dp=2,tp=2", ""},
		{[]string{"-mesh", "dp=8"}, "", "", `-mesh "dp=8": -strategy single trains on one device`},
		{[]string{"-strategy", "nope"}, "", "", "-strategy: "},
	} {
		var strategy, mesh string
		f := cli.NewFlags("x", io.Discard)
		Flags(f, &strategy, &mesh)
		err := f.Parse(tc.args)
		if tc.err != "" {
			require.Error(t, err, "%q", tc.args)
			assert.True(t, cli.IsUsage(err))
			assert.Contains(t, err.Error(), tc.err)
			continue
		}
		require.NoError(t, err, "%q", tc.args)
		assert.Equal(t, [2]string{tc.strategy, tc.mesh}, [2]string{strategy, mesh})
	}
}

func TestMesh(t *testing.T) {
	for _, tc := range []struct {
		flag string
		s    parallel.Strategy
		n    int
		want string // the mesh, "" for none
		err  string
	}{
		{"", parallel.Single, 8, "", ""},
		{"", parallel.DP, 8, "Mesh('dp': 8)", ""},
		{"", parallel.FSDP, 4, "Mesh('dp': 4)", ""},
		{"", parallel.TP, 8, "Mesh('dp': 4, 'tp': 2)", ""},
		{"", parallel.FSDPTP, 1, "Mesh('dp': 1, 'tp': 2)", `the default mesh "dp=1,tp=2" of strategy fsdp_tp: 2 devices; the pool has 1 (set GONOX_DEVICES)`},
		{"dp=2,tp=2", parallel.FSDPTP, 8, "Mesh('dp': 2, 'tp': 2)", ""},
		{"dp=8", parallel.DP, 4, "", `-mesh "dp=8": 8 devices; the pool has 4 (set GONOX_DEVICES)`},
		{"dp=x", parallel.DP, 8, "", `-mesh "dp=x": `},
	} {
		m, err := Mesh(tc.flag, tc.s, tc.n)
		if tc.err != "" {
			require.Error(t, err, "%q %v %d", tc.flag, tc.s, tc.n)
			assert.True(t, cli.IsUsage(err))
			assert.Contains(t, err.Error(), tc.err)
			continue
		}
		require.NoError(t, err, "%q %v %d", tc.flag, tc.s, tc.n)
		if tc.want == "" {
			assert.Nil(t, m)
			assert.Equal(t, "one device", Where(m))
			continue
		}
		assert.Equal(t, tc.want, m.String())
		assert.Equal(t, tc.want, Where(m))
	}
}

func TestDevices(t *testing.T) {
	t.Setenv(shard.DevicesEnv, "6")
	n, err := Devices()
	require.NoError(t, err)
	assert.Equal(t, 6, n)
	t.Setenv(shard.DevicesEnv, "abc")
	_, err = Devices()
	require.Error(t, err)
	assert.True(t, cli.IsUsage(err))
	assert.Contains(t, err.Error(), `GONOX_DEVICES="abc"`)
}

func TestCheckBatch(t *testing.T) {
	axes := nn.MegatronAxes(2)
	axes[1][1] = ""
	model := nn.NewMLP(tensor.NewKey(0), []int{4, 8, 2}, nn.MLPOptions{Axes: axes})
	loss := func(m nn.MLP, b data.Batch) *tensor.Tensor {
		return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y))
	}
	for _, tc := range []struct {
		s     parallel.Strategy
		mesh  string
		batch int
		err   string
	}{
		{parallel.Single, "", 3, ""},
		{parallel.DP, "dp=4", 8, ""},
		{parallel.DP, "dp=4", 6, "-batch 6 is not divisible by the 4 devices of the data axes [dp] of Mesh('dp': 4)"},
		{parallel.FSDPTP, "dp=2,tp=2", 6, ""},
		{parallel.FSDPTP, "dp=2,tp=2", 5, "-batch 5 is not divisible by the 2 devices of the data axes [dp]"},
	} {
		var m *shard.Mesh
		if tc.mesh != "" {
			var err error
			m, err = shard.ParseMesh(tc.mesh)
			require.NoError(t, err)
		}
		tr, err := parallel.New(model, parallel.Config[nn.MLP, data.Batch]{Loss: loss, Strategy: tc.s, Mesh: m, Optimizer: optim.SGD(optim.Constant(0.1))})
		require.NoError(t, err, "%v %s", tc.s, tc.mesh)
		err = CheckBatch(tc.batch, tr)
		if tc.err == "" {
			assert.NoError(t, err)
			continue
		}
		require.Error(t, err)
		assert.True(t, cli.IsUsage(err))
		assert.Contains(t, err.Error(), tc.err)
	}
}
