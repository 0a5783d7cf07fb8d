package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Tensors print their type with %v and their values, NumPy style, with a
// numeric verb.
func ExampleFromFloat32() {
	x := tensor.FromFloat32([]float32{1, 2.5, 3, 4, 5, 6}, 2, 3)
	fmt.Println(x)
	fmt.Println(x.Type())
	fmt.Printf("%g\n", x)
	fmt.Printf("%.2f\n", x)
	fmt.Printf("%d\n", tensor.Arange(5))
	fmt.Printf("%v %g\n", tensor.Scalar(7), tensor.Scalar(7))
	// Output:
	// f32[2,3]
	// float32[2,3]
	// [[  1 2.5   3]
	//  [  4   5   6]]
	// [[1.00 2.50 3.00]
	//  [4.00 5.00 6.00]]
	// [0 1 2 3 4]
	// f32[] 7
}

// Elementwise ops broadcast by NumPy's rules: a column plus a row makes a
// table.
func ExampleAdd() {
	col := tensor.FromFloat32([]float32{0, 10, 20}, 3, 1)
	row := tensor.FromFloat32([]float32{1, 2, 3, 4})
	sum := tensor.Add(col, row)
	fmt.Println(sum)
	fmt.Printf("%g\n", sum)
	// A scalar broadcasts against anything.
	fmt.Printf("%g\n", tensor.Mul(row, tensor.Scalar(0.5)))
	// Output:
	// f32[3,4]
	// [[ 1  2  3  4]
	//  [11 12 13 14]
	//  [21 22 23 24]]
	// [0.5   1 1.5   2]
}

// MatMul multiplies the last two dimensions and broadcasts the others.
func ExampleMatMul() {
	a := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
	b := tensor.FromFloat32([]float32{1, 0, 0, 1, 1, 1}, 3, 2)
	fmt.Printf("%g\n", tensor.MatMul(a, b))
	// A batch of 4 inputs against one weight matrix.
	batch := tensor.Ones(tensor.Float32, 4, 2, 3)
	fmt.Println(tensor.MatMul(batch, b))
	// A vector is a row on the left.
	fmt.Printf("%g\n", tensor.MatMul(tensor.FromFloat32([]float32{1, 1, 1}), b))
	// Output:
	// [[ 4  5]
	//  [10 11]]
	// f32[4,2,2]
	// [2 2]
}

// Reductions remove the reduced axes unless the Keep variant keeps them with
// size 1, ready to broadcast against the input.
func ExampleSumKeep() {
	x := tensor.FromFloat32([]float32{1, 3, 4, 2, 2, 4}, 2, 3)
	fmt.Println(tensor.Sum(x, 1), tensor.SumKeep(x, 1))
	fmt.Printf("%g\n", tensor.Div(x, tensor.SumKeep(x, 1)))
	fmt.Printf("%g\n", tensor.Max(x, 0))
	fmt.Printf("%d\n", tensor.ArgMax(x, -1))
	// Output:
	// f32[2] f32[2,1]
	// [[0.125 0.375   0.5]
	//  [ 0.25  0.25   0.5]]
	// [2 3 4]
	// [2 2]
}

// A Trace records the ops applied to its leaves; Backward computes
// vector-Jacobian products. Here the gradient of Σ x²·w with respect to x
// (2·x·w) and w (x²). Package autodiff wraps this as ValueAndGrad.
func ExampleBackward() {
	tr := tensor.NewTrace()
	x := tr.Leaf(tensor.FromFloat32([]float32{1, 2, 3}))
	w := tr.Leaf(tensor.FromFloat32([]float32{0.5, -1, 2}))
	loss := tensor.Sum(tensor.Mul(tensor.Square(x), w))
	fmt.Printf("loss %g\n", loss)

	grads := tensor.Backward(tr, []*tensor.Tensor{loss}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{x, w}, false)
	fmt.Printf("dx %g\n", grads[0])
	fmt.Printf("dw %g\n", grads[1])
	// Output:
	// loss 14.5
	// dx [ 1 -4 12]
	// dw [1 4 9]
}

// Traces nest, so a derivative can be differentiated again: d²/dx² x³ = 6x.
func ExampleNewTrace() {
	x := tensor.FromFloat32([]float32{1, 2})
	outer := tensor.NewTrace()
	xo := outer.Leaf(x)
	inner := tensor.NewTrace()
	xi := inner.Leaf(xo)
	y := tensor.Mul(tensor.Square(xi), xi)
	dy := tensor.Backward(inner, []*tensor.Tensor{y}, []*tensor.Tensor{tensor.OnesLike(y)}, []*tensor.Tensor{xi}, false)[0]
	d2y := tensor.Backward(outer, []*tensor.Tensor{dy}, []*tensor.Tensor{tensor.OnesLike(dy)}, []*tensor.Tensor{xo}, false)[0]
	fmt.Printf("%g %g\n", dy, d2y)
	// Output:
	// [ 3 12] [ 6 12]
}

// A training loop donates what it no longer needs: the next result of the
// same size reuses the storage, and any use of the donated tensor panics.
func ExampleDonate() {
	x := tensor.FromFloat32([]float32{1, 2, 3, 4}, 4)
	g := tensor.MulScalar(x, 2) // a result: storage the package allocated
	v := tensor.Reshape(g, 2, 2)
	tensor.Donate(g)
	fmt.Println(g.IsDonated(), v.IsDonated())
	fmt.Printf("%g\n", v) // a view keeps the storage alive
	defer func() { fmt.Println(recover()) }()
	tensor.Add(g, x)
	// Output:
	// true false
	// [[2 4]
	//  [6 8]]
	// tensor.Add: operand a f32[4] was donated (tensor.Donate)
}
