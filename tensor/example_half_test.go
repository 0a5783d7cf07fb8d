package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Convert rounds float32 to bfloat16 (to nearest, ties to even); ops on
// bfloat16 operands compute in float32 and round once, and MatMulTo
// returns the float32 accumulator.
func ExampleConvert() {
	x := tensor.Convert(tensor.FromFloat32([]float32{0.1, 1, 257, 1e-3}, 2, 2), tensor.BFloat16)
	fmt.Println(x)
	fmt.Printf("%g\n", x)
	fmt.Println(x.At(0, 0), x.At(1, 0)) // the bf16 values nearest 0.1 and 257
	y := tensor.MatMul(x, x)
	fmt.Println(y, tensor.MatMulTo(x, x, false, false, tensor.Float32))
	fmt.Println(tensor.Sum(tensor.Ones(tensor.BFloat16, 1000)).Item()) // float32 accumulation
	// Output:
	// bf16[2,2]
	// [[  0.1     1]
	//  [  256 0.001]]
	// 0.10009765625 256
	// bf16[2,2] f32[2,2]
	// 1000
}
