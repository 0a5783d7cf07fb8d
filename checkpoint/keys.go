package checkpoint

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// KeyTensor returns a PRNG key as an int32 tensor of shape [2] (its two
// threefry words, bit for bit), so that it can live in a saved tree.
func KeyTensor(k tensor.Key) *tensor.Tensor {
	d := k.Data()
	return tensor.FromInt32([]int32{int32(d[0]), int32(d[1])}, 2)
}

// TensorKey is the inverse of KeyTensor. It panics if x is not an int32
// tensor of shape [2].
func TensorKey(x *tensor.Tensor) tensor.Key {
	if x.DType() != tensor.Int32 || x.Rank() != 1 || x.Dim(0) != 2 {
		panic(fmt.Sprintf("checkpoint.TensorKey: %v is not a key tensor i32[2]", x))
	}
	v := x.Int32s()
	return tensor.WrapKeyData([2]uint32{uint32(v[0]), uint32(v[1])})
}
