package pytree_test

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Layer and Net are ordinary Go structs: exported tensor fields are the
// leaves, everything else is static.
type Layer struct {
	W, B *tensor.Tensor
	Size int
}

type Net struct {
	Layers []Layer
	Steps  *tensor.Tensor // an int32 counter: not trainable
	Name   string
}

func newNet() *Net {
	return &Net{
		Layers: []Layer{
			{W: tensor.Ones(tensor.Float32, 2, 3), B: tensor.Zeros(tensor.Float32, 3), Size: 3},
			{W: tensor.Ones(tensor.Float32, 3, 1), B: tensor.Zeros(tensor.Float32, 1), Size: 1},
		},
		Steps: tensor.ScalarInt(0),
		Name:  "net",
	}
}

// Partition splits a model into the part to differentiate or update and
// the rest, like eqx.partition; Combine puts it back together.
func ExamplePartition() {
	net := newNet()
	params, rest := pytree.Partition(net, pytree.IsInexact)
	fmt.Println(pytree.Format(params))
	fmt.Println(pytree.Format(rest))

	// ... update params ...
	params = pytree.Map(params, func(w *tensor.Tensor) *tensor.Tensor { return tensor.MulScalar(w, 0.5) })

	net2 := pytree.Combine(params, rest)
	fmt.Println(net2.Layers[0].W.Float32s()[0], net2.Steps.Item(), net2.Name)
	// Output:
	// Net{
	//   Layers: [
	//     Layer{W: f32[2,3], B: f32[3], Size: 3},
	//     Layer{W: f32[3,1], B: f32[1], Size: 1},
	//   ],
	//   Steps: nil,
	//   Name: "net",
	// }
	// Net{
	//   Layers: [Layer{W: nil, B: nil, Size: 3}, Layer{W: nil, B: nil, Size: 1}],
	//   Steps: i32[],
	//   Name: "net",
	// }
	// 0.5 0 net
}

// Map applies a function to every leaf and returns a new tree; MapN zips
// several trees, as an optimizer step zips parameters and gradients.
func ExampleMap() {
	net := newNet()
	params, _ := pytree.Partition(net, pytree.IsInexact)
	grads := pytree.Map(params, func(w *tensor.Tensor) *tensor.Tensor { return tensor.FullLike(w, 0.1) })
	const lr = 0.5
	params = pytree.MapN(func(x []*tensor.Tensor) *tensor.Tensor {
		p, g := x[0], x[1]
		return tensor.Sub(p, tensor.MulScalar(g, lr))
	}, params, grads)
	fmt.Println(params.Layers[0].W.Float32s()[0], params.Layers[0].B.Float32s()[0])
	fmt.Println(net.Layers[0].W.Float32s()[0]) // the input is unchanged
	// Output:
	// 0.95 -0.05
	// 1
}

// At replaces one node out of place, like eqx.tree_at. AtPath does the
// same with a path string.
func ExampleAt() {
	net := newNet()
	w := tensor.Full(tensor.Float32, 7, 3, 1)
	net2 := pytree.At(net, func(n **Net) **tensor.Tensor { return &(*n).Layers[1].W }, w)
	net3 := pytree.AtPath(net2, "Layers[0].Size", 4)
	fmt.Println(net3.Layers[1].W.Float32s(), net3.Layers[0].Size)
	fmt.Println(net.Layers[1].W.Float32s(), net.Layers[0].Size) // the input is unchanged
	// Output:
	// [7 7 7] 4
	// [1 1 1] 3
}

// Format prints a tree like Equinox prints a module.
func ExampleFormat() {
	fmt.Println(pytree.Format(newNet().Layers[1]))
	fmt.Println(pytree.Format(newNet()))
	// Output:
	// Layer{W: f32[3,1], B: f32[1], Size: 1}
	// Net{
	//   Layers: [
	//     Layer{W: f32[2,3], B: f32[3], Size: 3},
	//     Layer{W: f32[3,1], B: f32[1], Size: 1},
	//   ],
	//   Steps: i32[],
	//   Name: "net",
	// }
}

// Flatten returns the leaves and the structure; Unflatten rebuilds a tree
// from new leaves.
func ExampleFlatten() {
	leaves, s := pytree.Flatten(newNet())
	fmt.Println(len(leaves), s)
	for i, x := range leaves {
		leaves[i] = tensor.ZerosLike(x)
	}
	zero := pytree.Unflatten[*Net](s, leaves)
	fmt.Println(zero.Layers[0].W.Float32s())
	// Output:
	// 5 &Net{Layers: [Layer{W: *, B: *}, Layer{W: *, B: *}], Steps: *}
	// [0 0 0 0 0 0]
}

// Paths name leaves; PathGlob selects them.
func ExampleLeavesWithPath() {
	paths, leaves := pytree.LeavesWithPath(newNet())
	for i, p := range paths {
		fmt.Println(p, leaves[i])
	}
	ws := pytree.Filter(newNet(), pytree.PathGlob("Layers[*].W"))
	fmt.Println(pytree.Paths(ws))
	// Output:
	// Layers[0].W f32[2,3]
	// Layers[0].B f32[3]
	// Layers[1].W f32[3,1]
	// Layers[1].B f32[1]
	// Steps i32[]
	// [Layers[0].W Layers[1].W]
}
