// Package parallel trains any model on a mesh of devices with any
// strategy: data parallelism (DP), fully-sharded data parallelism (FSDP,
// ZeRO-3), Megatron tensor parallelism (TP), both (FSDPTP) or logical-axis
// rules of your own (Rules). A model is any pytree of tensors (a Go struct
// of nn layers, say), a batch any pytree whose tensors have the examples
// along their first dimension, and the loss an ordinary function of the
// two. Training a model of your own on eight devices:
//
//	type Model struct{ In, Out nn.Linear; Norm nn.LayerNorm }
//	type Batch struct{ X, Y *tensor.Tensor }
//	loss := func(m Model, b Batch) *tensor.Tensor {
//		h := m.Norm.Forward(tensor.Gelu(m.In.Forward(b.X)))
//		return tensor.Mean(tensor.SoftmaxCrossEntropy(m.Out.Forward(h), b.Y))
//	}
//	tr, err := parallel.New(model, parallel.Config[Model, Batch]{
//		Loss: loss, Optimizer: optim.Adam(optim.Constant(1e-3)),
//		Mesh: shard.NewMesh([]int{8}, []string{"dp"}), Strategy: parallel.FSDP,
//	})
//	for _, b := range batches {
//		l, err := tr.Step(b)
//	}
//
// Configuration mistakes — a mesh without the axis a strategy needs, a
// parameter whose logical axes no rule covers, a dimension the mesh does
// not divide, a batch the data axes do not divide — are errors that name
// the parameter, the axis and the mesh, never panics.
//
// # Strategies are values
//
// A Strategy is an interface with one real method, Place, which says where
// a model's parameters go on a mesh (a shard.SpecTree), where the optimizer
// state goes (by default like the parameters it belongs to), which mesh
// axes split a batch and what each device holds of a parameter while the
// loss runs (Placement). The Trainer runs every strategy the same way, so a
// new strategy (expert parallelism, say) is a type in its own file:
//
//	DP      parameters replicated; batches over every mesh axis
//	FSDP    every parameter split along its first dimension the mesh size
//	        divides, over every mesh axis; batches over every mesh axis
//	TP      logical axes "mlp" and "heads" over "tp" (TPRules, the names nn
//	        constructors set with nn.MegatronAxes, nn.DefaultAttentionAxes);
//	        batches over the other axes
//	FSDPTP  TP, then each parameter split over the data axes along another
//	        dimension
//	Rules   your shard.Rules; the rule for "batch" gives the data axes
//	EP      experts (nn.AxisExpert) over "ep", the rest replicated; batches
//	        over every mesh axis; the loss is a DeviceLoss calling
//	        expert.Forward (ep.go)
//	FSDPEP  EP, then each parameter split over the other (data) axes
//
// # One step, two paths
//
// By default a step runs the loss on the placed parameters and batch as it
// would on one device, and sharding propagation (package shard) computes
// every op blockwise on the devices of the mesh, inserting the collectives
// each op's rule needs: under TP a column-parallel matmul feeds a
// row-parallel one whose partial sums are all-reduced once (Megatron); under
// FSDP a matmul gathers the weight shard it was given, keeps only the shard
// for backward and gathers again there if the input gradient needs it.
// Gradients come out placed like their parameters, and the optimizer
// updates the shards of parameters and state where they live (ZeRO).
// Trainer.Comm and Trainer.Stats count what was sent, per collective kind.
//
// A strategy may instead ask for the hand-written fast path
// (Placement.MapStep), kept where a benchmark shows it faster (DP;
// BenchmarkStep compares both paths for every strategy): one shard.Map in
// which each device all-gathers the parameters it holds shards of inside
// autodiff.Checkpoint (so backward gathers again and reduce-scatters the
// gradients) and runs the loss on its rows. DP's replicated parameters are
// updated there too, sharded (ZeRO-1/2): with an elementwise optimizer
// (optim.Elementwise lists them: SGD, the Adam family, Adagrad,
// Adadelta, Lion... without a Mask; with or without Config.ClipGlobalNorm) each device reduce-scatters its
// gradients, updates its block of every parameter with its block of the
// optimizer state, which is stored split over the data axes (Stats shows
// 1/n of it), and all-gathers the parameters: the bytes of one all-reduce,
// 1/n of the update's work and state per device. The reduce-scatter of
// a split matrix's gradient is folded into the products that compute it
// (shard.Ctx.FoldPsumScatter): each device computes its block of the
// summed gradient from every device's layer inputs and output
// cotangents, so no device writes or sums a whole gradient; the results
// agree with the unfolded step (Config.UnfoldedGradients) up to the
// order of the sums. In one process the update writes each updated block
// straight into the all-gather's result, which the gather lends before
// the update (shard.Ctx.AllGatherInvariantTarget, optim.StepInto: the
// Adam family and SGD; other optimizers' blocks are copied there), and,
// when the step gives the old optimizer state up (Trainer.State has not
// handed it out), Adam writes the new moments over the old ones
// (optim.StepIntoOverState), with the same bits; then a folded
// gradient whose fold took one product is not stored at all: the fold
// computes it block by block and the optimizer's step updates each block
// of the parameter and its state while the block is in cache
// (shard.FoldedGradient.WaitThen, optim.StepIntoOverStateLater: Adam,
// AdamW, NAdam, SGD; not with Config.ClipGlobalNorm, whose norm needs
// every gradient first), again with the same bits; with no fold at all
// (every device's part too small to fold, EP's experts on a dp×ep mesh,
// whose state is split over both axes) the update takes each gradient's
// reduction as it arrives, last layer first, and updates that leaf at
// once. Each gradient's
// reduce-scatter starts as soon as the backward pass has finished that
// gradient (autodiff.OnGradient, shard.Ctx.PsumScatterStart) and travels
// between processes while the gradients of the layers before it are
// computed, as PyTorch DDP's buckets do (each parameter is one bucket,
// reduced where it lies); when every device is in one process and the
// update takes the reductions as they arrive without folds, the split
// gradients are reduce-scattered after the backward pass instead, in one
// group per set of axes (shard.Ctx.PsumScatterGroupStart: one meeting of
// the devices, not one a leaf), and in one process the updated blocks are
// all-gathered in groups too (shard.Ctx.AllGatherInvariantTargets). The
// results are bit for bit those of reducing
// after the backward pass (Config.ReduceAfterBackward). Config.ReduceDType
// (bfloat16 or float16) reduce-scatters the gradients in 16 bits, half
// the bytes, as PyTorch FSDP's reduce_dtype and DDP's bf16_compress_hook
// do: an opt-in, since the update then sees rounded gradients.
// Trainer.State keeps the
// tree of Optimizer.Init(params), so checkpoints and SetState see what
// they saw before. Other optimizers (a Mask sees whole leaves, Adafactor
// keeps row and column statistics, a Chain may clip without a psum) keep
// the replicated path: the gradients come out all-reduced and the
// parameters are updated once, on the host.
//
// Without a mesh, the step updates each parameter during the backward
// pass as soon as its gradient is final (autodiff.OnGradient; PyTorch's
// optimizer-in-backward hooks), while the gradient is in cache, with the
// optimizer's scalars computed once before the pass
// (optim.StepIntoOverStateLater, tensor.StepFrom) and the bits of
// updating after it. Parameters too small to split over the cores on their
// own (biases, norms, small weights) are stepped together once enough of
// them wait (tensor.StepGroup), split over the cores; optimizers that need every gradient first,
// Config.ClipGlobalNorm and micro-batches keep the update after the pass.
//
// Config.MicroBatches accumulates gradients over equal slices of each
// batch; Config.LossWithKey hands the loss a fresh key per step, micro-batch
// and data-parallel device, for dropout; Config.DeviceLoss is the manual
// escape hatch, a loss run inside shard.Map with the device's Ctx for models
// that call collectives themselves.
//
// # A loss that is NaN or infinite
//
// Step checks the loss before its backward pass: a NaN or an infinity
// (a corrupt batch, a run that diverged) skips the step — parameters,
// optimizer state and model state stay as they were — and returns a
// *NonFiniteLossError with the loss. Go on with the next batch (as
// PyTorch's GradScaler skips a step) or stop (Keras's TerminateOnNaN):
//
//	l, err := tr.Step(b)
//	if errors.Is(err, parallel.ErrNonFiniteLoss) {
//		skipped++ // or return err
//		continue
//	}
//
// Gradients that overflow while the loss is finite are the optimizer's
// to catch: optim.ApplyIfFinite (optax's apply_if_finite) zeroes such an
// update and leaves the inner state alone.
//
// # Models with state
//
// A model with BatchNorm keeps running statistics in an nn.State beside
// its parameters (Equinox's functional state). Its loss is a
// Config.StateLoss, which takes the state and returns the new one, and
// Config.ModelState is where it starts (nn.MakeWithState):
//
//	model, state := nn.MakeWithState(newCNN(key))
//	tr, err := parallel.New(model, parallel.Config[CNN, Batch]{
//		StateLoss: func(m CNN, s nn.State, b Batch, _ tensor.Key) (*tensor.Tensor, nn.State) {
//			logits, s := m.Forward(b.X, s)
//			return tensor.Mean(tensor.SoftmaxCrossEntropy(logits, b.Y)), s
//		},
//		ModelState: state, Optimizer: optim.Adam(optim.Constant(1e-3)), Mesh: mesh, Strategy: parallel.DP,
//	})
//
// The trainer carries the state from step to step and through
// micro-batches, in order; Trainer.ModelState returns it (evaluate with it
// and nn.InferenceMode) and SetModelState restores it from a checkpoint.
// BatchNorm normalises by the statistics of the whole batch under every
// strategy — by propagation the batch is one global tensor, and on the
// Map step (DP) each device's sums are all-reduced — so training with
// state, like without, does not depend on the mesh (go test ./parallel
// -run ModelState checks every strategy against one device).
//
// # Mixed precision
//
// A model under nn.MixedBFloat16 (an nn.MLP WithPolicy, or a loss that
// calls nn.CastToCompute) trains with every strategy; the Trainer needs
// nothing else. Parameters, their gradients and the optimizer state are
// float32, and the casts decide what the collectives move:
//
//   - bf16, half the bytes of float32: FSDP's and FSDPTP's weight
//     all-gathers (the cast runs on each float32 shard, before the
//     gather); the gradient reductions — DP's all-reduce, FSDP's
//     reduce-scatter, the all-reduce over the data axes of weights TP
//     replicates — which sum the bf16 cotangents of the cast parameters in
//     float32 and round the sum once to bf16, widened exactly to float32
//     for the optimizer; TP's all-reduces of partial activations, summed in
//     float32 and rounded once.
//   - float32: the loss's all-reduce over the data axes, and the global
//     norm of ClipGlobalNorm.
//   - The hand-written Map step (Placement.MapStep, which the shipped FSDP
//     does not use) gathers parameters before the loss runs, so it gathers
//     the float32 master weights and reduce-scatters float32 gradients; its
//     default remat policy keeps the bf16 casts of the gathered weights for
//     backward (whole weights, not shards). DP's sharded update likewise
//     reduce-scatters float32 gradients and all-gathers the float32
//     parameters (it differentiates with respect to the float32 replicas);
//     DP with an optimizer that is not elementwise all-reduces bf16
//     cotangents as above.
//
// go test ./parallel -run TestMixedPrecisionStrategies checks each of
// these byte counts against the float32 run, and losses and gradients
// against the single-device mixed-precision run.
//
// Trainer.Stats reports what a strategy costs per device — bytes sent per
// collective kind, residual bytes kept for backward, parameter and
// optimizer-state bytes, the last step's wall time and the part of it
// spent waiting for collectives (ExposedComm: the communication the
// computation did not hide) — and examples/mlp -strategy compare prints
// the bytes side by side.
package parallel
