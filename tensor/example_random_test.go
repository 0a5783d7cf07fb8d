package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// A key is made from a seed, as jax.random.key(seed) makes it, and prints
// like JAX's key_data.
func ExampleNewKey() {
	key := tensor.NewKey(42)
	fmt.Println(key)
	fmt.Println(key.Data())
	// Output:
	// key<fry>[0 42]
	// [0 42]
}

// The same key always gives the same numbers: JAX's, in this case (the
// jax.random module documentation prints 0.947667 and 0.00729382).
func ExampleUniform() {
	key := tensor.NewKey(0)
	fmt.Printf("%.6g\n", tensor.Uniform(key))
	fmt.Printf("%.6g\n", tensor.Uniform(key)) // reusing a key repeats the draw

	_, sub := key.Split2()
	fmt.Printf("%.6g\n", tensor.Uniform(sub))
	// Output:
	// 0.947667
	// 0.947667
	// 0.00729382
}

// The usual discipline: carry one key forward and split off a fresh subkey
// for every draw; never use a key twice.
func ExampleKey_Split2() {
	key := tensor.NewKey(1701)
	for step := range 3 {
		var sub tensor.Key
		key, sub = key.Split2()
		noise := tensor.Normal(sub, 2)
		fmt.Printf("step %d: %v\n", step, noise)
	}
	// Output:
	// step 0: f32[2]
	// step 1: f32[2]
	// step 2: f32[2]
}

// Split makes one key per consumer, here one per layer of a model.
func ExampleKey_Split() {
	keys := tensor.NewKey(0).Split(3)
	w1 := tensor.Normal(keys[0], 4, 8)
	w2 := tensor.TruncatedNormal(keys[1], -2, 2, 8, 2)
	drop := tensor.Bernoulli(keys[2], 0.9, 8)
	fmt.Println(w1, w2, drop)
	for _, k := range keys {
		fmt.Println(k)
	}
	// Output:
	// f32[4,8] f32[8,2] bool[8]
	// key<fry>[1797259609 2579123966]
	// key<fry>[928981903 3453687069]
	// key<fry>[4146024105 2718843009]
}

// FoldIn derives keys from data, such as a step number or a device index,
// without threading keys through the program. k.Split(n)[i] is
// FoldIn(k, i).
func ExampleFoldIn() {
	base := tensor.NewKey(0)
	fmt.Println(tensor.FoldIn(base, 3))
	fmt.Println(tensor.FoldIn(base, 3) == base.Split(5)[3])
	// Output:
	// key<fry>[2467461003 3840466878]
	// true
}

// Normal gives jax.random.normal's numbers (Deep Learning with R, 3rd
// edition, prints these three for key(123)).
func ExampleNormal() {
	x := tensor.Normal(tensor.NewKey(123), 3)
	fmt.Printf("%g\n", x)
	// Output:
	// [ 1.6359469  0.8408094 0.02212393]
}

// Element i of a draw depends only on the key and on i, so draws of
// different shapes from one key agree where they overlap.
func ExampleNormal_shapes() {
	key := tensor.NewKey(7)
	a := tensor.Normal(key, 2, 3).Float32s()
	b := tensor.Normal(key, 4).Float32s()
	fmt.Println(a[:4])
	fmt.Println(b)
	// Output:
	// [0.45123515 1.9534509 -0.51623946 -0.1409403]
	// [0.45123515 1.9534509 -0.51623946 -0.1409403]
}

func ExampleRandInt() {
	fmt.Printf("%d\n", tensor.RandInt(tensor.NewKey(0), 0, 20, 8))
	// Output:
	// [ 9  0 12 13 11  7 12  3]
}

func ExamplePermutation() {
	p := tensor.Permutation(tensor.NewKey(0), 8)
	fmt.Println(p)
	fmt.Printf("%d\n", p)
	// Output:
	// i32[8]
	// [0 1 5 6 4 3 2 7]
}

// Categorical samples one class per row of logits, with probability
// softmax(logits) along the axis.
func ExampleCategorical() {
	logits := tensor.FromFloat32([]float32{
		0, 0, 0, // uniform over 3 classes
		-100, 100, -100, // almost surely class 1
	}, 2, 3)
	s := tensor.Categorical(tensor.NewKey(0), logits, -1)
	fmt.Println(s)
	fmt.Println(s.Ints()[1])
	// Output:
	// i32[2]
	// 1
}
