package nn

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// WeightNormOptions configures NewWeightNorm. The zero value normalises
// the weight of a Linear, Conv or ConvTranspose over every axis but its
// output axis, as eqx.nn.WeightNorm does with its defaults.
type WeightNormOptions struct {
	// WeightPath is the path of the weight inside the layer, in the
	// syntax of pytree.Path ("W", "Layers[0].W"): Equinox's weight_name.
	// "" means the weight of a Linear ("W", output axis 1: gonox stores
	// it [in, out]), a Conv ("Weight", axis 0) or a ConvTranspose
	// ("Weight", axis 1), and Axis is then ignored.
	WeightPath string
	// Axis is the dimension of the weight that the norm is not taken
	// over: one norm, and one entry of G, per index along it (Equinox's
	// axis). It is used only with WeightPath set; 0 there, as in
	// Equinox, whose weights are stored [out, in, ...].
	Axis int
	// AllAxes takes one norm over the whole weight (Equinox's
	// axis=None): G is then a single number.
	AllAxes bool
}

// WeightNorm reparameterises the weight of a layer as a direction and a
// magnitude (eqx.nn.WeightNorm; Salimans and Kingma, "Weight
// Normalization", 2016): the layer is called with the weight
//
//	w = G · v / ‖v‖
//
// where v is the weight stored in Layer (it stays a parameter, trained as
// usual) and the norm ‖v‖ is taken over every axis but Axis, one per
// output unit. G starts at ‖v‖, so a fresh WeightNorm computes what its
// layer does. G keeps the weight's rank with 1 for every normed axis
// (Linear [in, out]: G is [1, out]), as Equinox's keepdims norm.
//
// PyTorch's torch.nn.utils.parametrizations.weight_norm is the same map:
// its weight_g is G and its weight_v is v (transposed for a Linear).
type WeightNorm[L Module] struct {
	Layer L
	// G is the magnitude, the shape of the weight with 1 on every normed
	// axis.
	G *tensor.Tensor
	// WeightPath is the weight's path in Layer; Axis the axis kept out of
	// the norm, or -1 for a norm over every axis (static).
	WeightPath string
	Axis       int
}

// NewWeightNorm wraps layer in a WeightNorm; G starts at the norm of the
// layer's weight. It panics if the weight is not found (naming the path)
// or Axis is not one of its dimensions.
func NewWeightNorm[L Module](layer L, opts WeightNormOptions) WeightNorm[L] {
	path, axis := opts.WeightPath, opts.Axis
	if path == "" {
		path, axis = defaultWeight("nn.NewWeightNorm", layer)
	}
	if opts.AllAxes {
		axis = -1
	}
	w := weightAt("nn.NewWeightNorm", layer, path)
	if axis < -1 || axis >= w.Rank() {
		panic(fmt.Sprintf("nn.NewWeightNorm: axis %d of weight %s %v", axis, path, w))
	}
	wn := WeightNorm[L]{Layer: layer, WeightPath: path, Axis: axis}
	wn.G = wn.norm(w)
	return wn
}

// norm is ‖v‖ over every axis but Axis, keeping the dimensions.
func (wn WeightNorm[L]) norm(v *tensor.Tensor) *tensor.Tensor {
	axes := make([]int, 0, v.Rank())
	for d := range v.Rank() {
		if d != wn.Axis {
			axes = append(axes, d)
		}
	}
	return tensor.Sqrt(tensor.SumKeep(tensor.Square(v), axes...))
}

// Weight returns the normalised weight G·v/‖v‖ the layer is called with.
func (wn WeightNorm[L]) Weight() *tensor.Tensor {
	v := weightAt("nn.WeightNorm", wn.Layer, wn.WeightPath)
	if !slices.Equal(shapeKeep(v.Shape(), wn.Axis), wn.G.Shape()) {
		panic(fmt.Sprintf("nn.WeightNorm: G %v does not fit weight %s %v (axis %d)", wn.G, wn.WeightPath, v, wn.Axis))
	}
	return tensor.Mul(v, tensor.Div(wn.G, wn.norm(v)))
}

// shapeKeep is shape with every dimension but axis set to 1.
func shapeKeep(shape []int, axis int) []int {
	out := make([]int, len(shape))
	for i := range out {
		out[i] = 1
		if i == axis {
			out[i] = shape[i]
		}
	}
	return out
}

// Normalized returns the wrapped layer with its weight replaced by the
// normalised one: the layer Call runs.
func (wn WeightNorm[L]) Normalized() L {
	return pytree.AtPath(wn.Layer, wn.WeightPath, wn.Weight())
}

// Forward calls the layer with the normalised weight (and the zero key).
func (wn WeightNorm[L]) Forward(x *tensor.Tensor) *tensor.Tensor {
	return wn.Normalized().Call(x, tensor.Key{})
}

// Call calls the layer with the normalised weight, passing key on; it
// makes a WeightNorm a Module.
func (wn WeightNorm[L]) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	return wn.Normalized().Call(x, key)
}

// defaultWeight returns the path and output axis of the weight of the
// layers this package knows.
func defaultWeight(fn string, layer any) (string, int) {
	switch layer.(type) {
	case Linear:
		return "W", 1
	case Conv:
		return "Weight", 0
	case ConvTranspose:
		return "Weight", 1
	}
	panic(fmt.Sprintf("%s: a %T has no default weight: set WeightPath (and its output axis)", fn, layer))
}

// weightAt returns the tensor at path in layer, panicking if there is none.
func weightAt(fn string, layer any, path string) *tensor.Tensor {
	paths, leaves := pytree.LeavesWithPath(layer)
	for i, p := range paths {
		if p.String() == path {
			return leaves[i]
		}
	}
	panic(fmt.Sprintf("%s: a %T has no tensor at %q (its leaves: %v)", fn, layer, path, paths))
}
