package nn

import (
	"cmp"
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// BatchNormOptions configures NewBatchNorm. The zero value gives eps 1e-5,
// momentum 0.99, a weight of ones and a bias of zeros, running statistics
// starting at mean 0 and variance 1, and statistics over the whole global
// batch under data parallelism.
type BatchNormOptions struct {
	// Eps is added to the variance; 0 means 1e-5. Float64 batches add it
	// to every digit, the others rounded to float32.
	Eps float64
	// Momentum is the weight of the old running statistics in each
	// update, running = Momentum·running + (1-Momentum)·batch, as in
	// Equinox and Flax; 0 means 0.99. PyTorch's momentum m is 1-m here
	// (its default 0.1 is 0.9). Float64 running statistics use it to
	// every digit, the others rounded to float32.
	Momentum float64
	// NoAffine leaves out the weight and bias (channelwise_affine=False).
	NoAffine bool
	// UnbiasedRunningVar updates the running variance with the unbiased
	// batch variance (divided by n-1), as PyTorch does; by default the
	// biased one, as Equinox and Flax. Normalisation always uses the
	// biased variance.
	UnbiasedRunningVar bool
	// PerDevice computes the statistics of each device's slice of the
	// batch alone when the layer runs inside shard.Map (PyTorch's
	// BatchNorm under DDP). By default they are those of the global
	// batch: summed over the mesh axes the input varies over (psum), as
	// Equinox's axis_name and PyTorch's SyncBatchNorm, so training does
	// not depend on the mesh; the cost is one all-reduce of 3·channels
	// floats per layer and step. Outside shard.Map (one device, or
	// sharding propagation) the statistics are always the global batch's.
	PerDevice bool
	// Axis is the logical name of the channel dimension of the weight,
	// the bias and the running statistics; "" sets none.
	Axis string
}

// BatchNorm normalises each channel of channels-first batches by its
// mean and variance over the batch and spatial dimensions, then scales and
// shifts it (eqx.nn.BatchNorm, PyTorch's BatchNorm1d/2d/3d):
//
//	y = (x - mean) / √(var + Eps) · Weight + Bias
//
// In training (the default) mean and var are the batch's, and the running
// statistics in the State are updated; in inference (InferenceMode, or
// Inference set) the running statistics are used and the State is
// returned unchanged. x is [N, C, spatial...] with any number of spatial
// dimensions, [N, C] included. In training, unless the statistics are
// summed over devices (psum), the statistics and the normalisation are
// one tensor.BatchNorm, whose backward pass computes the input gradient
// in one formula.
type BatchNorm struct {
	Weight *tensor.Tensor // f32[C], or nil
	Bias   *tensor.Tensor // f32[C], or nil
	// Index is the layer's entry in the State: running mean and variance.
	Index StateIndex

	Eps, Momentum      float64
	UnbiasedRunningVar bool
	PerDevice          bool
	// Inference uses the running statistics (eqx.nn.BatchNorm's
	// inference=True); InferenceMode sets it on every BatchNorm of a
	// model.
	Inference bool
}

// NewBatchNorm returns a BatchNorm over channels channels in training mode.
// Build the model's State with MakeWithState.
func NewBatchNorm(channels int, opts BatchNormOptions) BatchNorm {
	if channels < 1 {
		panic(fmt.Sprintf("nn.NewBatchNorm: %d channels", channels))
	}
	if opts.Momentum < 0 || opts.Momentum >= 1 {
		panic(fmt.Sprintf("nn.NewBatchNorm: momentum %g is not in [0, 1)", opts.Momentum))
	}
	b := BatchNorm{Eps: opts.Eps, Momentum: opts.Momentum, UnbiasedRunningVar: opts.UnbiasedRunningVar, PerDevice: opts.PerDevice}
	if b.Eps == 0 {
		b.Eps = defaultEps
	}
	if b.Momentum == 0 {
		b.Momentum = 0.99
	}
	if !opts.NoAffine {
		b.Weight = withAxes(tensor.Ones(tensor.Float32, channels), opts.Axis)
		b.Bias = withAxes(tensor.Zeros(tensor.Float32, channels), opts.Axis)
	}
	axis := opts.Axis
	b.Index = NewStateIndex("batch_norm", func() []*tensor.Tensor {
		return []*tensor.Tensor{
			withAxes(tensor.Zeros(tensor.Float32, channels), axis),
			withAxes(tensor.Ones(tensor.Float32, channels), axis),
		}
	})
	return b
}

// Forward normalises x [N, C, spatial...] and returns the result and the
// state with updated running statistics (unchanged in inference).
func (b BatchNorm) Forward(x *tensor.Tensor, state State) (*tensor.Tensor, State) {
	return b.ForwardAct(x, state, nil)
}

// ForwardAct returns act(y) and the new state for y, state of Forward(x,
// state); nil act means none. For float32 and float64 batches, an
// activation of this package that tensor.BiasAct fuses (Relu above all)
// is applied by the normalising sweep itself (tensor.ChannelAffine): for
// Relu one pass over the batch and one activation-sized result fewer. The
// values and gradients are those of the composition.
func (b BatchNorm) ForwardAct(x *tensor.Tensor, state State, act Activation) (*tensor.Tensor, State) {
	return b.ForwardResidual(x, nil, state, act)
}

// ForwardResidual returns act(y + residual) and the new state for y,
// state of Forward(x, state): the end of a ResNet block (normalisation,
// the block's input added, activation); a nil residual adds nothing, nil
// act applies none. For float32 and float64 batches with Relu (or no
// activation) the sum and the activation are applied by the normalising
// sweep itself (tensor.ChannelAffineAdd): two passes over the batch and
// two activation-sized results fewer forward, and backward the ReLU's
// mask applied by the gradient's sweep when the residual needs no
// gradient. The values and gradients are those of the composition.
func (b BatchNorm) ForwardResidual(x, residual *tensor.Tensor, state State, act Activation) (*tensor.Tensor, State) {
	requireInput("nn.BatchNorm", "x", x)
	if residual != nil && !slices.Equal(residual.Shape(), x.Shape()) {
		panic(fmt.Sprintf("nn.BatchNorm: x %v, residual %v: want a residual of x's shape", x, residual))
	}
	y, state := b.forward(x, residual, state, act)
	if act != nil && !b.fuses(x, act) {
		y = act(y)
	}
	return y, state
}

// addResidual returns y + r, or y if r is nil.
func addResidual(y, r *tensor.Tensor) *tensor.Tensor {
	if r == nil {
		return y
	}
	return tensor.Add(y, r)
}

// fuses reports whether the normalisation of x applies act itself.
func (b BatchNorm) fuses(x *tensor.Tensor, act Activation) bool {
	_, ok := act.Fused()
	return ok && fusedAffine(x)
}

// forward is ForwardResidual, act applied only where fused.
func (b BatchNorm) forward(x, res *tensor.Tensor, state State, act Activation) (*tensor.Tensor, State) {
	fa := tensor.ActIdentity
	if b.fuses(x, act) {
		fa, _ = act.Fused()
	}
	run := state.Get(b.Index)
	if len(run) != 2 || x.Rank() < 2 || x.Dim(1) != run[0].Dim(0) || !x.DType().IsFloat() {
		panic(fmt.Sprintf("nn.BatchNorm: x %v: want float [N, %d, ...]", x, run[0].Dim(0)))
	}
	if !fusedAffine(x) { // float32 and float64 convert the parameters; others do not
		requireParamDType("nn.BatchNorm", x, cmp.Or(b.Weight, b.Bias))
	}
	shape := channelShape(x)
	if b.Inference {
		mean, variance := tensor.Reshape(run[0], shape...), tensor.Reshape(run[1], shape...)
		return b.normalize(x, res, mean, variance, shape, fa), state
	}
	axes := make([]int, 0, x.Rank()-1)
	for d := 0; d < x.Rank(); d++ {
		if d != 1 {
			axes = append(axes, d)
		}
	}
	n := float32(x.Size() / x.Dim(1))
	count := tensor.Scalar(n)
	var mean, variance, y *tensor.Tensor
	switch {
	case fusedAffine(x) && (b.PerDevice || !varies(x)):
		// The statistics and the normalisation as one primitive, whose
		// backward pass computes the input gradient in one formula.
		var w, bias *tensor.Tensor
		if b.Weight != nil {
			w = tensor.Convert(b.Weight, x.DType())
		}
		if b.Bias != nil {
			bias = tensor.Convert(b.Bias, x.DType())
		}
		y, mean, variance = tensor.BatchNorm(x, w, bias, res, b.Eps, fa)
	case fusedAffine(x):
		// Sum and centred sum of squares in one sweep; under shard.Map
		// the devices' moments are combined exactly (Chan et al.):
		// q = Σ_d q_d + n_d·(mean_d - mean)².
		s, q := tensor.ChannelMoments(x)
		s, q = tensor.Reshape(s, shape...), tensor.Reshape(q, shape...)
		sum := s
		if !b.PerDevice {
			sum, count = psumVarying(x, s), psumVarying(x, count)
		}
		mean = tensor.Div(sum, count)
		if sum != s {
			d := tensor.Sub(tensor.Div(s, tensor.Scalar(n)), mean)
			q = psumVarying(x, tensor.Add(q, tensor.MulScalar(tensor.Square(d), n)))
		}
		variance = tensor.Div(q, count)
		y = b.affine(x, res, mean, variance, fa)
	default:
		sum := tensor.SumKeep(x, axes...)
		if !b.PerDevice {
			sum, count = psumVarying(x, sum), psumVarying(x, count)
		}
		mean = tensor.Div(sum, count)
		xc := tensor.Sub(x, mean)
		ss := tensor.SumKeep(tensor.Square(xc), axes...)
		if !b.PerDevice {
			ss = psumVarying(x, ss)
		}
		variance = tensor.Div(ss, count)
		y = addResidual(b.scaleShift(xc, tensor.Rsqrt(tensor.Add(variance, constLike(variance, b.Eps))), shape), res)
	}

	// Running statistics, from values whose gradient is stopped.
	m := b.Momentum
	bm, bv := tensor.StopGradient(tensor.Reshape(mean, -1)), tensor.StopGradient(tensor.Reshape(variance, -1))
	if b.UnbiasedRunningVar {
		c := tensor.StopGradient(count)
		if bv.DType() == tensor.Float64 {
			c = tensor.Convert(c, tensor.Float64) // n/(n-1) to every digit
		}
		bv = tensor.Mul(bv, tensor.Div(c, tensor.Add(c, constLike(c, -1))))
	}
	// m and 1-m in the running statistics' precision: for float32 ones,
	// 1-m is computed in float32 from m rounded to float32.
	old, fresh := constLike(run[0], m), constLike(run[0], 1-m)
	if run[0].DType() != tensor.Float64 {
		fresh = tensor.Scalar(1 - float32(m))
	}
	rm := tensor.Add(tensor.Mul(run[0], old), tensor.Mul(tensor.Convert(bm, run[0].DType()), fresh))
	rv := tensor.Add(tensor.Mul(run[1], old), tensor.Mul(tensor.Convert(bv, run[1].DType()), fresh))
	return y, state.Set(b.Index, rm, rv)
}

// normalize computes (x - mean)/√(var + eps), then the affine map (and
// adds res if it is not nil).
func (b BatchNorm) normalize(x, res, mean, variance *tensor.Tensor, shape []int, act tensor.Activation) *tensor.Tensor {
	if x.DType() != mean.DType() {
		mean, variance = tensor.Convert(mean, x.DType()), tensor.Convert(variance, x.DType())
	}
	if fusedAffine(x) {
		return b.affine(x, res, mean, variance, act)
	}
	return addResidual(b.scaleShift(tensor.Sub(x, mean), tensor.Rsqrt(tensor.Add(variance, constLike(variance, b.Eps))), shape), res)
}

// scaleShift returns xc·inv·Weight + Bias, inv the per-channel 1/√(var +
// eps): inv and Weight are multiplied first, per channel, so that x is
// scaled in one pass over it (and its gradient takes one pass less).
func (b BatchNorm) scaleShift(xc, inv *tensor.Tensor, shape []int) *tensor.Tensor {
	if b.Weight != nil {
		inv = tensor.Mul(inv, tensor.Reshape(b.Weight, shape...))
	}
	y := tensor.Mul(xc, inv)
	if b.Bias != nil {
		y = tensor.Add(y, tensor.Reshape(b.Bias, shape...))
	}
	return y
}

// fusedAffine reports whether the layer normalises x with one
// tensor.ChannelAffine: float32 and float64 (half-precision batches keep
// the composition, whose roundings stay in their dtype).
func fusedAffine(x *tensor.Tensor) bool {
	return x.DType() == tensor.Float32 || x.DType() == tensor.Float64
}

// affine returns act(x·scale + shift [+ res]) with scale = Weight/√(var + eps) and
// shift = Bias - mean·scale per channel, applied in one pass over x
// (tensor.ChannelAffine). scale and shift are built from mean and
// variance with ordinary ops, so that in training the gradient flows
// through the batch statistics as through the composition.
func (b BatchNorm) affine(x, res, mean, variance *tensor.Tensor, act tensor.Activation) *tensor.Tensor {
	scale := tensor.Reshape(tensor.Rsqrt(tensor.Add(variance, constLike(variance, b.Eps))), -1)
	if b.Weight != nil {
		scale = tensor.Mul(scale, tensor.Convert(b.Weight, x.DType()))
	}
	shift := tensor.Neg(tensor.Mul(tensor.Reshape(mean, -1), scale))
	if b.Bias != nil {
		shift = tensor.Add(shift, tensor.Convert(b.Bias, x.DType()))
	}
	if res != nil {
		return tensor.ChannelAffineAdd(x, scale, shift, res, act)
	}
	return tensor.ChannelAffine(x, scale, shift, act)
}

// channelShape is [1, C, 1, ...], the shape of per-channel values
// broadcast against x.
func channelShape(x *tensor.Tensor) []int {
	shape := make([]int, x.Rank())
	for i := range shape {
		shape[i] = 1
	}
	shape[1] = x.Dim(1)
	return shape
}

// varies reports whether x is a block inside shard.Map that varies over
// mesh axes (whose statistics psumVarying sums).
func varies(x *tensor.Tensor) bool {
	l := x.Local()
	return l != nil && l.Mask != 0
}

// psumVarying sums v over the mesh axes x varies over when x is a block
// inside shard.Map (the axes its batch is split over), and returns v
// unchanged otherwise.
func psumVarying(x, v *tensor.Tensor) *tensor.Tensor {
	if !varies(x) {
		return v
	}
	l := x.Local()
	if vl := v.Local(); vl == nil || vl.Mask&l.Mask != l.Mask {
		// A value that does not vary (the count): mark it varying, so
		// the sum counts it once per device.
		v = tensor.Vary(v, l)
	}
	return l.Env.PsumMask(v, l.Mask)
}

// CallState is Forward, ignoring key; it makes a BatchNorm a
// StatefulModule for Sequential.ForwardState.
func (b BatchNorm) CallState(x *tensor.Tensor, state State, _ tensor.Key) (*tensor.Tensor, State) {
	return b.Forward(x, state)
}

// Call panics: a BatchNorm needs a State (use Forward, or
// Sequential.ForwardState). It makes a BatchNorm a Module, so that it can
// sit in a Sequential.
func (b BatchNorm) Call(*tensor.Tensor, tensor.Key) *tensor.Tensor {
	panic("nn.BatchNorm: needs a State: call Forward(x, state), or Sequential.ForwardState")
}
