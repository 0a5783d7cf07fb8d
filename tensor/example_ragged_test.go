package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// A grouped matrix product: rows 0-1 are multiplied by w[0] (doubling),
// row 2 by w[1] (tripling), group 2 is empty, and row 3, past the groups,
// gives 0 — how a mixture of experts computes its experts on the tokens
// each received.
func ExampleRaggedDot() {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6, 7, 8}, 4, 2)
	eye := []float32{1, 0, 0, 1}
	var w []float32
	for _, s := range []float32{2, 3, 4} {
		for _, v := range eye {
			w = append(w, s*v)
		}
	}
	y := tensor.RaggedDot(x, tensor.FromFloat32(w, 3, 2, 2), tensor.FromInts([]int{2, 1, 0}))
	fmt.Println(y.Float32s())
	// Output:
	// [2 4 6 8 15 18 0 0]
}
