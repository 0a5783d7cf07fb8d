package nn_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// CNN is a small convolutional classifier for 1×8×8 images: two blocks of a
// 3×3 convolution, BatchNorm, ReLU and 2×2 max pooling, then a linear layer.
type CNN struct {
	Conv1, Conv2 nn.Conv
	BN1, BN2     nn.BatchNorm
	Pool         nn.Pool
	Head         nn.Linear
}

func NewCNN(key tensor.Key) CNN {
	k := key.Split(3)
	same := nn.ConvOptions{Padding: nn.Padding(1)}
	return CNN{
		Conv1: nn.NewConv2d(k[0], 1, 8, 3, same),
		BN1:   nn.NewBatchNorm(8, nn.BatchNormOptions{}),
		Conv2: nn.NewConv2d(k[1], 8, 16, 3, same),
		BN2:   nn.NewBatchNorm(16, nn.BatchNormOptions{}),
		Pool:  nn.NewMaxPool2d(2, nn.PoolOptions{Stride: []int{2}}), // PyTorch's MaxPool2d(2)
		Head:  nn.NewLinear(k[2], 16*2*2, 10, nn.LinearOptions{}),
	}
}

// Forward maps images [N, 1, 8, 8] to logits [N, 10], threading the
// BatchNorm statistics through s.
func (m CNN) Forward(x *tensor.Tensor, s nn.State) (*tensor.Tensor, nn.State) {
	x, s = m.BN1.ForwardAct(m.Conv1.Forward(x), s, nn.Relu)
	x = m.Pool.Forward(x) // [N, 8, 4, 4]
	x, s = m.BN2.ForwardAct(m.Conv2.Forward(x), s, nn.Relu)
	x = m.Pool.Forward(x) // [N, 16, 2, 2]
	return m.Head.Forward(tensor.Reshape(x, x.Dim(0), -1)), s
}

// A CNN with BatchNorm: MakeWithState numbers the stateful layers and
// returns their running statistics in a State, which the training loss takes
// and returns (as an auxiliary output of the gradient) and evaluation reads
// in inference mode, as eqx.nn.make_with_state and eqx.nn.inference_mode do.
func ExampleMakeWithState() {
	model, state := nn.MakeWithState(NewCNN(tensor.NewKey(0)))
	fmt.Println(model.BN1.Index.Key(), state.Get(model.BN1.Index)) // running mean and variance
	fmt.Println(model.BN2.Index.Key(), state.Get(model.BN2.Index))

	kx, ky := tensor.NewKey(1).Split2()
	type Batch struct{ X, Y *tensor.Tensor }
	b := Batch{X: tensor.Normal(kx, 32, 1, 8, 8), Y: tensor.RandInt(ky, 0, 10, 32)}
	loss := func(m CNN, b Batch) (*tensor.Tensor, nn.State) {
		logits, s := m.Forward(b.X, state) // batch statistics; s has the updated running ones
		return tensor.Mean(tensor.SoftmaxCrossEntropy(logits, b.Y)), s
	}
	step := autodiff.ValueAndGradWithAux(loss)
	opt := optim.Adam(optim.Constant(1e-2))
	opt0 := opt.Init(model)
	first, state, grads := step(model, b)
	model, _ = optim.Step(opt, model, grads, opt0)
	fmt.Println("gradient of Conv1's weight:", grads.Conv1.Weight)

	eval := nn.InferenceMode(model, true) // BatchNorm uses the running statistics
	logits, same := eval.Forward(b.X, state)
	fmt.Println("logits:", logits, "state unchanged in inference:", same.Get(eval.BN1.Index)[0] == state.Get(model.BN1.Index)[0])
	after, _ := loss(model, b)
	fmt.Println("loss went down:", after.Item() < first.Item())
	// Output:
	// batch_norm#1 [f32[8] f32[8]]
	// batch_norm#2 [f32[16] f32[16]]
	// gradient of Conv1's weight: f32[8,1,3,3]
	// logits: f32[32,10] state unchanged in inference: true
	// loss went down: true
}
