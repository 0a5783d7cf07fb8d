package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// LinearOptions configures NewLinear. The zero value gives Equinox's
// eqx.nn.Linear: a bias, and weight and bias uniform in ±1/√in.
type LinearOptions struct {
	// NoBias leaves out the bias (Equinox's use_bias=False).
	NoBias bool
	// WeightInit draws the [in, out] weight; nil means
	// UniformRange(-1/√in, 1/√in), Equinox's (and PyTorch's) default.
	WeightInit Initializer
	// BiasInit draws the [out] bias; nil means UniformRange(-1/√in, 1/√in)
	// as for the weight. (Flax initializes biases with Zeros.)
	BiasInit Initializer
	// Axes are the logical axis names of the weight's (in, out) dimensions;
	// the bias gets Axes[1]. Empty names leave a dimension unnamed, and the
	// zero value annotates nothing. See MegatronAxes for the names of MLP
	// layers.
	Axes [2]string
}

// Linear is a fully connected layer y = x @ W + B (eqx.nn.Linear).
//
// W is stored [in, out], Flax's kernel layout, so that it multiplies a batch
// of row vectors without a transpose and fan computations use JAX's default
// axes; Equinox stores the transpose [out, in]. B is nil without a bias.
type Linear struct {
	W *tensor.Tensor // f32[in, out]
	B *tensor.Tensor // f32[out], or nil
	// policy (static, set by WithPolicy): the zero value computes in the
	// parameters' dtype.
	policy Policy
}

// WithPolicy returns l with mixed-precision policy p (see Policy and
// WithPolicy, the function that sets it on a whole model): Forward
// computes in p.Compute and returns p.Output. With float32 host
// parameters and a half p.Compute the product runs in p.Compute from the
// float32 weight and input, each rounded as the product reads it, with a
// float32 result (tensor.MatMulAs), and the bias and activation in
// float32: automatic mixed precision. Otherwise Forward casts the
// parameters and the input to p.Compute. The zero Policy switches the
// policy off.
func (l Linear) WithPolicy(p Policy) Linear {
	l.policy = checkPolicy("nn.Linear.WithPolicy", p)
	return l
}

// Policy returns the mixed-precision policy of l (the zero Policy if
// none).
func (l Linear) Policy() Policy { return l.policy }

func (l Linear) withPolicy(p Policy) any { return l.WithPolicy(p) }

// NewLinear returns a Linear layer from in to out features, its parameters
// drawn from key (split into a weight key and a bias key, as Equinox does).
func NewLinear(key tensor.Key, in, out int, opts LinearOptions) Linear {
	if in < 0 || out < 0 {
		panic(fmt.Sprintf("nn.NewLinear: negative size in=%d out=%d", in, out))
	}
	lim := 1.0
	if in > 0 {
		lim = 1 / math.Sqrt(float64(in))
	}
	winit, binit := opts.WeightInit, opts.BiasInit
	if winit == nil {
		winit = UniformRange(-lim, lim)
	}
	if binit == nil {
		binit = UniformRange(-lim, lim)
	}
	wkey, bkey := key.Split2()
	l := Linear{W: withAxes(checkInit("nn.NewLinear", "weight", winit(wkey, in, out), in, out), opts.Axes[:]...)}
	if !opts.NoBias {
		l.B = withAxes(checkInit("nn.NewLinear", "bias", binit(bkey, out), out), opts.Axes[1])
	}
	return l
}

// In returns the number of input features.
func (l Linear) In() int { return l.W.Dim(0) }

// Out returns the number of output features.
func (l Linear) Out() int { return l.W.Dim(1) }

// Forward maps x of shape [..., in] to [..., out]: any number of leading
// batch dimensions (none for a single vector). Inputs of rank above 2 are
// multiplied as one [N, in] matrix.
func (l Linear) Forward(x *tensor.Tensor) *tensor.Tensor {
	return l.ForwardAct(x, nil)
}

// ForwardAct returns act(l.Forward(x)); nil act means none. When act is
// one of this package's activations other than Softplus and the layer has
// a bias, the bias and the activation are one fused op (tensor.BiasAct):
// one pass and one result instead of two, and a backward pass that keeps
// less; with float32 x and parameters and an activation whose derivative
// reads the output (ReLU, Tanh, Sigmoid, Identity) the product joins them
// (tensor.MatMulBiasAct: one op, one node of the trace). The values and
// gradients are bit for bit those of the composition.
//
// An x of a half dtype (bf16, f16) with float32 parameters computes in
// x's dtype, as on parameters converted to it, but without the converted
// copy of W: the product rounds W as it reads it (tensor.MatMulAs), and
// W's cotangent is the float32 accumulator of the half product, not
// rounded to the half dtype (MLP's mixed-precision Forward uses this).
func (l Linear) ForwardAct(x *tensor.Tensor, act Activation) *tensor.Tensor {
	return l.forward(tensor.ActIdentity, x, act)
}

// forward returns act(l.Forward(pre(x))), pre applied by the product
// (tensor.ActMatMul), which then keeps x instead of pre(x) for the
// backward pass.
func (l Linear) forward(pre tensor.Activation, x *tensor.Tensor, act Activation) *tensor.Tensor {
	requireInput("nn.Linear", "x", x)
	requireBuilt("nn.Linear", "W", l.W, "nn.NewLinear")
	if p := l.policy; p != (Policy{}) {
		l.policy = Policy{}
		if compute := ampCompute(p, l.W, l.B); compute != 0 {
			return CastToOutput(p, l.forwardProducts(pre, ampInput(x, compute), act, compute))
		}
		return CastToOutput(p, CastToCompute(p, l).forward(pre, CastToCompute(p, x), act))
	}
	in := l.W.Dim(0)
	if x.Rank() == 0 || x.Dim(-1) != in {
		panic(fmt.Sprintf("nn.Linear: x %v, W %v: last dim of x must be %d", x, l.W, in))
	}
	var mm func(x, w *tensor.Tensor) *tensor.Tensor // nil: MatMul, which fuses with the bias
	b := l.B
	if pre != tensor.ActIdentity {
		mm = func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.ActMatMul(pre, x, w) }
	}
	if dt := x.DType(); dt != l.W.DType() && l.W.DType() == tensor.Float32 && (dt == tensor.BFloat16 || dt == tensor.Float16) {
		if pre != tensor.ActIdentity {
			x = activationOf(pre)(x)
		}
		mm = func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.MatMulAs(x, w, false, false, dt, dt) }
		if b != nil {
			b = tensor.Convert(b, dt)
		}
	} else {
		requireParamDType("nn.Linear", x, l.W)
	}
	return l.apply(x, act, mm, b, false)
}

// forwardProducts is forward with the product computed in dtype compute
// from float32 (or compute) x and float32 parameters, each rounded as the
// product reads it, and its float32 accumulator returned
// (tensor.MatMulAs, or tensor.ActMatMulAs applying pre); the bias and the
// activation run in float32.
func (l Linear) forwardProducts(pre tensor.Activation, x *tensor.Tensor, act Activation, compute tensor.DType) *tensor.Tensor {
	mm := func(x, w *tensor.Tensor) *tensor.Tensor {
		return tensor.MatMulAs(x, w, false, false, compute, tensor.Float32)
	}
	rows := true // MatMulAs takes x of any rank as its rows
	if pre != tensor.ActIdentity {
		if x.DType() == tensor.Float32 {
			mm = func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.ActMatMulAs(pre, x, w, compute) }
			rows = false
		} else {
			x = activationOf(pre)(x)
		}
	}
	return l.apply(x, act, mm, l.B, rows)
}

// apply returns act(mm(x, W) + b) for x of shape [..., in]; a nil mm is
// MatMul, which one op computes with the bias and a fused activation
// (tensor.MatMulBiasAct). rows says mm computes a batch of x's matrices
// times W as the product of their rows (as MatMul does), so that x of
// rank 3 or more needs no reshapes.
func (l Linear) apply(x *tensor.Tensor, act Activation, mm func(x, w *tensor.Tensor) *tensor.Tensor, b *tensor.Tensor, rows bool) *tensor.Tensor {
	in := l.W.Dim(0)
	fused, fuses := act.Fused()
	fuses = fuses && b != nil
	plain := (mm == nil || rows) && !fuses
	if mm == nil {
		mm = tensor.MatMul
		if fuses {
			mm = func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.MatMulBiasAct(x, w, b, fused) }
		}
	} else if fuses {
		prod := mm
		mm = func(x, w *tensor.Tensor) *tensor.Tensor { return tensor.BiasAct(prod(x, w), b, fused) }
	}
	var y *tensor.Tensor
	if x.Rank() > 2 && plain {
		// MatMul (and MatMulAs) compute a batch of x's matrices times W
		// as the product of their rows, one gemm, without the two
		// reshapes' ops.
		y = mm(x, l.W)
	} else if x.Rank() > 2 {
		shape := x.Shape()
		y = mm(tensor.Reshape(x, -1, in), l.W)
		shape[len(shape)-1] = l.W.Dim(1)
		y = tensor.Reshape(y, shape...)
	} else {
		y = mm(x, l.W)
	}
	if fuses {
		return y
	}
	if b != nil {
		y = tensor.Add(y, b)
	}
	if act != nil {
		y = act(y)
	}
	return y
}

// Call is Forward, ignoring key; it makes a Linear a Module.
func (l Linear) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return l.Forward(x) }

// MLPOptions configures NewMLP. The zero value gives Equinox's eqx.nn.MLP:
// ReLU between layers, no final activation, biases everywhere.
type MLPOptions struct {
	// Activation is applied after every layer but the last; nil means Relu.
	Activation Activation
	// FinalActivation is applied after the last layer; nil means Identity.
	FinalActivation Activation
	// NoBias leaves out the biases of every layer but the last
	// (Equinox's use_bias=False); NoFinalBias that of the last
	// (use_final_bias=False).
	NoBias, NoFinalBias bool
	// WeightInit and BiasInit are passed to every layer (see LinearOptions).
	WeightInit, BiasInit Initializer
	// Axes holds the logical axes of each layer (see LinearOptions.Axes):
	// nil for none, else one entry per layer. MegatronAxes(len(sizes)-1)
	// gives the tensor-parallel convention.
	Axes [][2]string
	// Policy, if set, is the mixed-precision policy of Forward (see
	// Policy); the zero Policy computes in the parameters' dtype.
	Policy Policy
}

// MLP is a multi-layer perceptron (eqx.nn.MLP): Linear layers with
// Activation between them and FinalActivation after the last.
type MLP struct {
	Layers []Linear
	// Activation and FinalActivation are static; nil means Identity.
	Activation      Activation
	FinalActivation Activation
	// policy (static, set by MLPOptions.Policy or WithPolicy): the zero
	// value computes in the parameters' dtype.
	policy Policy
}

// WithPolicy returns m with mixed-precision policy p: Forward computes in
// p.Compute and returns p.Output (see Policy). With float32 host
// parameters and a half p.Compute it computes the products in p.Compute
// from the float32 weights and activations, rounded as each product reads
// them, and the rest in float32 (automatic mixed precision); otherwise it
// casts the parameters and the input to p.Compute. The zero Policy
// switches the policy off.
func (m MLP) WithPolicy(p Policy) MLP {
	m.policy = checkPolicy("nn.MLP.WithPolicy", p)
	return m
}

func (m MLP) withPolicy(p Policy) any { return m.WithPolicy(p) }

// Policy returns the mixed-precision policy of m (the zero Policy if none).
func (m MLP) Policy() Policy { return m.policy }

// NewMLP returns an MLP through the given layer sizes: sizes[0] inputs,
// hidden layers of sizes[1:len-1], sizes[len-1] outputs. So []int{784, 512,
// 10} has two Linear layers. key is split into one key per layer.
func NewMLP(key tensor.Key, sizes []int, opts MLPOptions) MLP {
	if len(sizes) < 2 {
		panic(fmt.Sprintf("nn.NewMLP: sizes %v: need at least an input and an output size", sizes))
	}
	for i, d := range sizes {
		if d <= 0 {
			panic(fmt.Sprintf("nn.NewMLP: sizes %v: size %d is %d, want a positive width", sizes, i, d))
		}
	}
	n := len(sizes) - 1
	if opts.Axes != nil && len(opts.Axes) != n {
		panic(fmt.Sprintf("nn.NewMLP: sizes %v make %d layers but Axes has %d entries", sizes, n, len(opts.Axes)))
	}
	m := MLP{Layers: make([]Linear, n), Activation: opts.Activation, FinalActivation: opts.FinalActivation}
	if m.Activation == nil {
		m.Activation = Relu
	}
	if m.FinalActivation == nil {
		m.FinalActivation = Identity
	}
	keys := key.Split(n)
	for i := range n {
		lo := LinearOptions{NoBias: opts.NoBias, WeightInit: opts.WeightInit, BiasInit: opts.BiasInit}
		if i == n-1 {
			lo.NoBias = opts.NoFinalBias
		}
		if opts.Axes != nil {
			lo.Axes = opts.Axes[i]
		}
		m.Layers[i] = NewLinear(keys[i], sizes[i], sizes[i+1], lo)
	}
	return m.WithPolicy(opts.Policy)
}

// Forward maps x of shape [..., sizes[0]] to [..., sizes[len-1]].
func (m MLP) Forward(x *tensor.Tensor) *tensor.Tensor {
	if p := m.policy; p != (Policy{}) {
		m.policy = Policy{}
		var params []*tensor.Tensor
		for _, l := range m.Layers {
			params = append(params, l.W, l.B)
		}
		if compute := ampCompute(p, params...); compute != 0 {
			return CastToOutput(p, m.forward(ampInput(x, compute), compute))
		}
		return CastToOutput(p, CastToCompute(p, m).Forward(CastToCompute(p, x)))
	}
	return m.forward(x, 0)
}

// forward runs the layers, their products in dtype compute from float32
// weights and activations as automatic mixed precision runs them
// (Linear.forwardProducts: no half copy of a weight or an activation,
// every gradient in float32), or with compute 0 in the parameters' dtype.
func (m MLP) forward(x *tensor.Tensor, compute tensor.DType) *tensor.Tensor {
	pre := tensor.ActIdentity // the previous layer's activation, applied by this layer's product
	for i, l := range m.Layers {
		layer := l.forward
		if compute != 0 {
			layer = func(pre tensor.Activation, x *tensor.Tensor, act Activation) *tensor.Tensor {
				return l.forwardProducts(pre, x, act, compute)
			}
		}
		act := m.activation(i)
		if a, ok := act.Fused(); ok && l.B == nil && i < len(m.Layers)-1 {
			// No bias to fuse it with: the next layer's product applies
			// it (tensor.ActMatMul), keeping this layer's output only.
			x, pre = layer(pre, x, nil), a
			continue
		}
		x, pre = layer(pre, x, act), tensor.ActIdentity
	}
	return x
}

// activation returns the activation after layer i.
func (m MLP) activation(i int) Activation {
	if i == len(m.Layers)-1 {
		return m.FinalActivation
	}
	return m.Activation
}

// Call is Forward, ignoring key; it makes an MLP a Module.
func (m MLP) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return m.Forward(x) }

// checkInit panics unless an initializer returned a float32 tensor of the
// requested shape.
func checkInit(fn, what string, x *tensor.Tensor, shape ...int) *tensor.Tensor {
	if x == nil || x.DType() != tensor.Float32 || !slices.Equal(x.Shape(), shape) {
		got := "nil"
		if x != nil {
			got = x.String()
		}
		panic(fmt.Sprintf("%s: %s initializer returned %s, want %s", fn, what, got, tensor.Zeros(tensor.Float32, shape...)))
	}
	return x
}
