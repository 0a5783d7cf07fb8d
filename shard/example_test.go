package shard_test

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Linear is a dense layer whose parameters carry logical axis names, as
// nn constructors set them.
type Linear struct {
	W, B *tensor.Tensor
}

// MLP is a model: a plain Go struct.
type MLP struct {
	Layers []Linear
}

// newMLP builds an MLP embed -> mlp -> embed.
func newMLP(k tensor.Key, embed, hidden int) MLP {
	ks := k.Split(2)
	return MLP{Layers: []Linear{
		{W: tensor.WithLogicalAxes(tensor.Normal(ks[0], embed, hidden), "embed", "mlp"),
			B: tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, hidden), "mlp")},
		{W: tensor.WithLogicalAxes(tensor.Normal(ks[1], hidden, embed), "mlp", "embed"),
			B: tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, embed), "embed")},
	}}
}

// Shard a model on a 4x2 mesh by logical axis rules: parameters fully
// sharded over dp (FSDP) and their hidden dimension over tp (tensor
// parallelism).
func Example() {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	rules := shard.Rules{
		{"batch", shard.Axes{"dp"}},
		{"embed", shard.Axes{"dp"}},
		{"mlp", shard.Axes{"tp"}},
	}
	model := shard.FilterShard(newMLP(tensor.NewKey(0), 16, 32), mesh, rules)
	fmt.Println(pytree.Format(model))

	w := shard.MustCheck(model.Layers[0].W, "embed@dp mlp@tp")
	fmt.Println(w.Type())
	fmt.Print(shard.Visualize(w))
	// Output:
	// MLP{
	//   Layers: [
	//     Linear{W: f32[16@dp,32@tp], B: f32[32@tp]},
	//     Linear{W: f32[32@tp,16@dp], B: f32[16@dp]},
	//   ],
	// }
	// float32[16@dp,32@tp]
	// ┌───────────────────────┬───────────────────────┐
	// │         CPU 0         │         CPU 1         │
	// ├───────────────────────┼───────────────────────┤
	// │         CPU 2         │         CPU 3         │
	// ├───────────────────────┼───────────────────────┤
	// │         CPU 4         │         CPU 5         │
	// ├───────────────────────┼───────────────────────┤
	// │         CPU 6         │         CPU 7         │
	// └───────────────────────┴───────────────────────┘
}

// A logical name with no rule replicates its dimension, and two names that
// map to one mesh axis are an error, never a silent choice.
func ExampleRules() {
	rules := shard.Rules{
		{"batch", shard.Axes{"dp"}},
		{"heads", shard.Axes{"tp"}},
		{"kv", shard.Axes{"tp"}},
	}
	fmt.Println(rules.Spec("batch", "seq", "heads", "head_dim"))

	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	attn := struct{ Wqkv *tensor.Tensor }{
		tensor.WithLogicalAxes(tensor.Zeros(tensor.Float32, 8, 8), "heads", "kv"),
	}
	defer func() { fmt.Println(recover()) }()
	shard.FilterShard(attn, mesh, rules)
	// Output:
	// PartitionSpec('dp', None, 'tp', None)
	// shard.FilterShard: shard.Rules: Wqkv f32[8,8] ["heads" "kv"]: logical axes "heads" (dim 0) and "kv" (dim 1) both map to mesh axis "tp"
}

// Optimizer state mirrors the parameters; LikeParams places each moment
// like its parameter (ZeRO), whatever SpecTree placed the parameters.
func ExampleLikeParams() {
	type Adam struct {
		Step   *tensor.Tensor
		Mu, Nu MLP
	}
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	params := newMLP(tensor.NewKey(0), 16, 32)
	specs := shard.Specs{"Layers[*].W": shard.P("dp", "tp"), "": shard.P()}

	leaves, st := pytree.Flatten(params)
	for i, x := range leaves {
		leaves[i] = tensor.ZerosLike(x) // no logical names
	}
	zeros := pytree.Unflatten[MLP](st, leaves)
	state := Adam{Step: tensor.ScalarInt(0), Mu: zeros, Nu: zeros}

	state = shard.FilterShard(state, mesh, shard.LikeParams(params, specs))
	fmt.Println(pytree.Format(state))
	// Output:
	// Adam{
	//   Step: i32[],
	//   Mu: MLP{
	//     Layers: [
	//       Linear{W: f32[16@dp,32@tp], B: f32[32]},
	//       Linear{W: f32[32@dp,16@tp], B: f32[16]},
	//     ],
	//   },
	//   Nu: MLP{
	//     Layers: [
	//       Linear{W: f32[16@dp,32@tp], B: f32[32]},
	//       Linear{W: f32[32@dp,16@tp], B: f32[16]},
	//     ],
	//   },
	// }
}

// A Scope checks several tensors against each other: a name takes the
// size it first had.
func ExampleScope() {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := shard.Put(tensor.Zeros(tensor.Float32, 64, 16), shard.NewSharding(mesh, shard.P("dp")))
	w := shard.Put(tensor.Zeros(tensor.Float32, 16, 8), shard.NewSharding(mesh, shard.P(nil, "tp")))
	y := shard.Put(tensor.Zeros(tensor.Float32, 64, 8), shard.NewSharding(mesh, shard.P("dp")))

	var s shard.Scope
	fmt.Println(s.Check(x, "batch@dp embed"))
	fmt.Println(s.Check(w, "embed mlp@tp"))
	fmt.Println(s.Check(y, "batch@dp mlp@tp"))
	fmt.Println(s.Check(w, "mlp embed@tp"))
	fmt.Println(s.Check(x, "batch@dp embed@"))
	// Output:
	// <nil>
	// <nil>
	// shard.Check: float32[64@dp,8] against "batch@dp mlp@tp": dim 1 (mlp) is replicated, want sharded over tp
	// shard.Check: float32[16,8@tp] against "mlp embed@tp": dim 0 (mlp) is 16, but mlp was bound to 8 by an earlier check
	// shard.Check: bad spec "batch@dp embed@": offset 15: want a mesh axis name after @
}

// Visualize draws which devices hold which block, as
// jax.debug.visualize_array_sharding does.
func ExampleVisualize() {
	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := shard.Put(tensor.Zeros(tensor.Float32, 8, 8), shard.NewSharding(mesh, shard.P("dp", nil)))
	fmt.Print(shard.Visualize(x))
	v := shard.Put(tensor.Zeros(tensor.Float32, 8), shard.NewSharding(mesh, shard.P([]string{"dp", "tp"})))
	fmt.Print(shard.Visualize(v))
	// Output:
	// ┌───────────────────────┐
	// │        CPU 0,1        │
	// ├───────────────────────┤
	// │        CPU 2,3        │
	// ├───────────────────────┤
	// │        CPU 4,5        │
	// ├───────────────────────┤
	// │        CPU 6,7        │
	// └───────────────────────┘
	// ┌───────┬───────┬───────┬───────┬───────┬───────┬───────┬───────┐
	// │ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │
	// └───────┴───────┴───────┴───────┴───────┴───────┴───────┴───────┘
}
