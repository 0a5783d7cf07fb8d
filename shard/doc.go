// Package shard places tensors and whole models on meshes of devices and
// runs SPMD programs over them: JAX's sharding and shard_map, for Go.
//
// # Devices and meshes
//
// The local device pool holds simulated CPU devices, 8 by default (set
// GONOX_DEVICES to change it), like XLA's host platform device count. A
// Mesh arranges devices in a grid with named axes:
//
//	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
//	teacher := shard.NewMeshOn(shard.Devices()[:4], []int{4}, []string{"tp"})
//	student := shard.NewMeshOn(shard.Devices()[4:], []int{4}, []string{"dp"})
//
// # Specs and shardings
//
// A Spec (PartitionSpec) says, for each dimension of a tensor, which mesh
// axes it is split over; P builds one the way JAX writes it:
//
//	shard.P("dp", nil)              // rows split over dp, columns whole
//	shard.P([]string{"dp", "tp"})   // split over dp and tp, dp major
//	shard.P()                       // replicated
//
// A Sharding is a mesh and a spec. Put places a tensor (device_put), Gather
// brings it back to one host tensor, and Reshard moves it to another
// sharding, on the same mesh or another one. Sharded tensors print in JAX's
// type notation: float32[1024@dp,4096], float32[8@(dp,tp)].
//
// # Whole models
//
// FilterShard places every tensor leaf of a model (any Go value; see package
// pytree) and leaves the rest alone, like Equinox's filter_shard. Where the
// leaves go is a SpecTree: one Spec for all, Specs keyed by path prefix
// ("Layers[*].W"), a SpecFunc, or Rules that map the logical axis names
// set on parameters to mesh axes, as Flax does.
//
// # Checking and seeing placements
//
// Check asserts shapes and shardings in the jaxtyping style, with dimension
// names bound consistently across the checks of a Scope:
//
//	var sc shard.Scope
//	sc.MustCheck(x, "batch@dp seq d")
//	sc.MustCheck(w, "d heads@tp")
//
// Visualize draws which device holds which block of a tensor, as
// jax.debug.visualize_array_sharding does. LikeParams places optimizer state
// like the parameters it mirrors when placements are given by path; with
// Rules no helper is needed, since state built with pytree.Map keeps the
// parameters' logical axis names.
//
// # SPMD with Map
//
// Map runs a function once per device, concurrently, on each device's
// blocks of its inputs, and assembles the outputs by their specs. Inside,
// the Ctx provides the collectives — Psum, Pmean, Pmax, Pmin, AllGather,
// AllGatherInvariant, PsumScatter, Ppermute, RingShift, AllToAll,
// RaggedAllToAll, RaggedAllToAllRows and RaggedAllToAllTake, and the asynchronous
// PpermuteStart and RingShiftStart —
// and the device's position (AxisIndex, AxisSize):
//
//	matmul := shard.Map(mesh,
//		shard.Specs{"X": shard.P("dp", nil), "W": shard.P(nil, "tp")},
//		shard.P("dp", "tp"),
//		func(c *shard.Ctx, in XW) *tensor.Tensor { return tensor.MatMul(in.X, in.W) })
//
// Blocks carry the mesh axes they vary over (JAX's varying manual axes): a
// block of an input split over dp varies over dp; a Psum over dp makes it
// invariant. Returning a value that varies over an axis its out spec
// replicates is an error. Ops mixing a varying block with an invariant one
// broadcast the invariant one, and differentiating through that broadcast
// sums its cotangent over the devices, so the gradient of a replicated
// parameter used with sharded data comes out summed, as data parallelism
// needs. Ctx.Vary marks a value varying by hand.
//
// Everything is differentiable: each collective's VJP is its transpose
// (psum and pvary, all-gather and reduce-scatter, a permutation and its
// inverse, an all-to-all and its reverse), gradients can be taken inside
// fn, and a function that calls Map can be differentiated from outside.
//
// The other transformations go through too. Inside fn, autodiff.Vmap maps
// a per-example function over a device's blocks: every device maps the
// same batch, so each collective moves the whole batch at once (its
// dimension arguments past the batch dimension); forward mode carries
// tangents through every collective (autodiff.JVP, Jacfwd). From outside,
// Vmap of a function that calls Map is one Map whose devices map the
// batch, and forward mode through Map is one Map whose devices compute
// tangents beside values. The ragged all-to-alls have no batching rule:
// under Vmap they run once per example (counted, a panic under
// autodiff.Strict).
//
// Psum and PsumScatter sum float32 blocks in one fixed order, so a
// psum_scatter is bit for bit its part of the psum; the sum runs an AVX2
// kernel when the kernel set allows it and a Go loop otherwise, with the
// same bits (the set is the module's: GONOX_KERNELS, see tensor.Kernels).
//
// # Overlapping communication with computation
//
// Collectives are synchronous: every device of the group waits in one
// until all have issued it. Ctx.PpermuteStart and Ctx.RingShiftStart start
// a ppermute and return a *Handle at once; the device computes meanwhile,
// and Handle.Wait returns the shifted block (XLA's ppermute_start and
// ppermute_done):
//
//	h := c.RingShiftStart(w, shard.Axes{"dp"}, 1) // w travels ...
//	out = tensor.Add(out, tensor.MatMul(xs, w))    // ... while w is used
//	w = h.Wait()
//
// Started collectives count in the order of collectives like the others,
// are checked the same way, and are differentiable: the transpose of a
// started ppermute is the reverse one, started where the forward one is
// waited for and waited for where it started, so backward overlaps too.
// A handle must be waited for, once, before fn returns; one that is not
// fails the Map call (a *DeviceError), and a device failing while others
// wait releases them as usual. The collective matmuls AllGatherMatMulRing
// and MatMulReduceScatterRing start each ring step's shift before the
// step's product.
//
// Between devices of one process a shift is a pointer handoff: nothing is
// transferred, and starting it only spares the step its barrier. Between
// processes (build tag mpi) the block travels with MPI_Isend and
// MPI_Irecv, posted when the last device of the process starts it, while
// a goroutine drives the transfer (MPI_Test every ProgressEnv interval)
// and Wait completes it; a Group implementing AsyncGroup provides this.
//
// Ctx.PsumStart and Ctx.PsumScatterStart start a psum or a reduce-scatter
// the same way (not differentiable: for values no longer differentiated,
// such as the gradients a data-parallel step reduces during the backward
// pass, autodiff.OnGradient). Between processes the exchange runs on a
// goroutine of the Map call, after the exchanges started before it (a
// synchronous collective issued meanwhile waits for them), and Wait
// computes the result with the synchronous collective's own code: bit for
// bit the same. Ctx.PsumScatterGroupStart starts the reduce-scatters of
// several float32 blocks as one: in one process the devices meet once for
// all of them and sum each part into one vector, as the flat buckets of
// PyTorch's DDP do; Ctx.AllGatherInvariantTargets is GatherTarget for
// several blocks at one meeting. Between two processes of different hosts a started
// reduce-scatter moves with non-blocking sends, waited for by polling
// (PollingRequest) rather than spinning while the device computes, so
// that it does not take the core from the computation it overlaps; other
// started exchanges, which would spin, wait until the device waits for
// them. Comm.Waited counts the time each
// device waited for collectives: the communication its computation did
// not hide. All-gather starts are not provided: build them from ring
// shifts, as the recipes do.
//
// # Folded weight gradients
//
// Ctx.PsumScatterProductStart starts the reduce-scatter of a product
// pᵀ·q (a layer's weight gradient: its input's rows times its output
// cotangent's) without forming the product: inside one process each
// device computes its part of the sum from every device's p and q
// (tensor.SumProductsPart), writing 1/n of the product and summing
// nothing after — GSPMD's reduce-scatter fused with the dot, as FSDP and
// ZeRO gradients are computed there. On a mesh spanning processes it is
// the product, then PsumScatterStart. Ctx.FoldPsumScatter hands it the
// products of a backward pass: each matmul or dense VJP that would
// compute the folded value's cotangent as pᵀ·q gives p and q to the fold
// instead (the device environment is a tensor.ProductCotangentTaker);
// FoldedGradient.Wait returns the sum of the parts, and what the backward
// pass still returns for the value (its other uses, nil if none) is
// reduce-scattered as before. FoldedGradient.WaitThen hands the part of a
// fold that took one product to a tensor.PieceStep block of rows by block
// of rows instead (tensor.SumProductsPartThen): an optimizer's step there
// reads each block of the gradient while it is in cache, and the part is
// never formed. Comm counts a folded reduce-scatter as
// "psum_scatter_product", with the bytes the reduce-scatter of the whole
// product would have sent. parallel's DP step with a sharded update folds
// the split float32 matrices whose parts are not small
// (parallel.Config.UnfoldedGradients).
//
// # Computing on placed tensors: sharding propagation
//
// Every op of package tensor accepts global placed tensors (Put,
// FilterShard) and returns placed results, as JAX's explicit sharding and
// PyTorch's DTensor do: each device computes its own block, all devices in
// parallel, and the result's sharding follows the op's rule:
//
//	x := shard.Put(x, shard.NewSharding(mesh, shard.P("dp", nil)))  // float32[1024@dp,4096]
//	w := shard.Put(w, shard.NewSharding(mesh, shard.P(nil, "tp")))  // float32[4096,256@tp]
//	y := tensor.MatMul(x, w)                                         // float32[1024@dp,256@tp], no communication
//
// The propagation rules (prop_table.go): one rule per family of rules,
// and each op of package tensor declares its family where it is
// registered (tensor.Op.Sharding, "How to write an op" in package
// tensor). A test checks that every family is named here:
//
//	elementwise           operand shardings merged (largest operand first),
//	                      the others moved to it (slicing a replicated
//	                      operand is free); every result laid out alike:
//	                      mul div rem floorDiv maximum minimum pow, the
//	                      comparisons and logical ops, where, neg abs sign
//	                      exp log sqrt rsqrt square tanh sigmoid relu silu
//	                      gelu gelu_exact softplus log_sigmoid clamp
//	                      convert not is_nan is_finite, the activations'
//	                      backward kernels (relu_bwd, ...), bias_act
//	                      bias_act_bwd adam_update adam_step sgd_step
//	linear                add sub name: elementwise, and add and sub of
//	                      equal partial sums stay partial
//	matmul                free dims keep their axes (one mesh axis, one
//	                      dim); a contracting dim sharded the same way on
//	                      both sides: partial sum; on one side only: the
//	                      other sliced (partial) or the sharded side
//	                      gathered, whichever sends fewer bytes
//	reduce_sum            local sums; reduced sharded dims leave a partial
//	                      sum
//	reduce_max reduce_min local, then pmax / pmin over the reduced dims' axes
//	transpose reshape broadcast  axes follow the dims; reshape keeps a
//	                      sharded dim whose blocks stay contiguous
//	softmax log_softmax cross_entropy  rowwise (leading dims merged); over
//	                      a sharded last axis, two passes (pmax, psum) from
//	                      propagated ops: vocab-parallel
//	                      (softmax_cross_entropy)
//	rowwise row_reduce    the last axis gathered: softmax_grad
//	                      log_softmax_grad softmax_cross_entropy_grad;
//	                      softmax_cross_entropy_probs (one value per row)
//	take                  the ids keep their axes, the table is gathered
//	                      along the indexed axis (and the ids' axes)
//	take_grad             scatter-add per device: the indexed dims leave a
//	                      partial sum (psum_scatter into an FSDP table)
//	along_axis along_axis_reduce  along one axis: that axis gathered
//	                      (cumsum argsort sort top_k split roll, the
//	                      take and scatter-add along an axis of their VJPs;
//	                      argmax and argmin drop it)
//	one_hot               like the ids, the new class axis whole
//	concat slice pad flip the dims they change gathered
//	scatter_add           the scattered axis gathered
//	bincount segment_sum  local counts and sums: a partial sum over the
//	                      axes the rows are split over
//	segment_take bincount_gather  the table read is gathered; the result
//	                      follows the ids
//	mse                   composed: mean of squared differences
//	conv conv_transpose conv_kernel_grad  the batch and the channels keep
//	                      their axes, spatial dims gathered: batch over data
//	                      axes without communication, output channels over
//	                      tp column-parallel, input channels over tp leave
//	                      a partial sum (the kernel gradient's over the
//	                      batch axes); with feature groups channels whole
//	window                pooling (reduce_window, select_and_scatter): the
//	                      batch dims keep their axes, windows gathered
//	attention             attention and attention_bwd: batch and head dims
//	                      keep their axes (each head computes alone),
//	                      lengths and features gathered
//	gather, anything else gathered on every device and computed whole
//	                      (replicated result); counted, a panic under Strict
//
// Replicas compute once: devices holding the same blocks of every operand
// share one result. Dropout keeps the single-device mask (drawn for the
// global shape, sliced to the blocks for free), so a placed model drops
// what one device would.
//
// A partial sum (DTensor's Partial) is a placed tensor whose blocks are
// summands; it prints as float32[]{partial dp} in Explain. It is reduced
// lazily by its consumer: with psum when the consumer wants it replicated
// along those axes, with psum_scatter when it wants it sharded over them.
// Host operands mixed with placed ones are taken as replicated
// (uncommitted, as JAX treats host arrays); operands on two meshes panic.
//
// Differentiation: a propagated op records a node whose VJP is the op's
// own VJP applied to placed cotangents (so it propagates again), and each
// input cotangent is then laid out like its input. A cotangent already laid
// out so keeps its pending sum: cotangents meeting at a value add up first,
// and are reduced once, by their first consumer or when Backward hands the
// gradient out (tensor.Placer.Settle). Gradients of sharded parameters come
// out sharded like them: a replicated parameter's gradient is psum'd, an
// FSDP parameter's psum_scatter'd, without a full gather. Checkpoint
// (remat) works on placed models. Optimizers step placed parameters
// shard-wise through the elementwise rule.
//
// Record counts the collectives propagation inserts, per device, kind and
// op (Comm.OpBytes); Explain prints per op the types and the collectives
// with their bytes; Strict makes the gather fallback a panic; Constraint
// (with_sharding_constraint) moves a value where you want it.
//
// # Adding a rule family
//
// An op picks its family in package tensor, where it is registered; a new
// op that fits an existing family touches nothing here. A family that
// does not exist yet takes three steps:
//
//  1. its constant and name in package tensor (tensor.ShardFamily, in
//     tensor/placed_params.go), with what an op of the family promises;
//  2. its rule in prop_table.go: plan, a function of the call (the op,
//     its params as tensor.DescribeParams describes them, the operands and
//     their layouts) returning a step — where each operand must be first
//     (or kept as it is, pending sums included), how each result is laid
//     out, which results are partial sums, and the computation of one
//     device's blocks, usually the op's own Impl (implLocal) — or nil to
//     decline the operands (they are then gathered); or compose, which
//     computes the call from other propagated ops;
//  3. a line in the table above (TestRuleTableDocumented checks that
//     every family has a rule and a line), and a test of the rule against
//     the host result under Strict, with the collectives it inserts
//     counted (Record).
//
// # Faults
//
// All devices must issue the same collectives in the same order. If fn
// panics on any device, if the devices disagree on a collective, or if one
// returns while others wait in a collective, the whole Map is aborted:
// every waiting device is released, the call panics with a *DeviceError
// naming the device and the cause (MapErr returns it instead), and no
// goroutine is left behind.
//
// # Donating placed tensors
//
// tensor.Donate of a placed array made by Put, Map, MapBlocks or a
// propagated op donates its blocks, and the next results of the same size
// (a psum's, an all_gather's, an op's) reuse their storage instead of
// fresh zeroed memory, as a training loop wants of its previous gradients
// and parameters. Sharding propagation recycles by itself the copies and
// sums it moves an op's operands into, and the cotangents its backward
// passes consume; autodiff.RecycleIntermediates recycles the placed
// intermediates of a loss. Every tensor header over an array counts as a
// holder of its blocks (a second one made by WithLogicalAxes, say): the
// blocks are donated with the last of them. Blocks that were handed out
// are left alone: Blocks, Gather of a replicated array (which returns the
// block itself) or another layout reusing them keep them valid, so
// donating one array never invalidates another's values. Inside Map, a
// device may donate its own blocks once the collective that read them has
// returned. Device.MemoryBytes charges each block to its header until the
// collector frees the header (the blocks of a Map output together, until
// it frees all of their headers, which are made in one allocation).
//
// # Several processes
//
// With package shard/mpi (build tag mpi), meshes span processes and hosts:
// Install makes the device pool global and process-major, each process
// materialises only its own devices' blocks (Blocks has nil for the
// others), collectives between processes go over MPI, and Gather and Put
// across processes are collective. See package shard/mpi. Between
// processes of one host (a Group implementing SharedMemoryGroup, as
// shard/mpi's are there) shard moves the data itself, through memory every
// process of the group maps, and sums in rank order. A group spanning
// several hosts, some with two or more of its processes (the transport
// implementing HostTransport), sums float32 hierarchically: through
// shared memory within each host, between hosts by one leader per host,
// then a broadcast within each host (a reduce-scatter's leaders
// reduce-scatter between hosts and share their host's blocks instead);
// shard uses it only where its order of additions is the one-host order,
// so that such a psum equals the one-process psum bit for bit (2 hosts of
// 2 or 4 processes, 3 hosts of 2, ...).
//
// Propagation works the same way on such meshes: each process computes
// its own devices' blocks of every op; a pending sum, pmax or pmin that a
// rule leaves is all-reduced across processes through the communicator of
// each group of devices (as Map's Psum is; a pending sum wanted sharded
// over its axes is reduce-scattered instead), and a reshard whose blocks
// live on other processes sends each process only the parts of its new
// blocks it holds no replica of (one all-to-all over all processes). The
// program is SPMD: every process runs the same ops in the same order,
// since reductions, reshards, the gather fallback and host reads (Gather,
// Item, Float32s) may all communicate. A process with no device of a mesh
// cannot compute on it (propagation panics, naming the process). Prefetch
// starts the gathers of a layer's FSDP-split weights in the background,
// on a communicator of the mesh's own, so that the next layer's weights
// travel while this one computes; the op that gathers them takes the
// prefetched copies and drops them after use.
//
// # bfloat16 and float16
//
// Arrays of dtype bfloat16 and float16 are placed, resharded and gathered
// bit for bit, and collectives take their blocks as they are: all_gather,
// ppermute, all_to_all and ragged_all_to_all move the 16-bit elements
// (NaN payloads included), so they send half the bytes of float32 and
// Comm counts 2 bytes an element. Psum and PsumScatter of half blocks
// accumulate in float32 and round once to the blocks' dtype (round to
// nearest even): the result is the float32 collective of the widened
// blocks, rounded; Comm charges them the ring bytes of the 16-bit blocks.
// Pmax and Pmin compare widened values (exact). Between processes, the
// 16-bit elements go over MPI as bytes, except a half psum, which
// all-reduces float32 partial sums (4 bytes an element) and rounds once.
// Propagation inserts the same collectives, so the pending sum of a bf16
// matmul is a bf16 psum: each device's partial product is rounded to bf16
// first, as JAX's dot of bf16 operands returns bf16.
//
// # float64, int64 and uint8
//
// Arrays of dtype float64, int64 and uint8 are placed, resharded and
// gathered like the others, on one process or across processes, and
// all_gather, ppermute (RingShift, and RingShiftStart's asynchronous
// one), all_to_all and ragged_all_to_all move their blocks as they
// are. Psum, Pmean and PsumScatter take float64 and int64 blocks and sum
// them in the group's rank order, so that their results are the same on
// every device, kernel set and process count. Between processes a
// transport has no float64 or int64 reduction: each process gathers every
// member's block (Group.Allgatherv) and sums them itself in rank order,
// which gives bit for bit the sum of one process over the same devices,
// however the devices are spread over the processes, at the cost of an
// all-gather's bytes (the blocks of every member to every process).
// Pmax and Pmin take float64 and int64 blocks too (between processes, the
// processes' local extremes are gathered the same way); the gradient of a
// float64 Pmax is split among tied devices in float64.
//
// # Cost accounting
//
// WithComm collects the bytes each device sends, per collective kind, so
// strategies can be compared; tensor.Residuals (and autodiff.Residuals)
// report what backward passes keep on each device; Device.MemoryBytes
// reports the bytes of sharded-tensor blocks a device holds.
//
// # The files
//
// The files are grouped by concern: mesh.go, device.go, spec.go,
// sharding.go, array.go (placement), spectree.go, statespec.go and
// logical_rules.go (where a model's leaves go), check.go and visualize.go;
// map*.go for Map and its execution; coll*.go for the collectives, one
// file each; prop_*.go for sharding propagation, whose rules are one table
// in prop_table.go; comm.go for Comm; transport.go for the interfaces a
// transport implements and xproc_*.go for everything that crosses
// processes.
//
// # Adding a collective
//
// A collective lives in one file, coll_<kind>.go, and its test,
// coll_<kind>_test.go; nothing else changes. (coll_pcumsum_toy_test.go
// adds a prefix sum over devices this way, and coll_pcumsum_test.go tests
// it, across processes too.) The file holds three things.
//
// Its descriptor, a *collective: the kind, under which Comm counts it and
// errors name it, and its cross-process exchange, usually eachGroup of one
// of crossGroup's: allreduceSum, allreduceExtreme, blocks (bring the
// remote members' blocks) or parts (bring only the parts the local members
// read, as the descriptor's needs says):
//
//	var pcumsumColl = &collective{kind: "pcumsum", cross: eachGroup((*crossGroup).blocks)}
//
// Its tensor op, made in an init that registers both, register(pcumsumColl,
// pcumsumOp). The op's Impl is the in-process exchange: e.run.meet(e,
// &call{coll: pcumsumColl, axes: ..., x: ..., extra: ...}) waits until
// every device of the mesh has issued it (extra holds the parameters every
// device must agree on); the result is computed from the calls of the
// group's members (s.calls, where the cross-process exchange has put the
// other processes' too); e.run.barrier(e, s) waits until every member is done
// reading them (a collective whose members each write a part of a shared
// result may write it before meeting, in e.run.next(e)'s slot, and then
// meet once: the in-process all-gather and the staged psum of small
// blocks do; GatherTarget reserves its slot earlier still, e.run.reserve,
// so that the producer of a block writes it into the shared result). A
// collective that reads only its group's calls and meets no more than
// once may set the call's members (group.members): in one process each
// group then goes on as soon as its own members have arrived, while the
// devices of the other groups still compute (the ragged all-to-all over
// ep does: the dp replicas of a dp×ep mesh run their backward passes
// without waiting for each other), and reports its last reader with
// e.run.lastOutOf. e.account(pcumsumColl, bytes) counts the bytes this device
// sends; the result is marked with the axes it varies over. Its VJP is the
// transpose, written with collectives, so gradients flow between devices
// and processes.
//
// Its Ctx method, which checks the operands (checkLocal), makes them vary
// over the axes (tensor.Vary) and applies the op.
//
// The rendezvous checks that the devices agree on the collective, its
// parameters, dtype and shape (a descriptor with rowsDiffer compares no
// shapes; one whose calls carry data that differs between devices says how
// it travels between processes with wire and unwire), Comm counts it, and
// on a mesh that spans processes the processes compare a fingerprint of
// it (its description, the mesh, its sequence number: xproc_agree.go)
// before the descriptor's exchange carries it.
//
// # Adding a transport
//
// A transport connects the processes of a job (package shard/mpi's runs
// over MPI). It implements, in a package of its own, the interfaces of
// transport.go: Transport (this process's rank, the job's size, a Group
// of all processes, a Group of some, Abort) and Group (all-reduce of
// float32 and int32, reduce-scatter of float32, all-gather and all-to-all
// of bytes), and optionally AsyncGroup (non-blocking sends and receives,
// so that started ppermutes overlap; their Requests may implement
// PollingRequest), SharedMemoryGroup (memory the group's processes share:
// shard then moves the group's collectives through it) and HostTransport
// (which processes share a host, for hierarchical sums). Every process calls Install with it before the device pool
// is first used (shard/mpi's Init does). Every method that communicates
// is collective: all processes of the group call it, in the same order.
// A transport is tested as shard/mpi's is: its own tests of each method,
// then package shard's tests on meshes spanning its processes, which must
// give the one-process results (shard/mpi/ci.sh runs them under mpirun).
package shard
