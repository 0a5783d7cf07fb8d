// Command kernels prints the kernel sets (GONOX_KERNELS values) this CPU and
// build support, best first, one per line. .ci/run runs the tests under
// each.
package main

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

func main() {
	_, supported, _ := tensor.Kernels()
	for _, s := range supported {
		fmt.Println(s)
	}
}
