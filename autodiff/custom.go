package autodiff

import (
	"fmt"

	"github.com/gonox/gonox/tensor"
)

// CustomVJP returns a differentiable function with a hand-written
// vector-Jacobian product (jax.custom_vjp). fwd computes the output and the
// residuals bwd will need; bwd maps the residuals and the output cotangent
// to one cotangent per input (nil for an input that gets none, such as an
// integer one). name labels the op in residual reports and policies.
func CustomVJP(name string,
	fwd func(in []*tensor.Tensor) (out *tensor.Tensor, residuals []*tensor.Tensor),
	bwd func(residuals []*tensor.Tensor, g *tensor.Tensor) []*tensor.Tensor,
) func(in ...*tensor.Tensor) *tensor.Tensor {
	op := &tensor.Op{
		Name: name,
		ImplN: func(in []*tensor.Tensor, _ any) ([]*tensor.Tensor, any) {
			out, res := fwd(in)
			return []*tensor.Tensor{out}, customState(res)
		},
		VJPN: func(gs, in, _ []*tensor.Tensor, _ any, st any) []*tensor.Tensor {
			if gs[0] == nil {
				return make([]*tensor.Tensor, len(in))
			}
			g := bwd(st.(customState), gs[0])
			if len(g) != len(in) {
				panic(fmt.Sprintf("autodiff.CustomVJP %q: bwd returned %d cotangents for %d inputs", name, len(g), len(in)))
			}
			return g
		},
		// fwd and bwd see the operands' dtypes as they are.
		Traits: tensor.Traits{Half: tensor.NativeHalf},
	}
	return func(in ...*tensor.Tensor) *tensor.Tensor {
		return tensor.ApplyN(op, nil, in...)[0]
	}
}

// customState holds a custom VJP's residuals.
type customState []*tensor.Tensor

// Residuals implements tensor.ResidualHolder.
func (s customState) Residuals() []tensor.Residual {
	out := make([]tensor.Residual, len(s))
	for i, t := range s {
		out[i] = tensor.Residual{Tensor: t, Label: "custom_vjp", Device: -1}
	}
	return out
}
