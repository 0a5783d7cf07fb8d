// Package tensor provides gonox's n-dimensional arrays, the ops on them and
// their differentiation rules.
//
// A *Tensor has a dtype (Float32, Int32, Bool, and the others of "Dtypes"
// below), a shape and contiguous row-major data. Tensors are values: every op returns a new tensor and
// never changes its inputs, so a tensor may be shared freely, including
// between goroutines.
//
//	x := tensor.FromFloat32([]float32{1, 2, 3, 4, 5, 6}, 2, 3)
//	w := tensor.Ones(tensor.Float32, 3, 4)
//	y := tensor.Relu(tensor.MatMul(x, w)) // f32[2,4]
//	fmt.Println(y)                      // f32[2,4]
//	fmt.Printf("%g\n", y)               // the values, NumPy style
//
// # Type notation
//
// String prints a tensor's type in the short notation Equinox uses, which
// is also how error messages name operands: f32[3,4]. Type prints JAX's
// notation, as jax.typeof does: float32[3,4]. Sharded tensors show the mesh
// axes each dimension is split over (f32[1024@dp,4096], f32[8@(dp,tp)]),
// and one device's block inside shard.Map shows the axes it varies over
// (f32[256,4096]{dp}).
//
// # bfloat16 and float16
//
// BFloat16 and Float16 are storage types (bf16[3,4], bfloat16[3,4] in
// JAX's notation): every op computes on them in float32 and rounds its
// result once, to nearest even, so reductions and matmul contractions
// accumulate in float32. An op on operands of one half dtype returns that
// dtype (MatMulTo returns the float32 accumulator instead, JAX's
// preferred_element_type); cotangents have their primal's dtype. Matmuls of
// bfloat16 run on AMX tiles (Intel Sapphire Rapids and later) or the
// AVX-512 BF16 kernel where the CPU has them, on widened operands
// elsewhere; float16 matmuls widen. MatMulAs multiplies float32 operands
// in a half dtype, rounding them as the kernel packs them (no converted
// copy), JAX's dot with algorithm BF16_BF16_F32; RaggedDotAs,
// ActMatMulAs and ActRaggedDotAs do the same for the grouped product and
// the products that apply an activation, with float32 results and
// cotangents. A float32 scalar next to a half tensor takes its dtype (see
// below). Mixed precision training (float32 parameters, bfloat16
// compute) is a policy of package nn built on Convert and these products.
//
// # Dtypes
//
//	dtype     notation   compute                         constructors
//	Float32   f32        the default float               FromFloat32, FromFloat64, Scalar
//	Float64   f64        float64, every op but the       FromFloat64s, ScalarFloat64,
//	                     fused float32 kernels (below)   UniformFloat64, NormalFloat64 (more below)
//	BFloat16  bf16       float32, rounded once           FromBits16, Convert
//	Float16   f16        float32, rounded once           FromBits16, Convert
//	Int32     i32        integer ops, indices            FromInt32, FromInts, Arange
//	Int64     i64        integer ops, indices            FromInt64, ScalarInt64
//	Uint8     u8         storage: move, compare, convert FromUint8
//	Bool      bool       masks                           FromBool
//
// Float64 is a compute type of its own, as in JAX with jax_enable_x64:
// elementwise math, reductions, softmax, sorting, gathers and scatters,
// convolutions, window reductions and pooling, and matmul (gemm.Dgemm's
// float64 kernels for AVX-512, AVX2 and pure Go) compute and accumulate
// in float64 and return float64 (convolutions and windows by direct
// float64 loops, slower than their float32 kernels); gradients of a
// float64 function are float64, so autodiff.CheckGrad
// checks them to 1e-7 rather than float32's 1e-2. FromFloat64 keeps JAX's
// default (float64 data becomes float32); FromFloat64s keeps float64.
// Ops whose kernels are float32 only refuse float64 operands by name
// ("tensor: op "ragged_dot" is not defined for float64 operands
// (f64[6,3], ...); ..."): the grouped gemms under Vmap (RaggedDot of
// batched group sizes). The samplers with float operands (Gamma,
// LogGamma, Beta, Dirichlet, Categorical, CategoricalSample, Choice's P)
// draw float64 values for float64 operands, from 64-bit random words as
// JAX's samplers with dtype=jnp.float64 do (other numbers than the
// float32 draws of the same key); Poisson rounds a float64 rate to
// float32 first, as JAX does. The samplers without float operands have
// float64 versions of their own, JAX's with dtype=jnp.float64:
// UniformFloat64, UniformRangeFloat64, NormalFloat64,
// TruncatedNormalFloat64, GumbelFloat64, ExponentialFloat64 and
// LaplaceFloat64. The public functions of the
// fused float32 kernels (DotProductAttention, BiasAct, MatMulBiasAct,
// MSE, the cross-entropies, RaggedDot, AdamStep, AdamSteps, SGDStep)
// compose float64 from primitives. Each op declares the dtypes it takes (Traits.Types), so a
// new op is float32 only until it says otherwise.
//
// Int64 indexes spaces beyond 2³¹ and takes the integer ops Int32 takes
// (arithmetic, comparisons, sums, max and min, cumsum, sorting, moves);
// Take, TakeAlongAxis and ScatterAdd take Int64 indices. Uint8 holds bytes (images) and is
// moved, compared and converted with AsType. AsType converts between any
// two dtypes (float to integer truncates and saturates, integer to integer
// wraps); Convert converts between float dtypes and is differentiable.
// Checkpoints (package checkpoint) and safetensors files (F64, I64, U8)
// store all of them; package shard's Psum, Pmean, AllGather and
// PsumScatter sum and move float64 blocks inside shard.Map, between
// processes too (bit for bit the sums of one process).
//
// # Broadcasting and errors
//
// Elementwise ops broadcast by NumPy's rules. There is no implicit dtype
// promotion: mixing float32 and int32, or float32 and bfloat16, is an error
// (convert with AsType or Convert). The one exception is a float32 scalar
// (Scalar, MulScalar's factor) next to a bfloat16, float16 or float64
// tensor: it takes the tensor's dtype, as a Python scalar does in JAX
// (a float32 constant: use ScalarFloat64 for a float64 one, 0.1 say).
// Wrong shapes, dtypes or axes are programmer errors and panic with a
// message naming the op and its operands:
//
//	tensor.MatMul: f32[3,4] @ f32[5,6]: inner dims 4 != 5
//
// # The ops
//
//   - Creation: FromFloat32, FromInt32, FromBool, FromBits16, Zeros, Ones,
//     Full, Arange, Scalar, and the *Like forms; AsType converts, Convert
//     converts between float dtypes (differentiably); WidenBits16 and
//     RoundBits16 convert slices of 16-bit patterns with the same kernels.
//   - Elementwise, with broadcasting: Add, Sub, Mul, Div, Pow, Maximum,
//     Minimum, Atan2, Neg, Abs, Sign, Square, Reciprocal, Exp, Exp2, Expm1,
//     Log, Log2, Log10, Log1p, Sqrt, Rsqrt, Cbrt, Clamp; comparisons
//     (Equal, Less, ...) return bool masks for Where and the Logical ops.
//   - Elementwise math (math.go): Sin, Cos, Tan, Asin, Acos, Atan, Sinh,
//     Cosh, Asinh, Acosh, Atanh, Erf, Erfc, ErfInv, Lgamma, Digamma,
//     Polygamma, and the rounding ops Round (halves to even), Floor, Ceil
//     and Trunc.
//   - Activations and losses: Relu, Gelu, Silu, Tanh, Sigmoid, Softplus,
//     Softmax, LogSoftmax, MSE, SoftmaxCrossEntropy (integer labels),
//     SoftmaxCrossEntropyProbs, SigmoidBinaryCrossEntropy.
//   - Reductions over any axes: Sum, Mean, Max, Min and LogSumExp, each
//     with a Keep variant for keepdims; Any, All; along one axis ArgMax
//     (and ArgMaxKeep), ArgMin, and Cumsum with its Exclusive and Reverse
//     forms.
//   - Shapes: Reshape, Transpose, BroadcastTo, ExpandDims, Squeeze, Concat,
//     Split, Stack, Pad, PadWith (reflect, replicate, circular), Tile,
//     Repeat, Flip, Roll.
//   - Indexing: Slice, DynamicSlice, DynamicUpdateSlice, Take,
//     TakeAlongAxis, ScatterAdd, SegmentSum, SegmentWeightedSum, OneHot.
//   - Sorting and counting: Sort, ArgSort, LexSort, TopK, Bincount.
//   - Linear algebra: MatMul (batched, NumPy semantics) and MatMulT
//     (transposed operands folded into the kernel).
//   - Convolutions and windows: Conv (lax.conv_general_dilated, 1 to 3
//     spatial dimensions, channels first: strides, padding pairs or
//     SAME/VALID, input and kernel dilation, feature groups) and
//     ConvTranspose (its input gradient, PyTorch's conv_transpose);
//     ReduceWindow (max, sum and mean pooling, lax.reduce_window) and
//     AdaptivePool (PyTorch's adaptive windows); Interpolate (PyTorch's
//     F.interpolate: nearest, linear, cubic and area resizing),
//     PixelShuffle and PixelUnshuffle, Unfold and Fold (im2col and
//     col2im). The gradients of these ops are ops of the same family, to
//     any order.
//   - Per-channel normalisation of [N, C, spatial...] batches, fused:
//     ChannelMoments (each channel's sum and centred sum of squares in one
//     sweep) and ChannelAffine (act(x·scale + shift) per channel), the two
//     passes of a batch norm; ChannelAffineAdd adds a residual in the same
//     sweep (a ResNet block's end). BatchNorm is the two as one primitive
//     in training (nn.BatchNorm's, when the statistics need no psum),
//     whose backward pass computes the input gradient in one formula
//     from one sweep of sums and one writing it.
//   - Attention: DotProductAttention, one fused op forward and backward
//     (FlashAttention's blocked online softmax: memory linear in the
//     sequence length, causal blocks skipped); DotProductAttentionAs runs
//     its products in bfloat16 with the softmax in float32 (mixed
//     precision).
//
// # Random numbers
//
// Keys are counter-based and splittable, and they are JAX's: NewKey(0)
// is jax.random.key(0), Key.Split is jax.random.split, and Normal,
// Uniform, Bernoulli, Permutation, ... draw the numbers jax.random draws
// for the same key and shape. Never reuse a key: split it. The common
// distributions are there with JAX's algorithms (random_dist.go):
// Exponential, Laplace, Gamma and LogGamma, Beta, Dirichlet, Poisson,
// Gumbel, Categorical and CategoricalSample, Choice.
//
// # Differentiation
//
// Every op is a primitive (an Op) with a vector-Jacobian product. When an
// op's input is traced (see Trace), Apply records a node on the result, so
// the graph hangs on the tensors themselves; there is no global tape and
// several goroutines can differentiate at once. Package autodiff turns this
// into ValueAndGrad, Grad, VJP and Checkpoint over whole models; most users
// never touch Trace or Backward directly.
//
// Traces nest, JAX style: a trace created inside another is inner to it,
// VJP rules are built from ops, and so derivatives of derivatives work.
//
// # Vmap and forward mode
//
// Two more transformations act on values the same way. A BatchTrace
// (Vmap) makes values that stand for a batch of examples while showing
// one example's shape; every op on them runs once on the whole batch
// through its batching rule. A JVPTrace (forward mode) makes values that
// carry a tangent beside their primal; every op on them computes the
// tangent of its result with its JVP rule. Traces, BatchTraces and
// JVPTraces nest in any order, the latest acting first: a gradient inside
// a vmapped function gives per-example gradients, forward mode over a
// gradient gives Hessian-vector products. Package autodiff's Vmap, JVP,
// Linearize, Jacfwd, Jacrev and Hessian are built on them.
//
// A backward pass reuses the buffers of cotangents it owns outright (ones
// no caller, seed or forward value can see): sums of several cotangents
// accumulate in place, and the backward kernels of the activations and of
// BiasAct write over the cotangent they consume. Gradients are bit for bit
// those of a pass that allocates every cotangent; an MLP step allocates
// about a quarter less.
//
// # Donation
//
// Donate declares tensors dead, as JAX's donate_argnums does for the
// arguments of a step: a training loop donates the previous step's
// gradients once the optimizer has used them. Any later use of a donated
// header panics naming the op and the operand ("tensor.Add: operand x
// f32[1024,1024] was donated (tensor.Donate)"): every public op checks
// its operands for that where it checks for nil, and so do the readers
// (Float32s, Item, RawFloat32, ...). Donating nil or a donated tensor does
// nothing; donating a traced tensor panics.
//
// Ownership is decided at two boundaries only. Inside the engine: the
// backward pass donates the cotangents it owns (and, asked to, the
// intermediates of the graph), package shard its collectives' and
// propagation's temporaries. At the boundary of a training step: package
// parallel's Trainer.Step donates the step's gradients, loss and replaced
// parameters and state (parallel/donate.go), and a hand-written loop does
// the same with autodiff.RecycleIntermediates and autodiff.DonateTree.
// Code between the two — layers, losses, optimizers — never donates: a
// value it makes is one more result. Ops that stand for a value they
// replace name their result themselves (the fused optimizer steps carry
// the logical axes of the parameter and moments), so naming costs no
// second header over the storage.
//
// The storage of a donated tensor goes to the allocator cache — with the
// device pool the only process-wide state of the package — and the next
// result of the same element type and size class reuses it: storage of
// every dtype is recycled (float32, float64, int32, int64, uint8, bool,
// and the 16-bit storage that bfloat16 and float16 share), so that the
// bf16 intermediates of a mixed-precision step cost no fresh memory
// either. Up to 1024 elements
// every element count is a class of its own; above, each octave
// (2^k, 2^(k+1)] has 16 classes, and storage is made with the capacity of
// its class (at most 1/16 more than asked for), so that values whose sizes
// change from step to step (the tokens a mixture of experts routes to each
// expert, a shorter last batch) still reuse storage. Small storage (16
// up to 16384 elements) sits in a sync.Pool per element type and class: its fast
// path is per P and lock-free, and the collector drains it when a class
// stops being used. Large storage, what a training step's memory is made
// of, sits in best-fit free lists: an allocation takes the smallest free
// buffer of its class or of the classes up to twice its size, and storage
// nobody took for a whole collection cycle goes back to the collector, so
// the cache holds no memory for long that nobody asks for and needs no
// bound. The fit up to twice the size is what keeps the cache small: a
// fit up to 1.5x or 1.25x made examples/moe's single-device peak 237 or
// 253-290 MiB instead of 210 (docs/performance.md, "The allocator cache's
// fit"). Below 16 elements nothing is cached: a fresh allocation costs no
// more than a pool round trip (BenchmarkCacheSmallStorage). ReadCacheStats
// reports its hits, fresh allocations, the bytes it holds and those it
// gave back: warm training steps whose fresh bytes add up while the bytes
// held stay level and none are given back leave storage to the collector
// that they never donated (a header replaced by another over the same
// storage, say), which no fit would find again.
//
// Storage in the cache is live to the collector, which by default (GOGC
// 100) lets the heap grow to twice what it found live: with a step's whole
// working set cached, the garbage a step leaves could grow that large. So
// at the end of a backward pass that recycles its intermediates (a
// training step's natural end) the allocator paces the collector: it runs
// runtime.GC on the calling goroutine once the heap has grown by more than
// an eighth of the live heap (16 MiB at least) since the last cycle, unless
// the collector ran on its own in between. A backward pass on a device
// goroutine of shard.Map leaves that check to the end of the Map
// (PaceDeferred), where the cycle holds up no device. This is the package's one
// effect on the rest of the process; GOGC and GOMEMLIMIT are never
// changed, and GONOX_GCPACE=off in the environment switches the pacing off
// (docs/performance.md has what it saves: examples/moe's peak resident
// memory 303 → 206 MiB). Results of ops that
// write every element (matmul, the elementwise and activation ops,
// BiasAct, MatMulBiasAct, Softmax and its gradient, Where, Transpose,
// Take, BroadcastTo, Convert between float32 and the half dtypes, the
// fused optimizer steps, the MSE gradient) take recycled storage as it
// is, and RaggedDot, attention's backward and the row scatters
// (SegmentSum, Take's gradient) clear only what they do not overwrite, on
// the goroutines that compute it; every other allocation zeroes it. Tests
// poison recycled storage with NaN and check these ops.
//
// Only storage the package allocated is recycled, and only when no other
// header can reach it. Each such buffer counts its holders: its tensor,
// every view of it (Reshape, WithLocal, WithLogicalAxes and the copies ops
// make of an operand they return) and every autodiff node that saved it
// for the backward pass. Donate drops one; the storage is recycled when
// none is left. Storage handed out without a copy (RawFloat32, RawInt32,
// RawBool, RawUint16) is never recycled, nor storage from FromFloat32,
// WrapFloat32 and the like. An op may return its operand itself (Reshape
// to the same shape, Convert to the same dtype): donating that result
// donates the operand. Donating an untraced value that a live graph saved
// does not free it: the backward pass that needs it panics naming the op.
// Inside shard.Map, other devices may still read a block given to a
// collective after the collective has returned on its own device: donate
// such blocks only after the Map returns.
//
// Backward donates, by itself, the cotangents it owns (see above) once
// they are dead (inside shard.Map only those consumed by an op that
// computes on the device alone, never a collective's operand). Trace.RecycleIntermediates (autodiff.RecycleIntermediates)
// makes it also donate the forward values of the graph once every node has
// run. For placed tensors Donate donates the blocks, through the layout's
// BlockDonator method; a layout that is a BlockHolder counts the headers
// over it (WithLogicalAxes and the other shallow copies) and donates its
// blocks with the last one, and the backward pass then also donates the
// placed cotangents it owns. A pass without gradients (an evaluation)
// recycles its intermediates with Recycling, which records the ops it
// runs and, when told, donates every value they computed except its
// outputs (parallel.Trainer.Eval does, on every strategy).
//
// # The three parts of the package
//
// The package mixes three concerns; file names say which one a file
// belongs to:
//
//   - Arrays and ops (no prefix): Tensor, its storage and every op
//     (elementwise.go, matmul.go, reduce.go, ...). Each op is an *Op
//     (op.go) applied with Apply or ApplyN (apply.go, the dispatch every
//     op call goes through).
//   - The transformation engine (prefix ad_): Trace, the nodes Apply
//     records, Backward, remat and the residual report (ad_graph.go,
//     ad_backward.go, ad_remat.go, ad_residuals.go); Vmap's BatchTrace
//     and forward mode's JVPTrace (ad_vmap.go, ad_jvp.go, the levels they
//     share in ad_xlevel.go). It knows ops only through their
//     declaration: Impl, the VJP, JVP and batching rules, Save, Traits.
//   - The sharding seam (prefix placed_): the marks of placed tensors and
//     of shard.Map blocks (placed_layout.go, placed_local.go) and the
//     hand-off of ops with placed operands to package shard
//     (placed_seam.go, placed_params.go). When an operand of Apply has a
//     Layout and the op is not Distributed, Apply calls the Placer that
//     shard installs (SetPlacer): shard applies the rule of the family
//     the op declares (Op.Sharding), computes every device's block with
//     the op's own Impl (parameters adapted by BlockParams, described by
//     DescribeParams, both as the op declares) and records a node whose
//     VJP is the op's VJP applied to placed cotangents, which propagates
//     again. Package tensor never imports shard.
//
// # How to write an op
//
// An op is declared once, in its own file, and tested in that file's
// test: adding one touches those two files and nothing else. The engine
// reads the declaration; no list of ops elsewhere needs the new one.
// op_recipe_internal_test.go and op_recipe_test.go add a toy op this way,
// and are the model to copy.
//
// 1. Declare the *Op in an init function (the VJP calls public functions
// that apply ops, and an init function breaks that initialisation
// cycle):
//
//	var softsignOp *Op
//
//	func init() {
//		softsignOp = &Op{
//			Name: "softsign",
//			Impl: func(in []*Tensor, _ any) *Tensor {
//				x := in[0]
//				out := newOutUninit(Float32, x.shape)
//				dst := out.f32()
//				for i, v := range x.f32() {
//					dst[i] = v / (1 + float32(math.Abs(float64(v))))
//				}
//				return out
//			},
//			VJP: func(g *Tensor, in []*Tensor, _ *Tensor, _ any) []*Tensor {
//				d := Add(Scalar(1), Abs(in[0]))
//				return []*Tensor{Div(g, Mul(d, d))}
//			},
//			Save: SaveInputs(0),
//			JVP: func(x, t, _ []*Tensor, _ any) []*Tensor {
//				d := Add(Scalar(1), Abs(x[0]))
//				return []*Tensor{Div(t[0], Mul(d, d))}
//			},
//			Batch: func(in []*Tensor, _ []bool, p any) []*Tensor {
//				return []*Tensor{Apply(softsignOp, p, in[0])}
//			},
//			Sharding: ShardingRule{Family: ShardElementwise},
//			Traits:   Traits{Reuse: FreshVJP},
//		}
//	}
//
// The fields, in the order the engine meets them:
//
//   - Name names the op in residual reports, remat policies
//     (autodiff.SaveOnlyTheseNames), error messages and the communication
//     accounting of sharded calls.
//   - Impl computes the result from host tensors that carry no autodiff
//     node, float32 for float operands (half operands arrive widened, see
//     Traits), and returns a new tensor: storage from newOutUninit when
//     the op writes every element, newOut (zeroed) otherwise, or a view
//     (Reshape). It never writes into an input and does not set the
//     shard.Map mark (Apply does). An op with several results sets ImplN
//     instead, and ImplVJP if differentiating needs state the plain
//     forward skips.
//   - params, the second argument of Impl and of the VJP, carries static
//     parameters (axes, shapes, flags): never tensor data.
//   - VJP maps the output cotangent to one cotangent per input, each of
//     its input's shape and dtype (Backward checks), nil for an input
//     that gets none (integer operands). It is built from public ops,
//     never from raw storage, and so works on traced values (higher
//     derivatives), placed cotangents (sharded models) and shard.Map
//     blocks unchanged. VJPNeed is told which inputs want a cotangent and
//     may skip the others; VJPN is the form for ImplN. Without a VJP the
//     op is not differentiable (comparisons, argmax, integer ops).
//   - Save (or SaveFor, when params decide) keeps exactly what the VJP
//     reads: SaveInputs(i, ...), SaveAllInputs, SaveOutput. The others
//     reach the VJP as shape-only placeholders, whose data panics if read.
//   - JVP is the forward-mode rule: from the primal inputs, their tangents
//     (nil for a zero tangent and for integer inputs) and the primal
//     outputs it returns one tangent per output (nil for zero), built from
//     ops like the VJP. Half operands arrive widened as for the VJP. Ready
//     rules: linearJVP(&op) for ops linear in their float operands
//     (reshapes, slices, gathers, sums: the op applied to the tangents),
//     symmetricJVP(&op) for elementwise ops without broadcasting (the VJP
//     applied to the tangent). A differentiable op without a JVP gets the
//     transpose of its VJP, at about twice the cost.
//   - Batch is the batching rule (Vmap): in holds the operands, those with
//     batched[i] set with a leading batch dimension, the others as they
//     are; params are those of one example. It returns every output with
//     the batch first, computing the whole batch with one call: usually
//     the op's public function on operands whose batch dimension it moved
//     or broadcast, with params for the batched shapes (axes shifted past
//     the batch dimension). Ready rules: sameOpBatch(&op) for elementwise
//     ops whose params ignore shapes, elementwiseBatch(f) for broadcasting
//     ops, materializeBatch(&op) for ops whose operands must share one
//     shape, axisBatch(&op) for ops whose params are one axis; helpers
//     for the rest: materialize, alignBatch, shiftAxes, moveAxis,
//     mergeBatchInto (a gather or scatter with batched indices). Under
//     Vmap an op without a rule is computed example by example (counted,
//     and a panic under a strict Vmap): never leave it out.
//   - Sharding says how package shard computes the op on placed operands
//     (step 3).
//   - Traits: leave them zero unless one of these holds. The zero value
//     is always correct; a wrong claim is a bug the engine may not catch.
//     Half: NativeHalf if the op handles bfloat16 and float16 data itself
//     (moves 16-bit data, has half kernels); otherwise Apply widens half
//     operands to float32 and rounds the results once, for single- and
//     multi-output ops alike, and the backward pass does the same around
//     the VJP. Reuse: FreshVJP if every tensor the VJP returns, other than
//     its cotangent, comes from ops that allocate it (the backward pass
//     may then accumulate into it and recycle it); TakesCotangent if the
//     VJP reads its cotangent once, through a kernel that may write over
//     it (takeDonated). Placement: Distributed, SyncVJP, HandlesVary are
//     for ops of package shard and for transformations (checkpoint).
//     Through: for ops whose implementation only applies other ops (a
//     checkpoint, a custom rule), which Vmap and forward mode then pass
//     through. Types: the dtypes among Float64, Int64 and Uint8 the Impl
//     computes on (TypesFloat64, TypesAll for ops that move data);
//     Apply refuses the others by name.
//
// Rules for further transformations are fields of Op beside VJP, JVP,
// Batch and Sharding, declared the same way; the engine's dispatch
// (apply.go) and the transformation read them.
//
// 2. Write the public function: check the operands first (checkNil, then
// dtypes, shapes, axes), panicking with the op and its operands in type
// notation (tensor.Softsign: i32[3]: not defined for int32; the operands
// helper prints several), then return Apply(op, params, operands...)
// (ApplyN for several results). Apply does the rest: nil and donated
// operands, half widening, tracing and recording the node, shard.Map
// marks, and handing placed operands to package shard.
//
// 3. Pick the op's sharding rule: the ShardFamily that says how its
// results depend on its operands (ShardElementwise for an op computing
// each element from the elements at the same broadcast position,
// ShardRowwise along the last axis, ShardAlongAxis along one axis, a
// reduction, ShardMatMul, ...; the constants list them and package
// shard's documentation shows each rule). Give ShardingRule.Params when
// the rule reads the op's parameters (the axis it works along, the shape
// it makes: OpParams), and ShardingRule.Block when the parameters hold a
// global shape that differs for one device's block. Package shard then
// computes the op blockwise with its own Impl, and its VJP on placed
// cotangents. Without a family (ShardGather) placed operands are
// gathered and the whole result computed on every device: correct, but
// counted, and an error under shard's Strict mode. An op that fits no
// family needs a new one: a constant here and its rule in package shard
// (see "Adding a rule family" there).
//
// 4. Test it in the op's _test.go: the forward result against a reference
// computed another way (a float64 loop, hand-worked numbers, gonum); the
// VJP against finite differences (autodiff.CheckGrad), also of the VJP
// itself (gradients of gradients); bfloat16 operands against the float32
// result rounded once; traced and untraced calls alike; placed operands
// under shard.Strict against the host result; every panic message for
// bad input. Register a rule case for the op from an internal test file
// (package tensor) with addRuleCases, as op_recipe_internal_test.go does:
// one example's operands and a function applying the op. The shared
// tests then check the batching rule (Vmap over each operand and axis
// equals a loop over examples, bit for bit unless the case gives a
// tolerance) and the JVP rule (finite differences, and the transpose of
// the VJP); TestRulesCoverEveryOp fails for an op without a case or a
// rule.
//
// # Devices
//
// Outside shard.Map large kernels may use every core. Inside shard.Map each
// device is one goroutine and its blocks carry a Local mark; kernels given a
// marked block compute on the calling goroutine only.
//
// The goroutines that help a kernel are a pool, shared by the elementwise
// and reduction kernels, the matrix products and the convolutions: at most
// GOMAXPROCS-1 workers, started on first use, which after a piece of work
// stay awake for 1 ms watching for the next (yielding the processor every
// 20 µs) and then park; a parked worker exits after 100 ms without work.
// The first goroutine of a piece takes its chunks from the front, the others
// from the back, so a core computes about the same rows piece after piece.
// This is the one exception to "no goroutine outlives the call that
// started it": a step of a model runs a hundred or more parallel pieces a
// few hundred microseconds long, most less than 50 µs apart, and on a
// virtual machine waking a halted core for each took 10-30 µs. A kernel
// returns only when all of its work is done; results do not depend on
// which goroutines computed them. Beside lends a worker to a layer's host
// work (Go code on Go values, such as nn.MoE's routing) while the caller
// goes on with tensor operations.
//
// # Kernels
//
// Matrix products and the elementwise, reduction and optimizer kernels run
// AVX-512 or AVX2 assembly on amd64 CPUs that have it and pure Go elsewhere
// (and in builds with -tags noasm). The best set the CPU runs is chosen at
// start-up; the environment variable GONOX_KERNELS=avx512, avx2 or go
// chooses another, for example to check on an AVX-512 machine what an
// AVX2-only one computes:
//
//	GONOX_KERNELS=avx2 go test ./tensor/...
//
// Kernels reports the set in use and what the CPU supports. A set the CPU
// cannot run, or an unknown word, is an error naming what the CPU has: the
// first op panics with it, and Kernels returns it so that a program can
// check at start-up.
package tensor
