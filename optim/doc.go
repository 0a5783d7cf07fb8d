// Package optim provides optimizers as gradient transformations over
// pytrees, in the manner of optax: SGD, the Adam family, Lion, RMSProp,
// Adafactor, Adagrad, Adadelta, LAMB, LARS, NovoGrad and more,
// learning-rate schedules, gradient clipping, masking, gradient
// accumulation and parameter averaging, for models that are plain Go
// values (see package pytree).
//
// # A training step
//
// An optimizer is a Transform: Init builds its state from the parameters,
// Update turns gradients into updates, and Apply adds the updates to the
// parameters. Step does the last two at once and keeps the model's type:
//
//	lossAndGrad := autodiff.ValueAndGradWith(func(m MLP, b Batch) *tensor.Tensor {
//		return tensor.MSE(m.Forward(b.X), b.Y)
//	})
//	opt := optim.AdamW(optim.WarmupCosineDecay(0, 3e-4, 1000, 100_000, 3e-5),
//		optim.AdamWOptions{WeightDecay: 0.1})
//	state := opt.Init(model)
//	for b := range batches {
//		loss, grads := lossAndGrad(model, b)
//		model, state = optim.Step(opt, model, grads, state)
//	}
//
// The gradient has the model's type (ValueAndGrad returns it so), and so do
// the updates and the new model. Nothing is modified in place: each step
// returns a new model and a new state, and the old ones stay valid. A loop
// that owns the old ones may give them up as the update goes, so as to
// hold one copy of the model and state rather than two: StepWith reports
// each parameter's dead inputs as soon as the fused steps (Adam, AdamW,
// SGD) have read them, for the caller to donate (tensor.Donate), as
// parallel.Trainer does.
//
// # Why an interface over any
//
// Transform is a plain interface whose methods take and return trees as
// any, with small generic helpers (Step, Apply, EMA) at the edges where the
// model's type matters. A generic Transform[M] would read better in
// signatures but worse everywhere else: Go methods cannot have type
// parameters, so every constructor would need the model type spelled out
// (optim.Adam[MLP](lr)), a transform could not serve two models (a teacher
// and a student, a model and its EMA), and Chain, Masked and MultiSteps would
// thread M through every layer for no gain, since their states are
// heterogeneous trees anyway. The trees do keep their concrete types at run
// time: Update on an MLP gradient returns an MLP of updates, which Step and
// Apply hand back as MLP. A mismatch between trees (a gradient of another
// model, a state from another optimizer) panics with a message that names it.
//
// # Optimizers
//
//	SGD        optax.sgd: plain, momentum, Nesterov
//	Adam       optax.adam (Nesterov: NAdam, optax.nadam)
//	AdamW      optax.adamw: decoupled weight decay, masked by a pytree.Predicate (NAdamW)
//	AMSGrad    optax.amsgrad: the running maximum of the second moment
//	Adamax     optax.adamax, AdamaxW optax.adamaxw: the infinity norm
//	RAdam      optax.radam: rectified Adam
//	AdaBelief  optax.adabelief: the second moment of the gradient's deviation
//	Yogi       optax.yogi: additive second-moment updates
//	Lion       optax.lion
//	RMSProp    optax.rmsprop: centered, bias correction, momentum, eps in or out of the root
//	Adagrad    optax.adagrad: the running sum of squared gradients
//	Adadelta   optax.adadelta
//	Adafactor  optax.adafactor: factored second moments for matrices and larger
//	Lamb       optax.lamb: Adam with a per-parameter trust ratio
//	Lars       optax.lars: SGD with a per-parameter trust ratio and momentum
//	Novograd   optax.novograd: one second moment per parameter
//	Muon       optax.contrib.muon: orthogonalized momentum for matrices, AdamW for the rest
//	LBFGS      optax.lbfgs: limited-memory BFGS with a zoom line search (reads the loss)
//	ScheduleFreeAdamW, ScheduleFreeSGD, ScheduleFree
//	           optax.contrib.schedule_free_*: no decay schedule; evaluate at ScheduleFreeEvalParams
//
// Their doc comments give the update rule each follows, optax's, and where
// torch.optim's optimizer of the same name agrees with it: the tests
// replay PyTorch's trajectories (testdata/torch_optim.py writes them) for
// SGD, Adam, AdamW, RMSProp, Adagrad, Adadelta, Adamax and RAdam (with
// PyTorch's L2 weight_decay as AddDecayedWeights chained in front, and
// clip_grad_norm_ as ClipByGlobalNorm), and optax's rules transcribed
// into float64 loops for the others. The schedules are checked against
// torch.optim.lr_scheduler's rates (StepLR, ExponentialLR, MultiStepLR,
// ConstantLR, LinearLR, PolynomialLR, CosineAnnealingLR,
// CosineAnnealingWarmRestarts, OneCycleLR, CyclicLR, warmups by
// SequentialLR; SGD's dampening: testdata/torch_parity3.py) and
// ReduceOnPlateau against ReduceLROnPlateau; their docs say how the
// arguments map.
//
// Each takes the learning rate as a Schedule and its other hyperparameters
// as an optional typed options struct whose zero fields mean optax's
// defaults:
//
//	optim.Adam(optim.Constant(1e-3))
//	optim.Adam(lr, optim.AdamOptions{B2: 0.95})
//	optim.AdamW(lr, optim.AdamWOptions{WeightDecay: 0.1, Mask: pytree.Not(pytree.PathGlob("**.B"))})
//
// Where 0 is a meaningful value different from the default (Adam's B1,
// AdamW's and Lion's WeightDecay, epsilons), write Zero: it reads as 0 and
// the options treat it as exactly 0.
//
// The building blocks are exported too, to compose optimizers optax-style:
// ScaleByAdam, ScaleByAMSGrad, ScaleByAdamax, ScaleByRAdam, ScaleByBelief,
// ScaleByYogi, ScaleByRMS, ScaleByRSS, ScaleByAdadelta, ScaleByTrustRatio,
// ScaleByMuon (and OrthogonalizeNewtonSchulz), ScaleByLBFGS,
// ScaleByZoomLinesearch, Trace, AddDecayedWeights, Scale, ScaleBySchedule,
// ScaleByLearningRate, Clip, ClipByBlockRMS, ClipByGlobalNorm,
// AdaptiveGradClip (NFNets' AGC), ZeroNans, Centralize (gradient
// centralization), ScaleBySign (and SignSGD), ApplyEvery, AddNoise,
// Identity and Stateless. AdamW is, to rounding,
//
//	optim.Chain(optim.ScaleByAdam(), optim.AddDecayedWeights(wd, mask), optim.ScaleByLearningRate(lr))
//
// # Schedules
//
// A Schedule is a func(step int) float64, called with the number of updates
// made so far (0 for the first). Constant, Linear, Polynomial, CosineDecay,
// WarmupCosineDecay, WarmupConstant, Exponential, WarmupExponentialDecay,
// PiecewiseConstant, PiecewiseInterpolate, LinearOneCycle, CosineOneCycle,
// SGDR and Join follow optax's schedules of the same names, formulas and
// edge cases included; WarmupCosineDecay's decaySteps counts the warmup, as
// in optax. Cyclic is PyTorch's CyclicLR (triangular, triangular2,
// exp_range), which optax lacks. Any Go function of the step is a schedule
// too.
//
// Gradients must have the structure of the parameters and each the shape
// and dtype of its parameter. Step, StepInto and the optimizers' Update
// panic otherwise naming the optimizer, the parameter's path and both
// operands ("optim.Adam: gradient of Layers[1].W is f32[3,4], parameter
// f32[4,3]"; "optim.Lion: gradients and optimizer state's Mu differ in
// structure: ..." with both structures), rather than in a kernel or a
// pytree walk; Apply does the same for updates, which it never broadcasts.
// Update, given no parameters, compares each gradient with the state Init
// built in its parameter's image; plain SGD's Update keeps no state and
// leaves the check to Apply.
//
// A learning rate must be finite, unlike in optax, which checks nothing:
// optim.Constant(math.NaN()) panics where it is written, and each update
// panics naming the optimizer, the value and the step if its schedule
// gives NaN or an infinity ("optim.Adam: learning rate schedule gave NaN at
// step 7, want a finite rate"), rather than turning every parameter into
// NaN. A constructor never calls the schedule itself: a schedule runs
// only for the steps an optimizer takes (from 1 for ScheduleFree, as in
// optax, so 1/step is a valid ScheduleFree schedule). Zero and negative
// rates are accepted, as in optax: a negative rate ascends the gradient
// (PyTorch's optimizers reject it as "Invalid learning rate").
//
// # Composition
//
// Chain applies transforms in sequence: Chain(ClipByGlobalNorm(1), AdamW(...))
// clips before Adam. Masked applies a transform to the leaves a
// pytree.Predicate selects (by path glob, rank, logical axes) and passes the
// rest through. Partition (optax.partition, also named MultiTransform)
// gives each group of parameters its own optimizer, by a label function of
// the leaf's path and value; SetToZero, Freeze and SelectiveTransform hold
// parameters constant. MultiSteps accumulates the mean gradient over k
// calls and steps every k-th (gradient accumulation);
// MultiStepsState.HasUpdated says when it did. ApplyIfFinite skips updates
// with a NaN or an infinity, up to a number of consecutive ones (optax's
// skip_not_finite), SkipLargeUpdates those whose squared norm is too
// large (optax's skip_large_updates), each keeping the inner state. Lookahead
// keeps slow weights that follow a fast optimizer (LookaheadParams). EMA
// keeps a moving average of the parameters for evaluation.
//
// DifferentiallyPrivateAggregate is DP-SGD's aggregation
// (optax.differentially_private_aggregate): it takes per-example gradients
// (autodiff.Vmap of a gradient), clips each example's to a global norm
// (PerExampleGlobalNormClip), adds Gaussian noise and averages; chain an
// optimizer after it.
//
// InjectHyperparams keeps an optimizer's hyperparameters in its state, as
// float32 scalars that checkpoints save: they can be read and changed
// between steps, and scheduled ones record the value each step used.
//
// # Transforms that read the loss
//
// Some transforms need the loss as well as its gradient: ReduceOnPlateau
// (the learning rate drops when the loss stops improving) and LBFGS's line
// search, which also evaluates the loss at trial points. They are
// ExtraTransforms: call UpdateExtra or StepExtra with an Extra holding the
// loss (Value), the gradient (Grad; StepExtra fills it) and, for the line
// search, a function that evaluates the loss and its gradient elsewhere
// (ValueAndGrad; ValueAndGradOf adapts autodiff.ValueAndGrad's). Chain,
// Masked, Partition, MultiSteps, InjectHyperparams, ApplyIfFinite, SkipLargeUpdates,
// Lookahead and ScheduleFree pass Extra on; Update on a transform that
// needs it panics, naming what is missing. A line search calls
// ValueAndGrad once per step size it tries and keeps the loss and gradient
// at the accepted point in its state, which ValueAndGradFromState returns
// for the next step:
//
//	vg := autodiff.ValueAndGrad(loss)
//	opt := optim.LBFGS()
//	state := opt.Init(params)
//	for range 50 {
//		value, grads := optim.ValueAndGradFromState(vg, params, state)
//		params, state = optim.StepExtra(opt, params, grads, state,
//			optim.Extra{Value: value, ValueAndGrad: optim.ValueAndGradOf(vg)})
//	}
//
// # State
//
// States are pytrees: structs such as AdamState holding int32 scalar step
// counters (tensors, not Go ints, so checkpoints save them) and trees of the
// params' structure for the moments. Those are built from the params with
// pytree.Map, so each state tensor carries the logical axis names of its
// parameter (Tensor.LogicalAxes); Adafactor's row and column factors carry
// the names of the dimensions they keep. Sharding rules that place
// parameters by their logical axes therefore place the optimizer state
// exactly like them, which is ZeRO/FSDP for the state.
//
// Leaves that are not float32 (integer buffers, step counters inside the
// model) get no state and nil updates, and Apply leaves them as they are;
// bfloat16 and float16 leaves are refused (see Mixed precision). A
// float parameter whose gradient is nil (frozen for a step) gets a nil update
// and its state is kept unchanged.
//
// # Sharded training
//
// The optimizer's ops run on host tensors, on global sharded tensors
// (sharding propagation places each update like its parameter, as
// parallel's strategies use them) and on the blocks of shard.Map: run
// Update (or Step) inside shard.Map on each device's blocks of params,
// gradients and state, sharded alike. Per-element
// optimizers (SGD, the Adam family, Lion, RMSProp, Adagrad, Adadelta) then
// compute exactly what they would on one device. Some things need the whole
// tensor:
//
//   - ClipByGlobalNorm needs the norm of all the gradients, not of one
//     device's blocks. Pass the device's psum: ClipOptions{Psum: c.Psum}.
//     GlobalNorm then sums the squares of the leaves that vary over the same
//     mesh axes, psums each group over exactly those axes, and adds the
//     groups, so sharded leaves count across devices and replicated ones
//     once.
//   - Lamb's and Lars's trust ratios and Novograd's second moment use the
//     norm of each whole parameter: pass Psum: c.Psum in their options (as
//     for ClipByGlobalNorm) and each block's sum of squares is psummed over
//     the axes that block varies over.
//   - Adafactor's row and column statistics and block RMS are computed per
//     block inside shard.Map, which differs from the unsharded optimizer for
//     parameters sharded along a factored dimension.
//
// ZeRO (stages 1 and 2) splits the update itself over the devices of a
// data-parallel axis: NewZeRO lays the parameters end to end in one flat
// vector, and after a reduce-scatter of the flat gradient each device
// updates only its 1/n of the parameters and keeps only that part of the
// optimizer state (UpdateShard); an all-gather returns the new parameters.
// The two collectives move the bytes of one all-reduce, the update's work
// and state are divided by n. See ZeRO for the step, written out.
//
// # Fused steps
//
// Step runs Adam and AdamW as one pass over each parameter, its gradient
// and its two moments (tensor.AdamStep), as PyTorch's fused optimizers do,
// instead of Update then Apply: the same bits, without the update tree.
// Consecutive parameters are updated together, about half a million
// elements at a time (tensor.AdamSteps, PyTorch's multi-tensor Adam): one
// parallel region for many small parameters instead of one update after
// another on one core. StepDonating is Step for a caller that gives its
// params, grads and state up (JAX's donate_argnums): it donates them, and
// Adam and AdamW write the new parameters and moments over the old ones
// (tensor.AdamStepsDonating), streaming four slices a parameter instead of
// seven. A step of 8 stacked MLPs 64-128-10 (autodiff's
// BenchmarkEnsembleStep) took 90-93 cpu-µs with it against 109-114 with
// Step and a donation after it. StepInto is Step writing the new
// parameters into storage the caller gives (destination first, as
// gonum's methods; tensor.AdamStepsInto, tensor.SGDStepInto): package
// parallel's sharded update has Adam or SGD write each updated block
// straight into the all-gather's result (shard.GatherTarget) instead of
// copying it there. StepIntoOverState is StepInto for a caller whose old
// state is dead after the call: Adam writes the new moments over the old
// ones (tensor.AdamStepsIntoOverMoments), which the sharded update does
// when its trainer donates the old state. StepIntoOverStateLater is
// StepIntoOverState for a step some of whose gradients arrive later, in
// pieces: it returns, for each such parameter, a tensor.PieceStep that
// updates a range of its elements from their gradient, with the scalars
// of the step (Adam's bias corrections, the learning rate) computed once;
// the sharded update hands it to the folded reduce-scatter
// (shard.FoldedGradient.WaitThen), which computes the gradient block by
// block, so each block is used while in cache and the gradient is never
// stored whole. Adam, AdamW, NAdam, NAdamW, ScaleByAdam and SGD can
// (TakesGradientsLater); anything that needs every gradient first (a
// global norm's clipping, a Chain, a Mask) cannot.
//
// Init on global sharded parameters (placed with shard.FilterShard, say)
// returns state sharded like them, since tensor.ZerosLike keeps placement;
// Adafactor's row and column factors, whose shapes differ from their
// parameter's, are host tensors to be placed by their logical axes.
//
// # Differences from optax
//
//   - Learning rates and hyperparameters are float64 on the host;
//     the tensor arithmetic is float32.
//   - Each optimizer keeps a single step counter, used both for bias
//     correction and for the schedule (optax chains a separate
//     scale_by_schedule counter); they always agree.
//   - Masks are pytree.Predicates evaluated on the params (optax.masked
//     evaluates a callable mask on the updates), so they may test logical
//     axes, which gradients need not carry.
//   - EMA without debiasing starts from the parameters, not from zeros as
//     optax.ema does: that is what averaging weights needs.
//   - MultiSteps takes a fixed k and has no should-skip hook; its zero
//     updates are zeros, as in optax.
//   - Optax's mu_dtype and accumulator dtypes are absent: optimizer state
//     is float32, only float32 parameters get state and updates, and
//     bfloat16 or float16 parameters are refused (optax updates them in
//     their own dtype).
//
// # Mixed precision
//
// Train with float32 parameters and bfloat16 or float16 compute through an
// nn.Policy: the parameters the optimizer sees are the float32 master
// weights, their gradients are float32 (the policy's casts are
// differentiable), and so is every moment. For float16 compute, scale the
// loss: ScaleLoss, Unscale and AllFinite, or StepScaled, which does the
// three and skips a step whose gradients overflowed, with a
// StaticLossScale or a DynamicLossScale (jmp's rules).
//
// A bfloat16 or float16 parameter or gradient is refused: Init, Update and
// Step panic with the leaf's path and type (optim.Adam: parameter E is
// bfloat16[2,3]: ...). Optax would update it in its own dtype, but an
// update smaller than half a unit in the last place (2^-9 relative in
// bfloat16) is lost in the rounding, so a bf16 weight stops learning; our
// policy keeps float32 master weights instead. To train a bf16 model, keep
// its parameters float32 and compute in bf16 with an nn.Policy; to keep a
// half leaf fixed, leave it out with Masked and give it a nil gradient.
package optim
