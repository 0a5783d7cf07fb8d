// Package nn provides neural-network layers in the style of Equinox: modules
// are plain Go structs whose exported *tensor.Tensor fields are the
// parameters, so a model is an ordinary value that package pytree can walk,
// autodiff can differentiate, optimizers can update and package shard can
// place on a mesh, all without registration.
//
// # Modules are values
//
//	type Linear struct {
//		W *tensor.Tensor // f32[in, out]
//		B *tensor.Tensor // f32[out], or nil
//	}
//
// Parameters are exported tensor fields: they are the leaves of the model's
// pytree. Everything else — sizes, epsilons, rates, activation functions,
// flags — is a plain field that pytree treats as static structure and carries
// along unchanged. Modules nest by ordinary composition (a struct field, a
// slice of layers, an interface value), and pytree.Format prints any model:
//
//	MLP{
//	  Layers: [
//	    Linear{W: f32[32,128], B: f32[128]},
//	    Linear{W: f32[128,4], B: f32[4]},
//	  ],
//	  Activation: Relu,
//	  FinalActivation: Identity,
//	}
//
// Constructors return values and every method has a value receiver. The
// transforms return new models of the same type (pytree.Map, pytree.MapN, the
// gradient of autodiff.ValueAndGrad, shard.FilterShard), and value receivers
// make the methods available whichever of M or *M you hold. They also make
// Forward a pure function of the model and the input: it works on a copy of
// a few pointers and tensors are immutable, so it cannot change the caller's
// model — which is what autodiff.Checkpoint (which may replay it), shard.Map
// (which runs it on many goroutines at once) and an optimizer step (which
// builds the next model from the last) rely on. A copy costs a few words per
// module. "Changing" a model means building a new one: pytree.At replaces a
// part, InferenceMode switches dropout off.
//
// # Construction: keys and options
//
// Every constructor with random parameters takes a tensor.Key first and
// splits it internally (Linear splits it into a weight and a bias key, MLP
// into one key per layer), so one key determines the whole model on every
// platform and mesh; split your key before building two modules from it.
// Sizes come next, then an options struct whose zero value gives Equinox's
// defaults:
//
//	lin := nn.NewLinear(key, 784, 512, nn.LinearOptions{})
//	lin := nn.NewLinear(key, 784, 512, nn.LinearOptions{NoBias: true, WeightInit: nn.LeCunNormal()})
//
// Defaults follow Equinox: Linear (and the projections of attention, the
// router and experts of MoE) draw weights and biases uniformly from ±1/√in;
// Embedding draws from N(0, 1); LayerNorm and RMSNorm start at scale 1 and
// bias 0 with eps 1e-5; MLP uses ReLU and no final activation; attention has
// no biases. One deliberate difference: weights are stored [in, out] (Flax's
// layout), the transpose of Equinox's [out, in], so x @ W needs no transpose
// and fan-based initializers see the fans where JAX expects them.
//
// # Batches
//
// Unlike Equinox's layers, which take one example and are mapped with vmap,
// every Forward here takes a batch as it is: Linear, MLP, the norms and
// Dropout accept any number of leading dimensions ([..., in] to [..., out]),
// Embedding any shape of int32 ids, MultiHeadAttention [batch, length, dim]
// (or one example [length, dim]), Conv and Pool [N, C, spatial...] (or one
// example [C, spatial...]), and MoE treats every leading dimension as a
// token dimension. A function written for one example is still batched with
// autodiff.Vmap, which maps every op through its batching rule.
//
// # Randomness at run time
//
// Dropout draws its mask from a key passed to each call, Forward(x, key):
// the same key gives the same mask, so split a fresh key per step (and per
// layer). Sequential splits the key it is given into one key per layer, as
// Equinox does. For evaluation, InferenceMode(model, true) returns a copy of
// any model with every Dropout switched to the identity.
//
// # The Module interface
//
// Sequential holds layers of the interface Module, Call(x, key), which is
// Equinox's __call__(x, *, key=None): every layer here implements it beside
// its Forward method and ignores the key if it needs none, and Activation (a
// function type) implements it too, so activations go straight into a
// Sequential. MoE deliberately does not, because a Sequential would drop
// its auxiliary loss.
//
// # Logical axes
//
// Parameters can carry logical axis names (tensor.WithLogicalAxes), the
// metadata that Flax sets with nnx.with_partitioning and that shard's rules
// map to mesh axes. Every options struct has an Axes field; its zero value
// sets no names, and the conventional names are the constants AxisEmbed,
// AxisMLP, AxisHeads, AxisVocab, AxisExpert and friends. The names stay on
// the parameters through pytree.Map and MapN, in gradients from autodiff and
// through sharding.
//
// For tensor parallelism the convention is Megatron's: a feed-forward block's
// first linear is named (AxisEmbed, AxisMLP), column-parallel, and its second
// (AxisMLP, AxisEmbed), row-parallel, so rules mapping AxisMLP to a
// tensor-parallel axis split the hidden activation without gathering it and
// need one all-reduce per block. MegatronAxes, DefaultAttentionAxes (query,
// key and value (AxisEmbed, AxisHeads), output (AxisHeads, AxisEmbed)) and
// DefaultMoEAxes (experts first, AxisExpert) fill the options accordingly.
//
// # Initializers
//
// Initializer is func(key, shape...) *tensor.Tensor, like the functions of
// jax.nn.initializers, with the same names and semantics: Zeros, Ones,
// Constant, Normal, TruncatedNormal, Uniform (on [0, scale), as JAX),
// UniformRange, VarianceScaling with FanIn/FanOut/FanAvg and truncated
// normal, normal or uniform distributions, and its named forms GlorotUniform,
// GlorotNormal, HeUniform, HeNormal, LeCunUniform and LeCunNormal, and
// Orthogonal (DeltaOrthogonal for convolution kernels). Fans are
// computed as JAX does (ComputeFans): input axis -2, output axis -1, the
// product of the other dimensions as receptive field; VarianceScalingAxes
// takes other axes, such as a batch axis for stacked expert weights.
//
// # Training
//
// A training step is a gradient and an update, both over whole models:
//
//	lossFn := func(m nn.MLP, b Batch) *tensor.Tensor {
//		return tensor.MSE(m.Forward(b.X), b.Y)
//	}
//	step := autodiff.ValueAndGradWith(lossFn)
//	for _, b := range batches {
//		loss, grad := step(model, b) // grad is an nn.MLP too
//		model = pytree.MapN(func(p []*tensor.Tensor) *tensor.Tensor {
//			return tensor.Sub(p[0], tensor.MulScalar(p[1], lr))
//		}, model, grad)
//	}
//
// (Package optim provides real optimizers as the same kind of tree map.)
//
// # Mixed precision
//
// A Policy (jmp's, Flax's dtype/param_dtype) says in which dtype
// parameters are kept, computation runs and outputs are returned. Set it
// once on a whole model with WithPolicy (or on one layer with its
// WithPolicy method, MLPOptions.Policy): Linear, MLP, MultiHeadAttention
// and MoE with float32 host parameters then run as automatic mixed
// precision does, their matrix products in bf16 from float32 weights and
// activations, each rounded as the product reads it (tensor.MatMulAs,
// ActMatMulAs, RaggedDotAs, ActRaggedDotAs: no bf16 copies) with float32
// results, and everything else in float32: biases, activations,
// LayerNorm, attention's softmax and weighted sum, MoE routing, the
// residual stream, the loss and every gradient. With MixedBFloat16 the
// optimizer sees float32 master weights and float32 gradients, the
// matmuls run in bfloat16 (AMX or AVX-512 BF16 where the CPU has them)
// and the loss is float32:
//
//	model = nn.WithPolicy(model, nn.MixedBFloat16)
//	mlp := nn.NewMLP(key, []int{784, 1024, 1024, 10}, nn.MLPOptions{Policy: nn.MixedBFloat16})
//
// Alternatively CastToCompute converts every float leaf of a model or
// batch (with tensor.Convert, which is differentiable) and CastToOutput
// the result, so that every op computes in bf16 (and widens where it has
// no bf16 kernel); sharded parameters under a layer's policy are cast
// this way, layer by layer, so FSDP gathers bf16. (A Linear given a half
// input with float32 parameters computes in the input's dtype, rounding
// its weight as the product reads it; so do MultiHeadAttention's
// projections, and a float32 BatchNorm converts its parameters to a
// float64 batch. Any other layer given an input of another dtype than its
// parameters panics naming the layer: convert the input with
// tensor.Convert, or the layer with CastTo.)
//
// Reductions (matmul contractions, the batch sums of gradients) accumulate
// in float32 inside each op and round once; cross-device gradient
// reductions see the float32 gradients of the master weights. float16
// compute wants loss scaling (optim.DynamicLossScale).
//
// # Writing your own module
//
// A module is any struct with parameter fields and a method that computes
// with them; there is nothing to embed or register. Build its parts from a
// split key and give it value receivers:
//
//	type Block struct {
//		Norm1, Norm2 nn.LayerNorm
//		Attn         nn.MultiHeadAttention
//		MLP          nn.MLP
//		Drop         nn.Dropout
//	}
//
//	func NewBlock(key tensor.Key, dim, heads int) Block {
//		k := key.Split(2)
//		return Block{
//			Norm1: nn.NewLayerNorm(dim, nn.LayerNormOptions{}),
//			Norm2: nn.NewLayerNorm(dim, nn.LayerNormOptions{}),
//			Attn:  nn.NewMultiHeadAttention(k[0], dim, heads, nn.AttentionOptions{Causal: true}),
//			MLP:   nn.NewMLP(k[1], []int{dim, 4 * dim, dim}, nn.MLPOptions{Activation: nn.Gelu}),
//			Drop:  nn.NewDropout(0.1),
//		}
//	}
//
//	func (b Block) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
//		k1, k2 := key.Split2()
//		x = tensor.Add(x, b.Drop.Forward(b.Attn.Forward(b.Norm1.Forward(x)), k1))
//		return tensor.Add(x, b.Drop.Forward(b.MLP.Forward(b.Norm2.Forward(x)), k2))
//	}
//
// Add a Call method with the same body to use it in a Sequential. Keep
// parameters in exported fields (pytree treats unexported fields as static,
// so their tensors would be neither trained nor saved, and it panics on an
// unexported field that holds one), keep configuration in plain fields, and
// never change a field inside Forward. A []Block is a stack of
// layers; a field of interface type holds any module.
//
// # Layers
//
//   - Linear, MLP: fully connected layers.
//   - Embedding: a lookup table for int32 ids, with Attend for tied output
//     logits; PyTorch's padding_idx and max_norm as options (off by
//     default, as Equinox has neither).
//   - EmbeddingBag: PyTorch's, bags of rows (offsets or [B, L] ids)
//     reduced by sum (with per-sample weights), mean or max.
//   - LayerNorm, RMSNorm: normalization over the last dimension.
//   - Dropout: inverted dropout with an explicit key and an inference mode;
//     ChannelDropout (NewDropout1d/2d/3d, PyTorch's Dropout1d/2d/3d) drops
//     whole channels, AlphaDropout and FeatureAlphaDropout are PyTorch's
//     for SELU networks (mean and variance kept); InferenceMode reaches the
//     Dropout each embeds.
//   - MultiHeadAttention and DotProductAttention: scaled dot-product
//     self- and cross-attention with causal and boolean masks, and
//     Equinox's options: separate query, key, value and output sizes,
//     head sizes, a bias per projection, dropout on the attention weights
//     and a function of the heads (AttentionCall.ProcessHeads).
//   - TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
//     TransformerDecoder, Transformer: PyTorch's Transformer modules, with
//     its parameters; see "Transformer layers" below.
//   - RotaryPositionalEmbedding: rotary positional embeddings (RoPE) for
//     the query and key heads.
//   - GRUCell, LSTMCell: one step of a recurrent cell, with Equinox's
//     parameters (and PyTorch's, mapped as their docs say); drive them
//     over a sequence with autodiff.Scan.
//   - LSTM, GRU, RNN: PyTorch's recurrent layers over whole sequences
//     (torch.nn.LSTM, GRU, RNN), with its parameters; see "Recurrent
//     layers" below.
//   - MoE: a mixture-of-experts feed-forward layer with top-k routing,
//     expert capacity and token dropping (DropTokenMask, ExpertCapacity),
//     returning the Switch load-balancing loss, the router z-loss and the
//     routing statistics with its output.
//   - Conv (NewConv1d/2d/3d) and ConvTranspose (NewConvTranspose1d/2d/3d):
//     convolutions over channels-first batches [N, C, spatial...] (or one
//     example), with stride, padding (Padding(p...), tensor.Pads,
//     tensor.SamePadding), dilation and groups, Conv's padding zeros or,
//     as PyTorch's padding_mode, reflected, replicated or circular
//     (ConvOptions.PaddingMode); ConvAxes names their channels for tensor
//     parallelism.
//   - Upsample, PixelShuffle and PixelUnshuffle, Unfold and Fold: resizing
//     of [N, C, spatial...] batches by nearest neighbours ("nearest",
//     "nearest-exact"), linear or cubic interpolation ("bilinear",
//     "trilinear", "bicubic", corners aligned or not) or window means
//     ("area") to a size or by a scale factor, sub-pixel
//     rearrangement, and sliding blocks as columns (im2col) and back, as
//     PyTorch's layers (tensor.Interpolate, PixelShuffle, Unfold, Fold;
//     tensor.PadWith pads by the same modes as Conv).
//   - Pool (NewMaxPool1d/2d/3d, NewAvgPool1d/2d/3d) and AdaptivePool
//     (NewAdaptiveAvgPool, NewAdaptiveMaxPool): max and average pooling,
//     with Equinox's options (stride 1 by default, as Equinox).
//   - BatchNorm and GroupNorm: normalization over channels. BatchNorm keeps
//     running statistics in a State (below); GroupNorm needs none.
//   - WeightNorm and SpectralNorm: wrappers that reparameterise the
//     weight of any layer (a Linear, Conv or ConvTranspose by default, any
//     other by the path of its weight): G·v/‖v‖ per output unit, and W/σ
//     with σ estimated by power iterations whose vectors live in a State.
//   - Sequential: a chain of Modules; ForwardState threads a State through
//     the stateful ones.
//   - Activation: Relu, Gelu, GeluExact, Silu, Tanh, Sigmoid, Softplus,
//     Identity, and jax.nn's LeakyRelu, Elu, Selu, Celu, Mish, Relu6,
//     HardTanh, HardSigmoid, HardSwish, Softsign and Glu (with their
//     parameters: LeakyReluWith, EluWith, CeluWith, GluAxis), torch.nn's
//     Softmin, HardShrink, SoftShrink, TanhShrink and Threshold (SoftminAxis,
//     HardShrinkWith, SoftShrinkWith); PReLU, a leaky ReLU with a learnt
//     slope.
//
// # Transformer layers
//
// TransformerEncoderLayer, TransformerDecoderLayer, TransformerEncoder,
// TransformerDecoder and Transformer are PyTorch 1.13's torch.nn modules of
// those names: TransformerOptions takes dim_feedforward, dropout (0 here
// means none), the activation (PyTorch's "gelu" is GeluExact),
// layer_norm_eps, batch_first and norm_first; inputs are [T, batch,
// d_model] ([batch, T, d_model] with BatchFirst, or one example [T,
// d_model]). The call structs carry PyTorch's masks, bool (true hides, as
// PyTorch, not DotProductAttention) or float (added to the logits), and
// the dropout key:
//
//	enc := nn.NewTransformerEncoder(key, 512, 8, 6, true, nn.TransformerOptions{Dropout: 0.1})
//	y := enc.ForwardWith(src, nn.TransformerEncoderCall{Mask: nn.SquareSubsequentMask(T), KeyPaddingMask: pad, Key: &k})
//
// The attention is a MultiHeadAttention with biases (bool masks run the
// fused kernel, float masks PyTorch's composed math); the parameters map
// one to one to PyTorch's (in_proj_weight is the query, key and value
// weights stacked), checkpoint.TorchTransformer loads a state dict, and
// testdata/torch_transformer.py checks outputs and every gradient
// against PyTorch.
//
// # Recurrent layers
//
// LSTM, GRU and RNN are torch.nn.LSTM, GRU and RNN: NewLSTM(key, in,
// hidden, RecurrentOptions{...}) takes PyTorch's num_layers,
// bidirectional, batch_first, bias, dropout, nonlinearity (RNNTanh,
// RNNRelu) and proj_size, and Forward takes a sequence [T, batch, in]
// ([batch, T, in] with BatchFirst, or one sequence [T, in]) and the
// initial states (nil: zeros), and returns the last layer's outputs and
// the final states h_n (and c_n) [layers·directions, batch, hidden], as
// PyTorch does:
//
//	lstm := nn.NewLSTM(key, 8, 16, nn.RecurrentOptions{Layers: 2, Bidirectional: true, BatchFirst: true})
//	y, s := lstm.Forward(x, nn.LSTMState{})  // y [batch, T, 32], s.H and s.C [4, batch, 16]
//	y, s = lstm.ForwardWith(x, nn.LSTMState{}, nn.RecurrentCall{Lengths: lengths, Key: &key})
//
// RecurrentCall carries the key of the dropout between layers and the
// lengths of padded sequences, which act as pack_padded_sequence: padding
// neither updates the states nor counts, and its outputs are zero. The
// parameters are PyTorch's, one RecurrentWeights per layer and direction
// in h_n's order, with the weights transposed to [in, out] and the gates
// in PyTorch's order, drawn as PyTorch draws them (uniform in
// ±1/√hidden); checkpoint.TorchRNN loads a PyTorch state dict
// (weight_ih_l0, bias_hh_l1_reverse, ...) from a safetensors file.
// Forward projects the inputs of all time steps with one product per layer
// and direction and runs only h·W_hh inside the loop over time; gradients
// reach the inputs, the initial states and every parameter, and
// testdata/torch_rnnseq.py checks all of them against PyTorch 1.13. The
// backward pass keeps every step's intermediate values, as any loop of ops
// does; RecurrentCall.Remat bounds that memory on long sequences (segments
// of steps recomputed by the backward pass, as autodiff.ScanRemat does).
//
// # State
//
// A layer with mutable state keeps it outside the model, as Equinox does:
// MakeWithState numbers the model's stateful layers and returns their
// initial State, and the layers take the state and return the new one:
//
//	model, state := nn.MakeWithState(newCNN(key))
//	y, state := model.BN.Forward(x, state)      // training: batch statistics
//	eval := nn.InferenceMode(model, true)      // running statistics
//
// A State is a pytree, so it is checkpointed, placed and gathered like
// parameters; package parallel's Trainer carries it (Config.StateLoss).
// BatchNorm's statistics are those of the whole batch under every
// strategy, and of each device's slice with PerDevice. SpectralNorm keeps
// its power-iteration vectors u and v there.
//
// # Losses
//
// The losses of optax.losses, with optax's semantics, are functions of
// tensors: SquaredError and L2Loss, HuberLoss, LogCosh, KLDivergence and
// KLDivergenceWithLogTargets, CosineSimilarity and CosineDistance,
// HingeLoss, SigmoidFocalLoss, SmoothLabels and CTCLoss. As in optax they
// are not reduced: a value per element (regression, hinge, focal), per row
// (KL and cosine, over the last axis) or per sequence (CTC); the mean loss
// is tensor.Mean of it:
//
//	loss := tensor.Mean(nn.HuberLoss(model.Forward(x), y, 1))
//
// Operands broadcast as NumPy's do, except SquaredError and L2Loss, which
// (like optax's) want one shape, since a [N] prediction against [N,1]
// targets would silently broadcast to [N,N]. The fused mean squared error
// and the softmax and sigmoid cross-entropies are in package tensor (MSE,
// SoftmaxCrossEntropy, SoftmaxCrossEntropyProbs, SigmoidBinaryCrossEntropy).
// testdata/torch_losses.py writes the PyTorch reference values the tests
// compare with.
//
// For code ported from PyTorch, CrossEntropy is
// torch.nn.functional.cross_entropy with integer targets (ignore_index,
// weight, label_smoothing and reduction, in CrossEntropyOptions) or with
// probability targets of the logits' shape, NLLLoss is nll_loss,
// BinaryCrossEntropyWithLogits is binary_cross_entropy_with_logits
// (weight, pos_weight, reduction, in BCEOptions), BinaryCrossEntropy is
// BCELoss's binary_cross_entropy on probabilities (its logs clamped at
// -100), and MarginRankingLoss, TripletMarginLoss, PoissonNLLLoss,
// GaussianNLLLoss, MultiMarginLoss, HingeEmbeddingLoss,
// CosineEmbeddingLoss, SoftMarginLoss, MultiLabelMarginLoss,
// MultiLabelSoftMarginLoss and PairwiseDistance are their
// torch.nn.functional namesakes. Unlike the optax
// losses they reduce (but PairwiseDistance, one distance per row), by default to PyTorch's (weighted) mean
// (Reduction: ReduceMean, ReduceSum, ReduceNone), and their class axis is
// the last: PyTorch's [N, C, T] logits are gonox's [N, T, C]. A label is
// ignored only when asked: CrossEntropyOptions{Ignore: true, IgnoreIndex:
// TorchIgnoreIndex} is PyTorch's default ignore_index=-100. Their tests
// compare with testdata/torch_layers.py's torch_crossentropy.json and
// testdata/torch_parity3.py's and torch_parity4.py's JSON (float64, 1e-12).
//
// PyTorch's modules that have no function of their own here are one line:
// MSELoss is tensor.MSE; L1Loss is tensor.Mean(tensor.Abs(tensor.Sub(p,
// y))); SmoothL1Loss is HuberLoss (see its doc for beta); KLDivLoss with
// reduction="batchmean" on [N, ..., C] log-probabilities is
// tensor.Sum(KLDivergence(logp, q)) divided by N (tensor.Mean of it for
// [N, C]); BCELoss is BinaryCrossEntropy, though
// BinaryCrossEntropyWithLogits on the logits before the sigmoid is stabler;
// InstanceNorm2d(C) is NewGroupNorm(C, C, GroupNormOptions{NoAffine: true});
// Softmax(dim) and LogSoftmax(dim) are tensor.Softmax and tensor.LogSoftmax;
// Flatten() is tensor.Reshape(x, x.Dim(0), -1) (tensor.Flatten makes a
// vector of the whole batch).
package nn
