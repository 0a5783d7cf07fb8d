package optim_test

import (
	"fmt"

	"github.com/gonox/gonox/optim"
)

// PyTorch's SGD(lr=0.1, momentum=0.9, dampening=0.1) under
// CyclicLR(base_lr=0.01, max_lr=0.1, step_size_up=2,
// mode="triangular2", cycle_momentum=False), stepped after every update:
// the rate of update n is the schedule's value n (PyTorch's
// param_groups[0]["lr"] before its n-th step: the same nine rates).
func ExampleCyclic() {
	lr := optim.Cyclic(0.01, 0.1, 2, optim.CyclicOptions{Mode: optim.CyclicTriangular2})
	for n := range 9 {
		fmt.Printf("%.4f ", lr(n))
	}
	fmt.Println()
	tx := optim.SGD(lr, optim.SGDOptions{Momentum: 0.9, Dampening: 0.1}) // PyTorch's optimizer
	_ = tx
	// Output:
	// 0.0100 0.0550 0.1000 0.0550 0.0100 0.0325 0.0550 0.0325 0.0100
}
