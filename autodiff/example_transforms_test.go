package autodiff_test

import (
	"fmt"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/tensor"
)

// toyBatch is a batch of a toy classification task: 4 features, the
// label 1 where the first two features sum to more than 0.
type toyBatch struct{ X, Y *tensor.Tensor }

func newToyBatch(key tensor.Key, n int) toyBatch {
	x := tensor.Normal(key, n, 4)
	y := tensor.AsType(tensor.Greater(tensor.Sum(tensor.SliceAxis(x, 1, 0, 2), 1), tensor.Scalar(0)), tensor.Int32)
	return toyBatch{x, y}
}

// toyLoss is the mean cross-entropy of a model on a batch.
func toyLoss(m nn.MLP, b toyBatch) *tensor.Tensor {
	return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Forward(b.X), b.Y))
}

// An ensemble of 8 MLPs is one model whose leaves carry the 8 models
// along axis 0: Vmap over a stack of keys initialises it (each model from
// its own key, the same weights as 8 calls of nn.NewMLP), and Vmap of the
// gradient computes the 8 models' losses and gradients on a batch at once,
// op by op on the whole ensemble. One optimizer step then updates every
// model: Adam is elementwise, so the stacked models train independently.
func ExampleVmap_ensemble() {
	keys := tensor.NewKey(0).Split(8)
	newMLP := func(k tensor.Key) nn.MLP { return nn.NewMLP(k, []int{4, 16, 2}, nn.MLPOptions{}) }
	ensemble := autodiff.Vmap(newMLP)(tensor.StackKeys(keys))
	fmt.Println("first layer's weights:", ensemble.Layers[0].W)

	// Every model on the same batch (None: the batch is broadcast).
	lossAndGrad := autodiff.Vmap2(func(m nn.MLP, b toyBatch) lossGrad {
		l, g := autodiff.ValueAndGradWith(toyLoss)(m, b)
		return lossGrad{l, g}
	}, autodiff.InAxes(autodiff.Axis(0), autodiff.None))

	opt := optim.Adam(optim.Constant(0.05))
	state := opt.Init(ensemble)
	test := newToyBatch(tensor.NewKey(1), 256)
	evaluate := autodiff.Vmap2(toyLoss, autodiff.InAxes(autodiff.Axis(0), autodiff.None))
	before := evaluate(ensemble, test)
	for _, k := range tensor.NewKey(2).Split(100) {
		lg := lossAndGrad(ensemble, newToyBatch(k, 32))
		ensemble, state = optim.Step(opt, ensemble, lg.G, state)
	}
	after := evaluate(ensemble, test)
	fmt.Println("test losses:", after)
	improved := true
	b, a := before.Float32s(), after.Float32s()
	for i := range b {
		improved = improved && a[i] < b[i]/2
	}
	fmt.Println("every model's test loss at least halved:", improved)
	// Output:
	// first layer's weights: f32[8,4,16]
	// test losses: f32[8]
	// every model's test loss at least halved: true
}

// DP-SGD (Abadi et al. 2016) clips every example's gradient and adds
// noise before averaging. Vmap of the gradient gives the per-example
// gradients in one pass over the batch; optim.DifferentiallyPrivateAggregate
// clips, sums, noises and averages them, and SGD steps.
func ExampleVmap_perExampleGradients() {
	model := nn.NewMLP(tensor.NewKey(3), []int{4, 16, 2}, nn.MLPOptions{})
	exampleLoss := func(m nn.MLP, ex toyBatch) *tensor.Tensor {
		return tensor.SoftmaxCrossEntropy(m.Forward(ex.X), ex.Y) // one example: x f32[4], y i32[]
	}
	perExample := autodiff.Vmap2(autodiff.GradWith(exampleLoss), autodiff.InAxes(autodiff.None, autodiff.Axis(0)))

	opt := optim.Chain(
		optim.DifferentiallyPrivateAggregate(1.0, 0.5, 0), // clip norm, noise multiplier, seed
		optim.SGD(optim.Constant(0.5)),
	)
	state := opt.Init(model)
	test := newToyBatch(tensor.NewKey(4), 256)
	before := toyLoss(model, test).Item()
	for i, k := range tensor.NewKey(5).Split(50) {
		grads := perExample(model, newToyBatch(k, 64))
		if i == 0 {
			fmt.Println("per-example gradients of the first layer:", grads.Layers[0].W)
		}
		model, state = optim.Step(opt, model, grads, state)
	}
	fmt.Println("test loss at least halved:", toyLoss(model, test).Item() < before/2)
	// Output:
	// per-example gradients of the first layer: f32[64,4,16]
	// test loss at least halved: true
}

// linReg is a small model: y = x·W + B.
type linReg struct{ W, B *tensor.Tensor }

// Hessian gives every block of second derivatives of a loss of a model,
// one per pair of leaves; JVP of the gradient gives a Hessian-vector
// product without forming the Hessian. For the squared error of a linear
// model, ½·Σ(x·w + b - y)², the Hessian is [XᵀX, Xᵀ1; 1ᵀX, n].
func ExampleHessian() {
	x := tensor.FromFloat32([]float32{1, 2, 0, 1, 3, -1}, 3, 2)
	y := tensor.FromFloat32([]float32{1, 0, 2}, 3)
	loss := func(m linReg) *tensor.Tensor {
		r := tensor.Sub(tensor.Add(tensor.MatMul(x, m.W), m.B), y)
		return tensor.MulScalar(tensor.Sum(tensor.Square(r)), 0.5)
	}
	m := linReg{W: tensor.FromFloat32([]float32{0.5, -0.5}, 2), B: tensor.Scalar(0.1)}

	h := autodiff.Hessian(loss)(m) // h[i] holds the derivatives of the gradient's leaf i
	fmt.Printf("d²/dW²  %g\n", h[0].W)
	fmt.Printf("d²/dWdB %g\n", h[0].B)
	fmt.Printf("d²/dB²  %g\n", h[1].B)

	v := linReg{W: tensor.FromFloat32([]float32{1, 0}, 2), B: tensor.Scalar(1)}
	_, hv := autodiff.JVP(autodiff.Grad(loss), m, v)
	fmt.Printf("H·v: W %g, B %g\n", hv.W, hv.B)
	// Output:
	// d²/dW²  [[10 -1]
	//  [-1  6]]
	// d²/dWdB [4 2]
	// d²/dB²  3
	// H·v: W [14  1], B 7
}

// Jacfwd gives the Jacobian of a network's output with respect to its
// input by forward mode (one JVP per input element, all at once under
// Vmap), Jacrev by reverse mode (one VJP per output element). They agree;
// forward mode suits few inputs, reverse mode few outputs.
func ExampleJacfwd() {
	net := nn.NewMLP(tensor.NewKey(6), []int{3, 8, 2}, nn.MLPOptions{Activation: nn.Tanh})
	x := tensor.FromFloat32([]float32{0.5, -1, 2}, 3)
	jf := autodiff.Jacfwd(net.Forward)(x)[0] // d output / d input
	jr := autodiff.Jacrev(net.Forward)(x)[0]
	fmt.Println("Jacobian:", jf)
	diff := tensor.Max(tensor.Abs(tensor.Sub(jf, jr))).Item()
	fmt.Println("forward and reverse mode agree:", diff < 1e-6)

	// Column j is the output's change along input j: a JVP with unit vector j.
	_, col := autodiff.JVP(net.Forward, x, tensor.FromFloat32([]float32{0, 1, 0}, 3))
	colDiff := tensor.Max(tensor.Abs(tensor.Sub(tensor.SliceAxis(jf, 1, 1, 2), tensor.Reshape(col, 2, 1)))).Item()
	fmt.Println("column 1 is the JVP along input 1:", colDiff < 1e-6)
	// Output:
	// Jacobian: f32[2,3]
	// forward and reverse mode agree: true
	// column 1 is the JVP along input 1: true
}
