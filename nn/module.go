package nn

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Module is the interface Sequential composes: a layer applied to a batch,
// with a key for the layers that draw random numbers (Dropout) and that the
// others ignore. It is Equinox's __call__(x, *, key=None) in Go form.
//
// Every module of this package that maps one tensor to one tensor implements
// it next to its own Forward method, and so does Activation. Implement it on
// your own modules to put them in a Sequential. (MoE does not: its Forward
// returns an auxiliary loss a Sequential would silently drop.)
type Module interface {
	Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor
}

// Sequential applies its layers in order (eqx.nn.Sequential). Layers is an
// ordinary slice of interfaces: package pytree walks into the dynamic values,
// so the parameters of every layer are leaves of the Sequential.
type Sequential struct {
	Layers []Module
}

// NewSequential returns a Sequential of the given layers.
func NewSequential(layers ...Module) Sequential {
	for i, l := range layers {
		if l == nil {
			panic(fmt.Sprintf("nn.NewSequential: layer %d is nil", i))
		}
	}
	return Sequential{Layers: layers}
}

// Forward applies the layers in order. As in Equinox, key is split into one
// key per layer (key.Split(len(Layers))), so a Dropout gets fresh randomness
// wherever it sits; layers that need none ignore theirs.
func (s Sequential) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	if len(s.Layers) == 0 {
		return x
	}
	keys := key.Split(len(s.Layers))
	for i, l := range s.Layers {
		x = l.Call(x, keys[i])
	}
	return x
}

// Call is Forward; it makes a Sequential a Module, so Sequentials nest.
func (s Sequential) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor { return s.Forward(x, key) }

// InferenceMode returns a copy of model in which every Dropout, BatchNorm
// and SpectralNorm has its Inference field set to inference
// (eqx.nn.inference_mode): with true, dropout becomes the identity, batch
// normalisation uses its running statistics and spectral normalisation
// its power-iteration vectors as they are, for evaluation; with false,
// all are back to training. The copy shares every tensor with
// model, which is not changed.
//
// It finds Dropout, BatchNorm and SpectralNorm values wherever package
// pytree walks (pytree.MapType): exported fields not tagged static, pointers, slices,
// arrays, maps with string keys, interfaces (the layers of a Sequential)
// and Node children. Only the containers on the way to them are copied.
func InferenceMode[M any](model M, inference bool) M {
	model = pytree.MapType(model, func(d Dropout) Dropout {
		d.Inference = inference
		return d
	})
	model = pytree.MapType(model, func(b BatchNorm) BatchNorm {
		b.Inference = inference
		return b
	})
	// Every SpectralNorm, whatever layer it wraps, embeds its options.
	return pytree.MapType(model, func(o SpectralNormOptions) SpectralNormOptions {
		o.Inference = inference
		return o
	})
}
