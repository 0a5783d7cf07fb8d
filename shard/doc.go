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
// AllGatherInvariant, PsumScatter, Ppermute, RingShift, AllToAll and
// RaggedAllToAll — and the device's position (AxisIndex, AxisSize):
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
// # Faults
//
// All devices must issue the same collectives in the same order. If fn
// panics on any device, if the devices disagree on a collective, or if one
// returns while others wait in a collective, the whole Map is aborted:
// every waiting device is released, the call panics with a *DeviceError
// naming the device and the cause (MapErr returns it instead), and no
// goroutine is left behind.
//
// # Several processes
//
// With package shard/mpi (build tag mpi), meshes span processes and hosts:
// Install makes the device pool global and process-major, each process
// materialises only its own devices' blocks (Blocks has nil for the
// others), collectives between processes go over MPI, and Gather and Put
// across processes are collective. See package shard/mpi.
//
// # Cost accounting
//
// WithComm collects the bytes each device sends, per collective kind, so
// strategies can be compared; tensor.Residuals (and autodiff.Residuals)
// report what backward passes keep on each device; Device.MemoryBytes
// reports the bytes of sharded-tensor blocks a device holds.
package shard
