package shard_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// fsdpTP shards parameters fully (embed over dp) and tensor-parallel (mlp
// over tp), and batches over dp.
var fsdpTP = shard.Rules{
	{"batch", shard.Axes{"dp"}},
	{"embed", shard.Axes{"dp"}},
	{"mlp", shard.Axes{"tp"}},
	{"heads", shard.Axes{"tp"}},
	{"vocab", nil},
}

func named(names ...string) *tensor.Tensor {
	shape := make([]int, len(names))
	for i := range shape {
		shape[i] = 8
	}
	return tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, shape...), names...)
}

func TestRulesSpecFor(t *testing.T) {
	path := pytree.MustParsePath("Layers[0].W")
	for _, tc := range []struct {
		name  string
		rules shard.Rules
		x     *tensor.Tensor
		want  shard.Spec
	}{
		{"two names", fsdpTP, named("embed", "mlp"), shard.P("dp", "tp")},
		{"transposed", fsdpTP, named("mlp", "embed"), shard.P("tp", "dp")},
		{"replicating rule", fsdpTP, named("vocab", "mlp"), shard.P(nil, "tp")},
		{"unknown name is replicated (Flax)", fsdpTP, named("embedd", "mlp"), shard.P(nil, "tp")},
		{"unnamed dimension", fsdpTP, named("", "heads"), shard.P(nil, "tp")},
		{"no names", fsdpTP, tensor.Zeros(tensor.Float32, 8, 8), shard.P()},
		{"scalar", fsdpTP, tensor.Scalar(1), shard.P()},
		{"several mesh axes", shard.Rules{{"batch", shard.Axes{"dp", "tp"}}}, named("batch", "seq"), shard.P([]string{"dp", "tp"}, nil)},
		{"empty rules", nil, named("embed", "mlp"), shard.P(nil, nil)},
		{"one replicated name twice", fsdpTP, named("vocab", "vocab"), shard.P(nil, nil)},
		{"one unknown name twice", fsdpTP, named("seq", "seq"), shard.P(nil, nil)},
		{"keyed rule", shard.Rules{shard.Rule{Logical: "mlp", Mesh: shard.Axes{"tp"}}}, named("mlp"), shard.P("tp")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.rules.SpecFor(path, tc.x)
			require.NoError(t, err)
			assert.Equal(t, tc.want, got)
		})
	}
}

func TestRulesErrors(t *testing.T) {
	path := pytree.MustParsePath("Layers[0].W")
	for _, tc := range []struct {
		name  string
		rules shard.Rules
		x     *tensor.Tensor
		want  string
	}{
		{"two names on one mesh axis", fsdpTP, named("batch", "embed"),
			`shard.Rules: Layers[0].W f32[8,8] ["batch" "embed"]: logical axes "batch" (dim 0) and "embed" (dim 1) both map to mesh axis "dp"`},
		{"one name twice", fsdpTP, named("mlp", "mlp"),
			`shard.Rules: Layers[0].W f32[8,8] ["mlp" "mlp"]: logical axes "mlp" (dim 0) and "mlp" (dim 1) both map to mesh axis "tp"`},
		{"overlapping multi-axis rules", shard.Rules{{"batch", shard.Axes{"dp", "tp"}}, {"heads", shard.Axes{"tp"}}}, named("batch", "seq", "heads"),
			`shard.Rules: Layers[0].W f32[8,8,8] ["batch" "seq" "heads"]: logical axes "batch" (dim 0) and "heads" (dim 2) both map to mesh axis "tp"`},
		{"two rules for a name", shard.Rules{{"batch", shard.Axes{"dp"}}, {"embed", nil}, {"batch", shard.Axes{"tp"}}}, named("batch"),
			`shard.Rules: logical axis "batch" has two rules (0 and 2); give each name one rule`},
		{"empty logical name", shard.Rules{{"", shard.Axes{"dp"}}}, named("batch"),
			`shard.Rules: rule 0 has an empty logical name`},
		{"mesh axis twice in a rule", shard.Rules{{"batch", shard.Axes{"dp", "dp"}}}, named("batch"),
			`shard.Rules: rule "batch" lists mesh axis "dp" twice`},
		{"empty mesh axis", shard.Rules{{"batch", shard.Axes{""}}}, named("batch"),
			`shard.Rules: rule "batch" has an empty mesh axis name`},
		{"bad rules, leaf without names", shard.Rules{{"", nil}}, tensor.Zeros(tensor.Float32, 2),
			`shard.Rules: rule 0 has an empty logical name`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := tc.rules.SpecFor(path, tc.x)
			require.EqualError(t, err, tc.want)
		})
	}
}

func TestRulesSpecForActivations(t *testing.T) {
	assert.Equal(t, shard.P("dp", nil), fsdpTP.Spec("batch", "seq"))
	assert.Equal(t, shard.P("dp", nil, "tp", nil), fsdpTP.Spec("batch", "seq", "heads", "kv"))
	assert.Equal(t, shard.Spec{}, fsdpTP.Spec())
	assert.PanicsWithValue(t,
		`shard.Rules: Spec("batch", "embed"): logical axes "batch" (dim 0) and "embed" (dim 1) both map to mesh axis "dp"`,
		func() { fsdpTP.Spec("batch", "embed") })
}

func TestRulesString(t *testing.T) {
	assert.Equal(t, "(('batch', 'dp'), ('embed', 'dp'), ('mlp', 'tp'), ('heads', 'tp'), ('vocab', None))", fsdpTP.String())
	assert.Equal(t, "(('batch', ('dp', 'tp')),)", shard.Rules{{"batch", shard.Axes{"dp", "tp"}}}.String())
	assert.Equal(t, "()", shard.Rules{}.String())
}

func TestRulesValidate(t *testing.T) {
	model := mlpModel()
	require.NoError(t, fsdpTP.Validate(model))
	// A misspelt name replicates silently; Validate finds it.
	typo := pytree.At(model, func(m *mlp) **tensor.Tensor { return &m.Layers[1].B }, named("embd"))
	assert.EqualError(t, fsdpTP.Validate(typo), `shard.Rules: no rule for logical axes "embd" (on Layers[1].B)`)
	// Conflicts and malformed rules are reported too.
	conflict := pytree.At(model, func(m *mlp) **tensor.Tensor { return &m.Layers[1].W }, named("batch", "embed"))
	assert.ErrorContains(t, fsdpTP.Validate(conflict), `Layers[1].W f32[8,8] ["batch" "embed"]: logical axes "batch" (dim 0) and "embed" (dim 1) both map to mesh axis "dp"`)
	assert.EqualError(t, shard.Rules{{"mlp", nil}, {"mlp", nil}}.Validate(model), `shard.Rules: logical axis "mlp" has two rules (0 and 1); give each name one rule`)
}

func TestFilterShardWithRules(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	model := mlpModel()
	got := shard.FilterShard(model, m, fsdpTP)
	assert.Equal(t, "float32[16@dp,32@tp]", got.Layers[0].W.Type())
	assert.Equal(t, "float32[32@tp]", got.Layers[0].B.Type())
	assert.Equal(t, "float32[32@tp,4@dp]", got.Layers[1].W.Type())
	assert.Equal(t, "float32[4@dp]", got.Layers[1].B.Type())
	requirePlaced(t, got.Layers[0].W, m, shard.P("dp", "tp"), model.Layers[0].W)
	assert.Equal(t, []string{"embed", "mlp"}, got.Layers[0].W.LogicalAxes())

	// Other rules place the same model differently: pure data parallelism.
	dp := shard.Rules{{"batch", shard.Axes{"dp"}}}
	for _, x := range pytree.Leaves(shard.FilterShard(model, m, dp)) {
		s, _ := shard.ShardingOf(x)
		assert.True(t, s.IsReplicated(), "%v", x)
	}

	// A conflict is an error naming the leaf's path, both logical names
	// and the mesh axis.
	bad := pytree.At(model, func(m *mlp) **tensor.Tensor { return &m.Layers[1].W },
		tensor.WithLogicalAxes(model.Layers[1].W, "mlp", "heads"))
	assert.PanicsWithValue(t,
		`shard.FilterShard: shard.Rules: Layers[1].W f32[32,4] ["mlp" "heads"]: logical axes "mlp" (dim 0) and "heads" (dim 1) both map to mesh axis "tp"`,
		func() { shard.FilterShard(bad, m, fsdpTP) })
	// A rule naming an axis the mesh lacks fails when placing.
	assert.PanicsWithValue(t,
		`shard.FilterShard: Layers[0].W f32[16,32]: spec PartitionSpec(None, 'mp'): mesh Mesh('dp': 4, 'tp': 2) has no axis "mp"`,
		func() { shard.FilterShard(model, m, shard.Rules{{"mlp", shard.Axes{"mp"}}}) })
}

// adamState is an optimizer state in the optax style: a step count and
// two moments shaped like the parameters.
type adamState struct {
	Step   *tensor.Tensor
	Mu, Nu mlp
}

func TestRulesShardOptimizerStateLikeParams(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	params := mlpModel()
	// Moments built with pytree.Map keep the parameters' logical axes, so
	// the same rules place them like the parameters with no extra work.
	state := adamState{
		Step: tensor.ScalarInt(0),
		Mu:   pytree.Map(params, tensor.ZerosLike),
		Nu:   pytree.Map(params, tensor.ZerosLike),
	}
	sp := shard.FilterShard(params, m, fsdpTP)
	ss := shard.FilterShard(state, m, fsdpTP)
	_, pl := pytree.LeavesWithPath(sp)
	for _, moments := range []mlp{ss.Mu, ss.Nu} {
		paths, leaves := pytree.LeavesWithPath(moments)
		require.Len(t, leaves, len(pl))
		for i, x := range leaves {
			assert.True(t, specOf(t, x).Equal(specOf(t, pl[i])), "%v: %v vs %v", paths[i], x, pl[i])
			assert.Equal(t, pl[i].Type(), x.Type())
		}
	}
	assert.Equal(t, "int32[]", ss.Step.Type())
	assert.True(t, specOf(t, ss.Step).Equal(shard.P()))
}

func TestLikeParams(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	params := mlpModel()
	paramSpecs := shard.Specs{
		"Layers[*].W": shard.P(nil, "tp"),
		"Layers[0].B": shard.P("tp"),
		"Layers[1].B": shard.P(),
	}
	// Moments that lost their names: Specs keyed by parameter path do not
	// match "Mu.Layers[0].W", LikeParams does.
	// (pytree.Map would keep the names, so build them from the leaves.)
	zeros := func() mlp {
		leaves, st := pytree.Flatten(params)
		for i, x := range leaves {
			leaves[i] = tensor.ZerosLike(x)
		}
		return pytree.Unflatten[mlp](st, leaves)
	}
	state := adamState{Step: tensor.ScalarInt(3), Mu: zeros(), Nu: zeros()}
	require.Nil(t, state.Mu.Layers[0].W.LogicalAxes())

	like := shard.LikeParams(params, paramSpecs)
	ss := shard.FilterShard(state, m, like)
	for _, moments := range []mlp{ss.Mu, ss.Nu} {
		assert.Equal(t, shard.P(nil, "tp"), specOf(t, moments.Layers[0].W))
		assert.Equal(t, shard.P("tp"), specOf(t, moments.Layers[0].B))
		assert.Equal(t, shard.P(nil, "tp"), specOf(t, moments.Layers[1].W))
		assert.True(t, specOf(t, moments.Layers[1].B).Equal(shard.P()))
	}
	assert.True(t, specOf(t, ss.Step).Equal(shard.P()))

	// Placed like already-placed parameters: ask the parameters where
	// they are.
	sp := shard.FilterShard(params, m, fsdpTP)
	placedSpec := shard.SpecFunc(func(_ pytree.Path, x *tensor.Tensor) shard.Spec { return specOf(t, x) })
	ss = shard.FilterShard(state, m, shard.LikeParams(sp, placedSpec))
	assert.Equal(t, "float32[16@dp,32@tp]", ss.Nu.Layers[0].W.Type())
	assert.Equal(t, "float32[4@dp]", ss.Nu.Layers[1].B.Type())

	// The same tree is its own state.
	got, err := like.SpecFor(pytree.MustParsePath("Layers[1].W"), params.Layers[1].W)
	require.NoError(t, err)
	assert.Equal(t, shard.P(nil, "tp"), got)
}

func TestLikeParamsMatching(t *testing.T) {
	// Parameters whose paths are suffixes of one another: the longest
	// suffix with the right shape wins.
	type inner struct{ W *tensor.Tensor }
	type params struct {
		W     *tensor.Tensor
		Inner inner
	}
	p := params{W: tensor.Zeros(tensor.Float32, 8, 4), Inner: inner{W: tensor.Zeros(tensor.Float32, 4, 8)}}
	specs := shard.Specs{"W": shard.P("outer"), "Inner.W": shard.P("inner")}
	like := shard.LikeParams(p, specs)
	for _, tc := range []struct {
		path  string
		shape []int
		want  shard.Spec
	}{
		{"Mu.Inner.W", []int{4, 8}, shard.P("inner")},
		{"Mu.W", []int{8, 4}, shard.P("outer")},
		{"Mu.Inner.W", []int{8, 4}, shard.P("outer")}, // Inner.W has another shape; W is a suffix too
		{"Count", []int{}, shard.P()},
		{"[3].Mu[\"a\"].Inner.W", []int{4, 8}, shard.P("inner")},
	} {
		got, err := like.SpecFor(pytree.MustParsePath(tc.path), tensor.Zeros(tensor.Float32, tc.shape...))
		require.NoError(t, err, tc.path)
		assert.True(t, tc.want.Equal(got), "%s %v: got %v, want %v", tc.path, tc.shape, got, tc.want)
	}

	// A root parameter matches every path of its shape.
	root := shard.LikeParams(tensor.Zeros(tensor.Float32, 8), shard.P("dp"))
	got, err := root.SpecFor(pytree.MustParsePath("Mu"), tensor.Zeros(tensor.Float32, 8))
	require.NoError(t, err)
	assert.Equal(t, shard.P("dp"), got)

	for _, tc := range []struct {
		path  string
		shape []int
		want  string
	}{
		{"Mu.B", []int{8}, `shard.LikeParams: state leaf Mu.B f32[8]: no parameter path is a suffix of its path`},
		{"Nu.Inner.W", []int{4}, `shard.LikeParams: state leaf Nu.Inner.W f32[4] matches parameter Inner.W f32[4,8] by path but not by shape`},
		{"Nu.V", []int{4, 8}, `shard.LikeParams: state leaf Nu.V f32[4,8]: no parameter path is a suffix of its path`},
	} {
		_, err := like.SpecFor(pytree.MustParsePath(tc.path), tensor.Zeros(tensor.Float32, tc.shape...))
		assert.EqualError(t, err, tc.want)
	}

	// Errors of the parameters' SpecTree name both leaves.
	strict := shard.LikeParams(p, shard.Specs{"W": shard.P()})
	_, err = strict.SpecFor(pytree.MustParsePath("Mu.Inner.W"), tensor.Zeros(tensor.Float32, 4, 8))
	assert.EqualError(t, err, `shard.LikeParams: state leaf Mu.Inner.W: parameter Inner.W: no spec for "Inner.W" (keys: "W")`)

	// FilterShard reports them with the op name.
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	assert.PanicsWithValue(t,
		`shard.FilterShard: shard.LikeParams: state leaf Extra f32[3]: no parameter path is a suffix of its path`,
		func() {
			shard.FilterShard(struct{ Extra *tensor.Tensor }{tensor.Zeros(tensor.Float32, 3)}, m, like)
		})
}

func TestRulesInMapInSpecs(t *testing.T) {
	// Rules are the in-specs of a whole input tree when its leaves carry
	// names, activations included; Spec gives specs by name for values
	// that carry none, here the output.
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	rules := shard.Rules{{"batch", shard.Axes{"dp"}}, {"mlp", shard.Axes{"tp"}}}
	type in struct {
		X, W *tensor.Tensor
	}
	x := tensor.WithLogicalAxes(testData(tensor.Float32, 8, 16), "batch", "embed")
	w := tensor.WithLogicalAxes(testData(tensor.Float32, 16, 6), "embed", "mlp")
	var blockTypes []string
	f := shard.Map(m, rules, rules.Spec("batch", "mlp"), func(c *shard.Ctx, v in) *tensor.Tensor {
		if c.Device().ID() == 0 {
			blockTypes = []string{v.X.String(), v.W.String()}
		}
		return tensor.MatMul(v.X, v.W)
	})
	y := f(in{x, w})
	assert.Equal(t, []string{"f32[2,16]{dp}", "f32[16,3]{tp}"}, blockTypes)
	assert.Equal(t, "float32[8@dp,6@tp]", y.Type())
	assert.InDeltaSlice(t, tensor.MatMul(x, w).Float32s(), shard.Gather(y).Float32s(), 1e-3)
}

// LikeParams works as the out spec of a Map, where it is asked about
// per-device blocks: a moment's block matches its parameter's block.
func TestLikeParamsAsMapOutSpec(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	params := mlpModel()
	like := shard.LikeParams(params, shard.Specs{
		"Layers[*].W": shard.P(nil, "tp"),
		"Layers[0].B": shard.P("tp"),
		"Layers[1].B": shard.P(),
	})
	type state struct{ Params, Mu mlp }
	f := shard.Map(m, like, like, func(_ *shard.Ctx, s state) state { return s })
	out := f(state{params, params})
	for _, tree := range []mlp{out.Params, out.Mu} {
		assert.Equal(t, shard.P(nil, "tp"), specOf(t, tree.Layers[0].W))
		assert.Equal(t, shard.P("tp"), specOf(t, tree.Layers[0].B))
		assert.Equal(t, params.Layers[0].W.Float32s(), shard.Gather(tree.Layers[0].W).Float32s())
	}
}
