package shard_test

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestGuideExplicitSharding runs the JAX guide's explicit-sharding section
// with plain ops: y = x @ w on float32[1024@dp,4096] and
// float32[4096,256@tp] is float32[1024@dp,256@tp] with no communication;
// resharding it to P() is an all-gather and to P('tp','dp') an all-to-all;
// all three hold the same values, equal to the host product.
func TestGuideExplicitSharding(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(0, 1))
	xh, wh := randT(r, 1024, 4096), randT(r, 4096, 256)
	x := shard.Put(xh, shard.NewSharding(m, shard.P("dp", nil)))
	w := shard.Put(wh, shard.NewSharding(m, shard.P(nil, "tp")))
	require.Equal(t, "float32[1024@dp,4096]", x.Type())
	require.Equal(t, "float32[4096,256@tp]", w.Type())

	var comm shard.Comm
	stop := shard.Record(m, &comm)
	y := tensor.MatMul(x, w)
	require.Equal(t, "float32[1024@dp,256@tp]", y.Type())
	require.Zero(t, comm.Bytes(m.Devices()[0], ""), "x @ w needs no communication")
	y = shard.Constraint(y, shard.NewSharding(m, shard.P("dp", "tp"))) // an assertion here: nothing moves
	require.Zero(t, comm.Bytes(m.Devices()[0], ""))

	y1 := shard.Reshard(y, shard.NewSharding(m, shard.P()))
	y2 := shard.Reshard(y, shard.NewSharding(m, shard.P("tp", "dp")))
	stop()
	assert.Equal(t, "float32[1024,256]", y1.Type())
	assert.Equal(t, "float32[1024@tp,256@dp]", y2.Type())
	// all-gather: each device receives the 7/8 of y it lacks
	block := int64(1024 / 4 * 256 / 2 * 4)
	assert.Equal(t, 7*block, comm.Bytes(m.Devices()[0], "all_gather"))
	assert.Equal(t, 1, comm.Calls("all_gather"))
	assert.Equal(t, 1, comm.Calls("all_to_all"))
	assert.Positive(t, comm.Bytes(m.Devices()[1], "all_to_all"))

	want := tensor.MatMul(xh, wh)
	requireClose(t, want, y, 1e-6, "y")
	assert.Equal(t, y.Float32s(), y1.Float32s())
	assert.Equal(t, y1.Float32s(), y2.Float32s())
}

func TestExplain(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(0, 2))
	x := shard.Put(randT(r, 16, 8), shard.NewSharding(m, shard.P("dp", nil)))
	w := shard.Put(randT(r, 8, 4), shard.NewSharding(m, shard.P(nil, "tp")))
	out := shard.Explain(m, func() {
		y := tensor.MatMul(x, w)
		s := tensor.Sum(y)
		_ = tensor.MulScalar(s, 2)
		_ = tensor.DynamicUpdateSlice(y, tensor.Zeros(tensor.Float32, 1, 4), []int{0, 0})
	})
	lines := strings.Split(strings.TrimSpace(out), "\n")
	require.GreaterOrEqual(t, len(lines), 3, out)
	assert.Equal(t, "matmul                float32[16@dp,8], float32[8,4@tp] -> float32[16@dp,4@tp]", lines[0])
	assert.Equal(t, "reduce_sum            float32[16@dp,4@tp] -> float32[]{partial (dp,tp)}", lines[1])
	assert.Contains(t, out, "psum 7 B/device") // 2·(8-1)/8 of 4 bytes
	assert.Contains(t, out, "[no rule: gather]")
}

func TestPropagationBadInput(t *testing.T) {
	m := guideMesh()
	other := shard.NewMeshOn(shard.Devices()[:8], []int{8}, []string{"x"})
	a := shard.Put(tensor.Ones(tensor.Float32, 8, 4), shard.NewSharding(m, shard.P("dp", nil)))
	b := shard.Put(tensor.Ones(tensor.Float32, 8, 4), shard.NewSharding(other, shard.P("x", nil)))
	requirePanicContains(t, func() { tensor.Add(a, b) },
		`shard: op "add" mixes float32[8@dp,4] on Mesh('dp': 4, 'tp': 2) with float32[8@x,4] on Mesh('x': 8); move one onto the other's mesh with shard.Put (or Reshard) first`)
	requirePanicContains(t, func() { shard.Constraint(a, shard.NewSharding(m, shard.P(nil, []string{"dp", "tp"}))) },
		"shard.Constraint: float32[8@dp,4] to PartitionSpec(None, ('dp', 'tp')): dim 1 (4) is not divisible by (dp,tp)=8; choose axes that divide the dimension, or pad it")
	func() {
		defer shard.Strict(m)()
		requirePanicContains(t, func() { tensor.DynamicUpdateSlice(a, tensor.Zeros(tensor.Float32, 1, 4), []int{0, 0}) },
			`shard: op "dynamic_update_slice" on float32[8@dp,4], float32[1,4] has no sharding rule and would gather its operands (shard.Strict is on)`)
	}()
	// Strict is off again: the fallback gathers.
	u := tensor.DynamicUpdateSlice(a, tensor.Zeros(tensor.Float32, 1, 4), []int{0, 0})
	assert.Equal(t, "float32[8,4]", u.Type()) // gathered: replicated
	assert.Equal(t, []float32{0, 0, 0, 0, 1, 1}, u.Float32s()[:6])
	// A Map block meeting a global tensor.
	requirePanicContains(t, func() {
		shard.Map(m, shard.P(), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			return tensor.Add(x, a)
		})(tensor.Ones(tensor.Float32, 8, 4))
	}, "a block inside shard.Map, with f32[8@dp,4], a global placed tensor; pass the global tensor into the Map through its input tree")
}

func requirePanicContains(t *testing.T, f func(), want string) {
	t.Helper()
	defer func() {
		r := recover()
		require.NotNil(t, r, "no panic; want %q", want)
		var msg string
		switch v := r.(type) {
		case error:
			msg = v.Error()
		case string:
			msg = v
		default:
			msg = strings.TrimSpace(strings.ReplaceAll(strings.ReplaceAll(strings.ReplaceAll(fmtAny(v), "\n", " "), "\t", " "), "  ", " "))
		}
		require.Contains(t, msg, want)
	}()
	f()
}

func fmtAny(v any) string { return fmt.Sprint(v) }

// TestVocabParallelCrossEntropy: softmax, log_softmax and cross-entropy
// over a class axis sharded over tp run in two passes (pmax, then psum of
// small per-row values): equal to the host, and the logits are never
// gathered.
func TestVocabParallelCrossEntropy(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(8, 8))
	zh := tensor.MulScalar(randT(r, 8, 16), 5)
	ids := make([]int32, 8)
	for i := range ids {
		ids[i] = int32(r.IntN(16))
	}
	labels := tensor.FromInt32(ids, 8)
	f := func(z *tensor.Tensor, l *tensor.Tensor) *tensor.Tensor {
		a := tensor.Mean(tensor.SoftmaxCrossEntropy(z, l))
		b := tensor.Sum(tensor.Square(tensor.Softmax(z, -1)))
		c := tensor.Mean(tensor.LogSoftmax(z, -1))
		return tensor.Add(a, tensor.Add(b, c))
	}
	want, wantG := autodiff.ValueAndGradWith(f)(zh, labels)
	z := shard.Put(zh, shard.NewSharding(m, shard.P("dp", "tp")))
	l := shard.Put(labels, shard.NewSharding(m, shard.P("dp")))
	defer shard.Strict(m)()
	var comm shard.Comm
	stop := shard.Record(m, &comm)
	got, gotG := autodiff.ValueAndGradWith(f)(z, l)
	stop()
	requireClose(t, want, got, 1e-5, "loss")
	requireClose(t, wantG, gotG, 1e-5, "grad")
	s, _ := shard.ShardingOf(gotG)
	assert.Equal(t, shard.P("dp", "tp"), s.Spec())
	assert.Zero(t, comm.Bytes(m.Devices()[0], "all_gather"), comm.String())
	assert.Zero(t, comm.Bytes(m.Devices()[0], "all_to_all"), comm.String())
	assert.Positive(t, comm.Calls("pmax"))
	// every collective moves per-row values or scalars: far less than the logits
	assert.Less(t, comm.Bytes(m.Devices()[0], ""), int64(zh.Bytes()), comm.String())
}
