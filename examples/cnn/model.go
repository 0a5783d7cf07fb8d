package main

import (
	"github.com/gonox/gonox/data"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/tensor"
)

// CNN is the classifier: two blocks of a 3×3 convolution, batch
// normalisation, ReLU and 2×2 max pooling, then a linear layer over the
// flattened features. Its channels carry the logical axes of nn.ConvAxes,
// so tensor parallelism splits the first convolution's output channels and
// the second's input channels.
type CNN struct {
	Conv1, Conv2 nn.Conv
	Norm1, Norm2 nn.BatchNorm
	Pool         nn.Pool
	Head         nn.Linear
}

// newCNN returns a CNN for images of h×w pixels and one channel, with
// channels[0] and channels[1] channels after its two convolutions, and
// classes outputs.
func newCNN(key tensor.Key, h, w int, channels [2]int, classes int) CNN {
	k := key.Split(3)
	axes := nn.ConvAxes(2)
	// No biases in the convolutions: the batch normalisations after them
	// subtract any constant.
	conv := func(k tensor.Key, in, out int, axes [2]string) nn.Conv {
		return nn.NewConv2d(k, in, out, 3, nn.ConvOptions{Padding: nn.Padding(1), NoBias: true, Axes: axes, WeightInit: nn.HeNormal()})
	}
	bn := func(c int, axis string) nn.BatchNorm {
		return nn.NewBatchNorm(c, nn.BatchNormOptions{Momentum: 0.9, Axis: axis})
	}
	return CNN{
		Conv1: conv(k[0], 1, channels[0], axes[0]),
		Norm1: bn(channels[0], nn.AxisMLP), // the channels the first convolution splits
		Conv2: conv(k[1], channels[0], channels[1], axes[1]),
		Norm2: bn(channels[1], nn.AxisEmbed),
		Pool:  nn.NewMaxPool2d(2, nn.PoolOptions{Stride: []int{2}}),
		Head:  nn.NewLinear(k[2], channels[1]*(h/4)*(w/4), classes, nn.LinearOptions{}),
	}
}

// Forward returns the logits f32[N,classes] of images x f32[N,H,W,1] (the
// layout of package data's augmentations) and the state after the batch
// (new running statistics in training, the same state in inference).
func (m CNN) Forward(x *tensor.Tensor, s nn.State) (*tensor.Tensor, nn.State) {
	h := tensor.Transpose(x, 0, 3, 1, 2) // channels first
	h, s = m.Norm1.Forward(m.Conv1.Forward(h), s)
	h = m.Pool.Forward(tensor.Relu(h))
	h, s = m.Norm2.Forward(m.Conv2.Forward(h), s)
	h = m.Pool.Forward(tensor.Relu(h))
	return m.Head.Forward(tensor.Reshape(h, h.Dim(0), -1)), s
}

// forward is Forward under a mixed-precision policy: the parameters and
// the images in its compute dtype, the logits in its output dtype. The
// state (running statistics) stays float32.
func forward(p nn.Policy, m CNN, s nn.State, x *tensor.Tensor) (*tensor.Tensor, nn.State) {
	if p == (nn.Policy{}) || p.Compute == tensor.Float32 {
		return m.Forward(x, s)
	}
	logits, s := nn.CastToCompute(p, m).Forward(nn.CastToCompute(p, x), s)
	return nn.CastToOutput(p, logits), s
}

// lossFunc is the mean softmax cross-entropy of the model's logits, in
// the form parallel.Config.StateLoss takes.
func lossFunc(p nn.Policy) func(CNN, nn.State, data.Batch, tensor.Key) (*tensor.Tensor, nn.State) {
	return func(m CNN, s nn.State, b data.Batch, _ tensor.Key) (*tensor.Tensor, nn.State) {
		logits, s := forward(p, m, s, b.X)
		return tensor.Mean(tensor.SoftmaxCrossEntropy(logits, b.Y)), s
	}
}

// predict returns the predicted class of every example of d, in chunks,
// with the model in inference mode (running statistics).
func predict(p nn.Policy, m CNN, s nn.State, d *data.InMemory) []int32 {
	const chunk = 1000
	m = nn.InferenceMode(m, true)
	pred := make([]int32, 0, d.Len())
	for lo := 0; lo < d.Len(); lo += chunk {
		x := tensor.SliceAxis(d.X, 0, lo, min(lo+chunk, d.Len()))
		logits, _ := forward(p, m, s, x)
		pred = append(pred, tensor.ArgMax(logits, -1).Int32s()...)
	}
	return pred
}

// accuracy is the fraction of pred equal to the labels of d.
func accuracy(pred []int32, d *data.InMemory) float64 {
	right := 0
	for i, y := range d.Y.Int32s() {
		if pred[i] == y {
			right++
		}
	}
	return float64(right) / float64(max(len(pred), 1))
}
