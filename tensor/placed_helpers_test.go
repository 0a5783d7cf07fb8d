package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// requirePlacedAsHost checks an op on xh placed by s under shard.Strict
// (nothing gathered): f's result has type yType and the host's values,
// and the gradient of Σ f(x)² has type gType and the host's gradient.
func requirePlacedAsHost(t *testing.T, s shard.Sharding, xh *tensor.Tensor, f func(*tensor.Tensor) *tensor.Tensor, yType, gType string) {
	t.Helper()
	x := shard.Put(xh, s)
	defer shard.Strict(s.Mesh())()
	y := f(x)
	require.Equal(t, yType, y.Type())
	require.Equal(t, f(xh).Float32s(), y.Float32s())
	loss := func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(f(x))) }
	_, g := autodiff.ValueAndGrad(loss)(x)
	_, gh := autodiff.ValueAndGrad(loss)(xh)
	require.Equal(t, gType, g.Type())
	require.Equal(t, gh.Float32s(), g.Float32s())
}
