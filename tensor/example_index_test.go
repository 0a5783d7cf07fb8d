package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Take looks up rows of an embedding table by token id.
func ExampleTake() {
	table := tensor.FromFloat32([]float32{
		0.0, 0.1, // token 0
		1.0, 1.1, // token 1
		2.0, 2.1, // token 2
	}, 3, 2)
	tokens := tensor.FromInts([]int{2, 0, 2, -1}, 2, 2) // -1 is the last row
	emb := tensor.Take(table, tokens, 0)
	fmt.Println(emb)
	fmt.Printf("%g\n", emb)
	// Output:
	// f32[2,2,2]
	// [[[  2 2.1]
	//   [  0 0.1]]
	//
	//  [[  2 2.1]
	//   [  2 2.1]]]
}

// Concat joins along an axis and Split cuts back into equal parts.
func ExampleConcat() {
	a := tensor.FromInts([]int{1, 2, 3, 4}, 2, 2)
	b := tensor.FromInts([]int{5, 6}, 2, 1)
	c := tensor.Concat(1, a, b)
	fmt.Println(c)
	fmt.Printf("%d\n", c)

	parts := tensor.Split(tensor.Arange(6), 0, 3)
	for _, p := range parts {
		fmt.Printf("%v %d\n", p, p)
	}
	// Output:
	// i32[2,3]
	// [[1 2 5]
	//  [3 4 6]]
	// i32[2] [0 1]
	// i32[2] [2 3]
	// i32[2] [4 5]
}

// ScatterAdd accumulates updates at indices; repeated indices add up. It is
// how the gradient of an embedding lookup reaches the table.
func ExampleScatterAdd() {
	counts := tensor.Zeros(tensor.Float32, 4)
	ids := tensor.FromInts([]int{1, 3, 1, 1})
	ones := tensor.Ones(tensor.Float32, 4)
	fmt.Printf("%g\n", tensor.ScatterAdd(counts, ids, ones, 0))

	grads := tensor.FromFloat32([]float32{
		1, 1,
		2, 2,
		3, 3,
	}, 3, 2)
	table := tensor.Zeros(tensor.Float32, 2, 2)
	fmt.Printf("%g\n", tensor.ScatterAdd(table, tensor.FromInts([]int{0, 1, 0}), grads, 0))
	// Output:
	// [0 3 0 1]
	// [[4 4]
	//  [2 2]]
}
