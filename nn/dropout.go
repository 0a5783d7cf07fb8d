package nn

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// Dropout zeroes each element with probability Rate during training and
// scales the survivors by 1/(1-Rate) (inverted dropout), so the expected
// value of every element is unchanged and inference needs no rescaling
// (eqx.nn.Dropout). With Inference set, or Rate 0, it is the identity.
//
// Dropout has no parameters; both fields are static. Switch a whole model
// between training and evaluation with InferenceMode.
type Dropout struct {
	// Rate is the probability of dropping an element, in [0, 1].
	Rate float64
	// Inference turns dropout off (Equinox's inference=True).
	Inference bool
}

// NewDropout returns a Dropout layer in training mode. (Equinox's default
// rate is 0.5.) It panics unless 0 <= rate <= 1.
func NewDropout(rate float64) Dropout {
	if !(rate >= 0 && rate <= 1) {
		panic(fmt.Sprintf("nn.NewDropout: rate %g is not in [0, 1]", rate))
	}
	return Dropout{Rate: rate}
}

// Forward applies dropout to x with the randomness of key: element i is kept
// when Bernoulli(key, 1-Rate)[i] is true, as jax.random.bernoulli draws it,
// so the same key drops the same elements. Use a fresh key for every call
// (split it from a per-step key). In inference mode key is not used.
func (d Dropout) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	if !(d.Rate >= 0 && d.Rate <= 1) {
		panic(fmt.Sprintf("nn.Dropout: rate %g is not in [0, 1]", d.Rate))
	}
	if d.Inference || d.Rate == 0 {
		return x
	}
	if !x.DType().IsFloat() {
		panic(fmt.Sprintf("nn.Dropout: x %v: want float32", x))
	}
	if d.Rate == 1 {
		// Everything is dropped; multiply by zero so x stays in the graph
		// with a zero gradient (x/0 would make it NaN).
		return tensor.MulScalar(x, 0)
	}
	q := 1 - d.Rate
	keep := tensor.Bernoulli(key, float32(q), x.Shape()...)
	scaled := tensor.Div(x, tensor.Scalar(float32(q))) // x/q, as Equinox computes it
	return tensor.Where(keep, scaled, tensor.Scalar(0))
}

// Call is Forward; it makes a Dropout a Module.
func (d Dropout) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor { return d.Forward(x, key) }
