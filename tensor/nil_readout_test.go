package tensor_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/tensor"
)

// Reading out a nil tensor (a loss function that returned nil, a field
// never set) panics naming the method, as the ops do for nil operands,
// not with a nil dereference.
func TestNilTensorReadouts(t *testing.T) {
	var x *tensor.Tensor
	tests := []struct {
		name string
		f    func()
	}{
		{"Item", func() { x.Item() }},
		{"At", func() { x.At(0) }},
		{"Float32s", func() { x.Float32s() }},
		{"Float64s", func() { x.Float64s() }},
		{"Int32s", func() { x.Int32s() }},
		{"Ints", func() { x.Ints() }},
		{"Int64s", func() { x.Int64s() }},
		{"Uint8s", func() { x.Uint8s() }},
		{"Bools", func() { x.Bools() }},
		{"RawFloat32", func() { x.RawFloat32() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			require.PanicsWithValue(t, "Tensor."+tt.name+": the tensor is nil", tt.f)
		})
	}
}
