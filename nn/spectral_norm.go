package nn

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// SpectralNormOptions configures NewSpectralNorm; a SpectralNorm embeds
// them, with the defaults filled in. The zero value gives
// eqx.nn.SpectralNorm's defaults on the weight of a Linear, Conv or
// ConvTranspose: one power iteration per call, eps 1e-12, training mode.
type SpectralNormOptions struct {
	// WeightPath is the path of the weight inside the layer, in the
	// syntax of pytree.Path (Equinox's weight_name). "" means the weight
	// of a Linear ("W", output axis 1: gonox stores it [in, out]), a Conv
	// ("Weight", axis 0) or a ConvTranspose ("Weight", axis 1), and
	// OutAxis is then ignored.
	WeightPath string
	// OutAxis is the weight's output dimension, used with WeightPath set:
	// the weight is viewed as a matrix [out, rest] with it moved first,
	// as Equinox views its [out, in, ...] weights (and PyTorch's
	// spectral_norm with dim=OutAxis). σ does not depend on it; the
	// shapes of the power-iteration vectors u [out] and v [rest] do.
	OutAxis int
	// Iterations is the number of power iterations per call in training
	// (num_power_iterations); 0 means 1.
	Iterations int
	// Eps bounds the norms divided by from below; 0 means 1e-12. Float64
	// weights use it to every digit, the others rounded to their dtype.
	Eps float64
	// Inference uses the power-iteration vectors in the State without
	// updating them (eqx.nn.SpectralNorm's inference=True); InferenceMode
	// sets it on every SpectralNorm of a model.
	Inference bool
}

// SpectralNorm divides the weight of a layer by (an estimate of) its
// largest singular value σ (eqx.nn.SpectralNorm; Miyato et al.,
// "Spectral Normalization for Generative Adversarial Networks", 2018):
// the layer is called with the weight W/σ, where, with W viewed as a
// matrix [out, rest] and u, v the power-iteration vectors of the State,
//
//	σ = uᵀ W v
//
// In training each call first runs Iterations power iterations on W
// (its gradient stopped) from the u, v of the State,
//
//	u = W v / max(‖W v‖, Eps),  v = Wᵀ u / max(‖Wᵀ u‖, Eps)
//
// and returns a State holding the new u and v; the gradient flows through
// σ as a function of W with u and v fixed, as in Equinox and PyTorch. In
// inference the State's u and v are used as they are and the State is
// returned unchanged. NewSpectralNorm starts u and v from normal draws
// improved by 15 power iterations, as Equinox does.
//
// PyTorch's torch.nn.utils.parametrizations.spectral_norm is the same map
// (its _u and _v are u and v, with dim = OutAxis).
type SpectralNorm[L Module] struct {
	Layer L
	// Index is the layer's entry in the State: u [out] and v [rest].
	Index StateIndex
	SpectralNormOptions
}

// NewSpectralNorm wraps layer in a SpectralNorm, drawing the initial u
// and v from key (split in two, as Equinox does). Build the model's State
// with MakeWithState. It panics if the weight is not found, has fewer than
// two dimensions or OutAxis is not one of them.
func NewSpectralNorm[L Module](key tensor.Key, layer L, opts SpectralNormOptions) SpectralNorm[L] {
	const fn = "nn.NewSpectralNorm"
	if opts.WeightPath == "" {
		opts.WeightPath, opts.OutAxis = defaultWeight(fn, layer)
	}
	if opts.Iterations < 0 || opts.Eps < 0 {
		panic(fmt.Sprintf("%s: %d iterations, eps %g", fn, opts.Iterations, opts.Eps))
	}
	if opts.Iterations == 0 {
		opts.Iterations = 1
	}
	if opts.Eps == 0 {
		opts.Eps = 1e-12
	}
	s := SpectralNorm[L]{Layer: layer, SpectralNormOptions: opts}
	w := s.matrix(fn)
	ukey, vkey := key.Split2()
	u := tensor.Convert(tensor.Normal(ukey, w.Dim(0)), w.DType())
	v := tensor.Convert(tensor.Normal(vkey, w.Dim(1)), w.DType())
	u, v = powerIterations(w, u, v, 15, opts.Eps)
	s.Index = NewStateIndex("spectral_norm", func() []*tensor.Tensor { return []*tensor.Tensor{u, v} })
	return s
}

// matrix returns the weight as a matrix [out, rest].
func (s SpectralNorm[L]) matrix(fn string) *tensor.Tensor {
	w := weightAt(fn, s.Layer, s.WeightPath)
	if w.Rank() < 2 || s.OutAxis < 0 || s.OutAxis >= w.Rank() || !w.DType().IsFloat() {
		panic(fmt.Sprintf("%s: weight %s %v, output axis %d: want a float weight of at least two dimensions", fn, s.WeightPath, w, s.OutAxis))
	}
	if s.OutAxis != 0 {
		perm := []int{s.OutAxis}
		for d := range w.Rank() {
			if d != s.OutAxis {
				perm = append(perm, d)
			}
		}
		w = tensor.Transpose(w, perm...)
	}
	return tensor.Reshape(w, w.Dim(0), -1)
}

// powerIterations runs n power iterations on the matrix w [m, k] from u
// [m] and v [k].
func powerIterations(w, u, v *tensor.Tensor, n int, eps float64) (*tensor.Tensor, *tensor.Tensor) {
	m, k := w.Dim(0), w.Dim(1)
	floor := scalarLike(w, eps)
	unit := func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Div(x, tensor.Maximum(tensor.Sqrt(tensor.Sum(tensor.Square(x))), floor))
	}
	for range n {
		u = unit(tensor.Reshape(tensor.MatMul(w, tensor.Reshape(v, k, 1)), m))
		v = unit(tensor.Reshape(tensor.MatMul(tensor.Reshape(u, 1, m), w), k))
	}
	return u, v
}

// Sigma returns σ = uᵀ W v for the u and v of state, without running
// power iterations.
func (s SpectralNorm[L]) Sigma(state State) *tensor.Tensor {
	uv := s.vectors(state)
	return sigma(s.matrix("nn.SpectralNorm"), uv[0], uv[1])
}

func sigma(w, u, v *tensor.Tensor) *tensor.Tensor {
	m, k := w.Dim(0), w.Dim(1)
	return tensor.Reshape(tensor.MatMul(tensor.MatMul(tensor.Reshape(u, 1, m), w), tensor.Reshape(v, k, 1)))
}

func (s SpectralNorm[L]) vectors(state State) []*tensor.Tensor {
	uv := state.Get(s.Index)
	if len(uv) != 2 {
		panic(fmt.Sprintf("nn.SpectralNorm: state entry %s holds %d tensors, want u and v", s.Index.Key(), len(uv)))
	}
	return uv
}

// Normalized returns the wrapped layer with its weight divided by σ, and
// the State with the updated u and v (unchanged in inference): the layer
// Forward runs.
func (s SpectralNorm[L]) Normalized(state State) (L, State) {
	const fn = "nn.SpectralNorm"
	uv := s.vectors(state)
	w := s.matrix(fn)
	u, v := uv[0], uv[1]
	if u.Rank() != 1 || v.Rank() != 1 || u.Dim(0) != w.Dim(0) || v.Dim(0) != w.Dim(1) {
		panic(fmt.Sprintf("%s: u %v, v %v do not fit the weight %s viewed as %v", fn, u, v, s.WeightPath, w))
	}
	if !s.Inference {
		u, v = powerIterations(tensor.StopGradient(w), u, v, s.Iterations, s.Eps)
		state = state.Set(s.Index, u, v)
	}
	weight := weightAt(fn, s.Layer, s.WeightPath)
	scaled := tensor.Div(weight, tensor.Convert(sigma(w, u, v), weight.DType()))
	return pytree.AtPath(s.Layer, s.WeightPath, scaled), state
}

// Forward calls the layer, its weight divided by σ, on x, and returns the
// output and the updated state.
func (s SpectralNorm[L]) Forward(x *tensor.Tensor, state State) (*tensor.Tensor, State) {
	return s.CallState(x, state, tensor.Key{})
}

// CallState is Forward, passing key on to the layer; it makes a
// SpectralNorm a StatefulModule for Sequential.ForwardState.
func (s SpectralNorm[L]) CallState(x *tensor.Tensor, state State, key tensor.Key) (*tensor.Tensor, State) {
	layer, state := s.Normalized(state)
	return layer.Call(x, key), state
}

// Call panics: a SpectralNorm needs a State (use Forward, or
// Sequential.ForwardState). It makes a SpectralNorm a Module, so that it
// can sit in a Sequential.
func (s SpectralNorm[L]) Call(*tensor.Tensor, tensor.Key) *tensor.Tensor {
	panic("nn.SpectralNorm: needs a State: call Forward(x, state), or Sequential.ForwardState")
}
