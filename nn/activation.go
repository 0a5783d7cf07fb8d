package nn

import (
	"reflect"
	"runtime"
	"strings"

	"github.com/gonox/gonox/tensor"
)

// Activation is an elementwise nonlinearity: jax.nn.relu and friends as a Go
// function type. Any func(*tensor.Tensor) *tensor.Tensor converts to it.
//
// An Activation is also a Module (it ignores the key), so activations go
// straight into a Sequential, where Equinox would wrap them in eqx.nn.Lambda:
//
//	seq := nn.NewSequential(lin1, nn.Relu, lin2)
//
// In a model an Activation is static data for package pytree (funcs are not
// leaves); pytree.Format prints it by its String method.
type Activation func(x *tensor.Tensor) *tensor.Tensor

// Call applies f to x, ignoring key. It makes an Activation a Module.
func (f Activation) Call(x *tensor.Tensor, _ tensor.Key) *tensor.Tensor { return f(x) }

// The activations of jax.nn, as values of type Activation. They are
// variables only because Go has no function constants; do not reassign them.
var (
	// Relu is max(x, 0) (jax.nn.relu); its gradient at 0 is 0.
	Relu Activation = tensor.Relu
	// Gelu is the Gaussian error linear unit in its tanh approximation,
	// jax.nn.gelu's default (approximate=True).
	Gelu Activation = tensor.Gelu
	// GeluExact is x·Φ(x) with the exact normal CDF (jax.nn.gelu with
	// approximate=False, PyTorch's default).
	GeluExact Activation = tensor.GeluExact
	// Silu is x·sigmoid(x), also called swish (jax.nn.silu).
	Silu Activation = tensor.Silu
	// Tanh is the hyperbolic tangent.
	Tanh Activation = tensor.Tanh
	// Sigmoid is 1/(1+e^-x) (jax.nn.sigmoid).
	Sigmoid Activation = tensor.Sigmoid
	// Softplus is log(1+e^x), computed stably (jax.nn.softplus).
	Softplus Activation = tensor.Softplus
	// Identity returns x itself (Equinox's default final activation).
	Identity Activation = identity
)

func identity(x *tensor.Tensor) *tensor.Tensor { return x }

// String names the activation: "Relu", "Gelu", ... for the values of this
// package (whichever variable holds them), the package-qualified name
// ("main.swiglu") for another named function, "func" for a closure and
// "nil" for nil. pytree.Format prints activations this way.
func (f Activation) String() string {
	if f == nil {
		return "nil"
	}
	pc := reflect.ValueOf(f).Pointer()
	if a := builtinByPC(pc); a != nil {
		return a.name
	}
	fn := runtime.FuncForPC(pc)
	if fn == nil {
		return "func"
	}
	name := fn.Name()
	name = name[strings.LastIndexByte(name, '/')+1:] // pkg.Func
	if strings.Contains(name, ".func") || strings.Count(name, ".") != 1 {
		return "func" // a closure or a method value
	}
	return name
}

// Fused reports which activation of tensor.BiasAct f is, if it is one:
// Relu, Gelu, GeluExact, Silu, Tanh, Sigmoid and Identity are (whichever
// variable holds them), Softplus, other functions and nil are not.
func (f Activation) Fused() (tensor.Activation, bool) {
	if f == nil {
		return 0, false
	}
	if a := builtinByPC(reflect.ValueOf(f).Pointer()); a != nil && a.fused {
		return a.act, true
	}
	return 0, false
}

// activationOf returns this package's activation that is a (fused)
// tensor.Activation.
func activationOf(a tensor.Activation) Activation {
	for i := range builtinActivations {
		if b := &builtinActivations[i]; b.fused && b.act == a {
			return b.f
		}
	}
	panic("nn: no activation " + a.String())
}

type builtinActivation struct {
	f     Activation
	pc    uintptr // code pointer of f, set by init
	name  string
	act   tensor.Activation
	fused bool
}

// builtinByPC returns the activation of this package whose code is at pc,
// or nil.
func builtinByPC(pc uintptr) *builtinActivation {
	for i := range builtinActivations {
		if builtinActivations[i].pc == pc {
			return &builtinActivations[i]
		}
	}
	return nil
}

func init() {
	for i := range builtinActivations {
		builtinActivations[i].pc = reflect.ValueOf(builtinActivations[i].f).Pointer()
	}
}

var builtinActivations = []builtinActivation{
	{f: tensor.Relu, name: "Relu", act: tensor.ActRelu, fused: true},
	{f: tensor.Gelu, name: "Gelu", act: tensor.ActGelu, fused: true},
	{f: tensor.GeluExact, name: "GeluExact", act: tensor.ActGeluExact, fused: true},
	{f: tensor.Silu, name: "Silu", act: tensor.ActSilu, fused: true},
	{f: tensor.Tanh, name: "Tanh", act: tensor.ActTanh, fused: true},
	{f: tensor.Sigmoid, name: "Sigmoid", act: tensor.ActSigmoid, fused: true},
	{f: tensor.Softplus, name: "Softplus"},
	{f: identity, name: "Identity", act: tensor.ActIdentity, fused: true},
	{f: leakyRelu, name: "LeakyRelu"},
	{f: elu, name: "Elu"},
	{f: selu, name: "Selu"},
	{f: celu, name: "Celu"},
	{f: mish, name: "Mish"},
	{f: relu6, name: "Relu6"},
	{f: hardTanh, name: "HardTanh"},
	{f: hardSigmoid, name: "HardSigmoid"},
	{f: hardSwish, name: "HardSwish"},
	{f: softsign, name: "Softsign"},
	{f: glu, name: "Glu"},
	{f: softmin, name: "Softmin"},
	{f: hardShrink, name: "HardShrink"},
	{f: softShrink, name: "SoftShrink"},
	{f: tanhShrink, name: "TanhShrink"},
}
