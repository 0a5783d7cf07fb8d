package tensor_test

import (
	"sync"

	"github.com/gonox/gonox/tensor"
)

// fakeEnv is a device environment for testing Local marks: PsumMask
// multiplies by the product of the sizes of the summed axes (the sum over
// that many devices holding the same value) and records its calls.
type fakeEnv struct {
	names []string
	sizes []float32

	mu     sync.Mutex
	locals map[uint64]*tensor.Local
	psums  []uint64
}

func newFakeEnv(names []string, sizes []float32) *fakeEnv {
	return &fakeEnv{names: names, sizes: sizes, locals: map[uint64]*tensor.Local{}}
}

func (e *fakeEnv) AxisNames() []string { return e.names }

func (e *fakeEnv) Local(mask uint64) *tensor.Local {
	e.mu.Lock()
	defer e.mu.Unlock()
	if l, ok := e.locals[mask]; ok {
		return l
	}
	l := &tensor.Local{Env: e, Mask: mask}
	e.locals[mask] = l
	return l
}

func (e *fakeEnv) PsumMask(x *tensor.Tensor, mask uint64) *tensor.Tensor {
	e.mu.Lock()
	e.psums = append(e.psums, mask)
	e.mu.Unlock()
	f := float32(1)
	for i := range e.names {
		if mask&(1<<i) != 0 {
			f *= e.sizes[i]
		}
	}
	return tensor.MulScalar(x, f)
}
