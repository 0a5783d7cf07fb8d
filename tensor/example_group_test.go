package tensor_test

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Small parameters stepped together: each gradient is added as it becomes
// final (in a training step, from autodiff.OnGradient), and Flush, once
// the backward pass is done, steps those still waiting. SGD here, with a
// learning rate of 0.1: p ← p − 0.1·g.
func ExampleStepGroup() {
	var group tensor.StepGroup // the zero value is ready
	w := tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2)
	b := tensor.FromFloat32([]float32{0.5, -0.5}, 2)
	w2, _, stepW := tensor.SGDStepIntoLater(nil, w, nil, 0, -0.1, false)
	b2, _, stepB := tensor.SGDStepIntoLater(nil, b, nil, 0, -0.1, false)

	group.Add(stepB, tensor.FromFloat32([]float32{1, 1}, 2))
	group.Add(stepW, tensor.FromFloat32([]float32{10, 10, 10, 10}, 2, 2))
	group.Flush() // w2 and b2 are complete from here on

	fmt.Println(w2.Float32s(), b2.Float32s())
	// Output: [0 1 2 3] [0.4 -0.6]
}

// Host work beside tensor operations: the sort of some indices runs on a
// worker while the caller computes a sum, and wait returns once it is
// done.
func ExampleBeside() {
	x := tensor.FromFloat32([]float32{3, 1, 2}, 3)
	ids := []int{3, 1, 2}
	wait := tensor.Beside(x, func() {
		for i := 1; i < len(ids); i++ { // touches only ids
			for j := i; j > 0 && ids[j] < ids[j-1]; j-- {
				ids[j], ids[j-1] = ids[j-1], ids[j]
			}
		}
	})
	s := tensor.Sum(x) // meanwhile
	wait()             // exactly once, before reading ids
	fmt.Println(s.Item(), ids)
	// Output: 6 [1 2 3]
}
