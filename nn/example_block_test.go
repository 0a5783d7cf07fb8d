package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// Block is a pre-norm Transformer block: a module of your own is a struct of
// modules with a Forward method (see the package documentation).
type Block struct {
	Norm1, Norm2 nn.LayerNorm
	Attn         nn.MultiHeadAttention
	MLP          nn.MLP
	Drop         nn.Dropout
}

func NewBlock(key tensor.Key, dim, heads int) Block {
	k := key.Split(2)
	return Block{
		Norm1: nn.NewLayerNorm(dim, nn.LayerNormOptions{}),
		Norm2: nn.NewLayerNorm(dim, nn.LayerNormOptions{}),
		Attn:  nn.NewMultiHeadAttention(k[0], dim, heads, nn.AttentionOptions{Causal: true}),
		MLP:   nn.NewMLP(k[1], []int{dim, 4 * dim, dim}, nn.MLPOptions{Activation: nn.Gelu}),
		Drop:  nn.NewDropout(0.1),
	}
}

func (b Block) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	k1, k2 := key.Split2()
	x = tensor.Add(x, b.Drop.Forward(b.Attn.Forward(b.Norm1.Forward(x)), k1))
	return tensor.Add(x, b.Drop.Forward(b.MLP.Forward(b.Norm2.Forward(x)), k2))
}

// Call makes a Block a Module, so Blocks can go in a Sequential.
func (b Block) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor { return b.Forward(x, key) }

// Write a module of your own, stack it, and differentiate through it with
// rematerialization.
func Example_customModule() {
	ks := tensor.NewKey(0).Split(3)
	model := nn.NewSequential(NewBlock(ks[0], 16, 4), NewBlock(ks[1], 16, 4))
	x := tensor.Normal(ks[2], 2, 5, 16) // [batch, length, dim]
	fmt.Println(pytree.Format(model.Layers[0].(Block).Attn.QueryProj))
	fmt.Println(model.Forward(x, tensor.NewKey(1)))

	// Recompute each step's activations in the backward pass instead of
	// keeping them: autodiff.Checkpoint works on whole models.
	fwd := autodiff.Checkpoint(func(m nn.Sequential) *tensor.Tensor {
		return tensor.Mean(tensor.Square(m.Forward(x, tensor.NewKey(1))))
	}, autodiff.DotsSaveable)
	loss, grad := autodiff.ValueAndGrad(fwd)(model)
	plain, grad2 := autodiff.ValueAndGrad(func(m nn.Sequential) *tensor.Tensor {
		return tensor.Mean(tensor.Square(m.Forward(x, tensor.NewKey(1))))
	})(model)
	fmt.Println("same loss:", loss.Item() == plain.Item())
	fmt.Println("same gradient:", pytree.Equal(grad, grad2, 1e-5, 1e-6))
	// Output:
	// Linear{W: f32[16,16], B: nil}
	// f32[2,5,16]
	// same loss: true
	// same gradient: true
}
