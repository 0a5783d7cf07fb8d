package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// A SpectralNorm divides a layer's weight by its largest singular value,
// estimated by power iterations whose vectors live in an nn.State.
func ExampleSpectralNorm() {
	// W [in 2, out 3]: singular values 3 and 1.
	lin := nn.Linear{W: tensor.FromFloat32([]float32{0, 3, 0, 1, 0, 0}, 2, 3)}
	sn, state := nn.MakeWithState(nn.NewSpectralNorm(tensor.NewKey(0), lin, nn.SpectralNormOptions{}))
	x := tensor.FromFloat32([]float32{1, 2}, 1, 2)
	y, state := sn.Forward(x, state) // training: u and v advance
	fmt.Printf("σ ≈ %.4f\n", sn.Sigma(state).Float32s()[0])
	fmt.Printf("y = %.4f\n", y.Float32s())
	// Output:
	// σ ≈ 3.0000
	// y = [0.6667 1.0000 0.0000]
}

// A WeightNorm trains the direction and the magnitude of each output
// unit's weights separately.
func ExampleWeightNorm() {
	lin := nn.Linear{W: tensor.FromFloat32([]float32{3, 0, 4, 1}, 2, 2)}
	wn := nn.NewWeightNorm(lin, nn.WeightNormOptions{})
	fmt.Println("G:", wn.G.Float32s()) // the norm of each output column
	wn.G = tensor.FromFloat32([]float32{10, 3}, 1, 2)
	fmt.Println("weight:", wn.Weight().Float32s())
	// Output:
	// G: [5 1]
	// weight: [6 0 8 3]
}
