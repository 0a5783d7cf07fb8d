// Package parallel trains nn.MLP models on a mesh of devices with data
// parallelism (DP), fully-sharded data parallelism (FSDP), tensor
// parallelism (TP) or both (FSDP+TP), as the JAX sharding guide's
// "Practical Examples" do, and checks that each equals training on one
// device.
//
//	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
//	tr := parallel.New(model, parallel.Config{
//		Strategy:  parallel.FSDPTP,
//		Mesh:      mesh,
//		Loss:      parallel.CrossEntropy,
//		Optimizer: optim.Adam(optim.Constant(1e-3)),
//	})
//	for ... {
//		loss := tr.Step(x, y)
//	}
//
// # Placement by rules
//
// Parameters are placed by logical-axis rules, not by per-model spec
// trees. Annotate names each layer's dimensions the Megatron way —
// (embed, mlp) then (mlp, embed), the last output "classes" — and each
// strategy is a set of shard.Rules over those names:
//
//	DP       nothing split: every device holds a replica
//	FSDP     mlp  → every mesh axis
//	TP       mlp  → tp
//	FSDPTP   mlp  → tp, embed → the other (data) axes
//
// Optimizer state carries the same names, so the same rules shard it like
// the parameters (ZeRO). Batches are split over the data axes: every axis
// for DP and FSDP, every axis but "tp" otherwise.
//
// # One step
//
// A step is one shard.Map in which each device computes the loss on its
// rows and differentiates it. Gradients of replicated parameters come out
// summed over the devices (each is an all-reduce); under FSDP each layer
// all-gathers its weights inside autodiff.Checkpoint with a policy that
// keeps everything but the gathered copies, so the backward pass gathers
// them again and the weights' gradients are reduce-scattered to their
// shards; under TP a layer whose input dimension is split over "tp" sums
// its partial products (a column-parallel layer followed by a row-parallel
// one needs one all-reduce per pair). Sharded strategies update their
// shards inside the same Map; DP updates the replicated parameters once,
// on the host.
//
// Trainer.Stats reports what a strategy costs per device — bytes sent per
// collective kind, residual bytes kept for backward, parameter and
// optimizer-state bytes — and examples/mlp -strategy compare prints them
// side by side.
package parallel
