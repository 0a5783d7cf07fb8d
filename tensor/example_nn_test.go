package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

func ExampleTopK() {
	// Router scores of 2 tokens over 4 experts: pick the best 2 of each.
	scores := tensor.FromFloat32([]float32{
		0.1, 0.7, 0.7, 0.2,
		0.9, 0.0, 0.3, 0.5,
	}, 2, 4)
	values, indices := tensor.TopK(scores, 2)
	fmt.Println(values)
	fmt.Printf("%g\n", values)
	fmt.Printf("%d\n", indices) // ties go to the lower index
	// Output:
	// f32[2,2]
	// [[0.7 0.7]
	//  [0.9 0.5]]
	// [[1 2]
	//  [0 3]]
}

func ExampleLexSort() {
	// Sort tokens by expert id, then by priority: the last
	// key is the primary one, as in jnp.lexsort.
	expert := tensor.FromInt32([]int32{2, 0, 1, 0, 2, 1})
	priority := tensor.FromFloat32([]float32{0.5, 0.9, 0.1, 0.2, 0.3, 0.1})
	order := tensor.LexSort(priority, expert)
	// Equal keys keep their order: tokens 2 and 5 tie on both keys.
	fmt.Printf("%d\n", order)
	// Output:
	// [3 1 2 5 4 0]
}

func ExampleSoftmax() {
	logits := tensor.FromFloat32([]float32{
		1, 2, 3,
		1000, 1000, -1000, // no overflow: the row maximum is subtracted first
	}, 2, 3)
	fmt.Printf("%.4f\n", tensor.Softmax(logits, -1))
	fmt.Printf("%.4f\n", tensor.LogSoftmax(logits, -1))
	// Output:
	// [[0.0900 0.2447 0.6652]
	//  [0.5000 0.5000 0.0000]]
	// [[   -2.4076    -1.4076    -0.4076]
	//  [   -0.6931    -0.6931 -2000.6931]]
}

func ExampleSoftmaxCrossEntropy() {
	logits := tensor.FromFloat32([]float32{
		2, 0, 0,
		0, 0, 0,
	}, 2, 3)
	labels := tensor.FromInt32([]int32{0, 2})
	loss := tensor.SoftmaxCrossEntropy(logits, labels) // one loss per example
	fmt.Println(loss)
	fmt.Printf("%.4f\n", loss)
	fmt.Printf("%.4f\n", tensor.Mean(loss))

	// Its gradient with respect to the logits is softmax - onehot(label).
	tr := tensor.NewTrace()
	z := tr.Leaf(logits)
	l := tensor.Mean(tensor.SoftmaxCrossEntropy(z, labels))
	g := tensor.Backward(tr, []*tensor.Tensor{l}, []*tensor.Tensor{tensor.Scalar(1)}, []*tensor.Tensor{z}, false)[0]
	fmt.Printf("%.4f\n", g)
	// Output:
	// f32[2]
	// [0.2395 1.0986]
	// 0.6691
	// [[-0.1065  0.0533  0.0533]
	//  [ 0.1667  0.1667 -0.3333]]
}

func ExampleMatMulBiasAct() {
	// A Linear layer with ReLU as one op: relu(x @ w + b).
	x := tensor.FromFloat32([]float32{
		1, 2,
		-1, 0,
	}, 2, 2)
	w := tensor.FromFloat32([]float32{
		1, -1, 0.5,
		1, 1, -2,
	}, 2, 3)
	b := tensor.FromFloat32([]float32{0, 0.5, 1}, 3)
	fmt.Printf("%g\n", tensor.MatMulBiasAct(x, w, b, tensor.ActRelu))
	// Output:
	// [[  3 1.5   0]
	//  [  0 1.5 0.5]]
}
