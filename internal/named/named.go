// Package named gives a fresh tensor the logical axis names of another
// without leaving a second header over its storage.
//
// tensor.WithLogicalAxes returns a new header over the same storage, and
// every header counts as a holder of that storage (see tensor.Donate): a
// caller that names a result it alone holds and then drops the unnamed
// header keeps the storage from ever going back to the allocator cache.
// Like names the result and donates the unnamed header in one step.
package named

import "github.com/gonox/gonox/tensor"

// Like returns y with the logical axes of x when x has names, y has none
// and both have the same rank (as pytree.Map keeps names); otherwise y
// itself. y must be a new result that nothing but the caller holds (a
// fused update's output, a sum): when Like makes the named header it
// donates y's own, unless y is traced (its value then belongs to the
// trace). Nil y or x give y.
func Like(y, x *tensor.Tensor) *tensor.Tensor {
	if y == nil || x == nil || y == x || y.Rank() != x.Rank() || y.LogicalAxes() != nil {
		return y
	}
	ax := x.LogicalAxes()
	if ax == nil {
		return y
	}
	z := tensor.WithLogicalAxes(y, ax...)
	if !y.IsTraced() {
		tensor.Donate(y)
	}
	return z
}
