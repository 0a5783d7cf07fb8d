// Package expert runs a mixture-of-experts layer (nn.MoE) with its experts
// split over the devices of a mesh axis: expert parallelism, as the JAX
// sharding guide's "MOE Parallel with Token Dropping" does it.
//
// # The dispatch
//
// Inside shard.Map, every device holds a block of the tokens (split over
// all the token axes, e.g. dp and ep) and a block of E/ep experts (split
// over the expert axes, e.g. ep), and the whole router. Forward then, on
// each device:
//
//  1. routes its own tokens (nn.MoE.Route) and drops, on the sender, the
//     choices beyond each expert's per-sender capacity
//     ExpertCapacity(local tokens, k, E, CapacityFactor)
//     (nn.DropOverCapacity, DropTokenMask's mask computed on the host);
//  2. learns the row counts per expert of the devices along the expert
//     axes in one small all-gather, from which each device computes where its rows
//     land and what it receives, and sends its kept choices, sorted by
//     expert, with one ragged all-to-all (shard.Ctx.RaggedAllToAllTake,
//     the receivers copying the rows from the sender's tokens through its
//     sorted index: no gathered copy on the sender) whose groups are
//     (device, local expert) pairs: every receiver gets its rows already
//     grouped by local expert, senders in order within a group;
//  3. computes all its experts with one grouped matrix product per
//     projection (nn.MoE.Experts, tensor.RaggedDot), no padding;
//  4. sends the results back with the transposed ragged all-to-all,
//     weights them with their gates and sums each token's k contributions
//     (a segment sum).
//
// A layer's forward pass meets the other devices four times (the counts,
// the two exchanges, one psum of the router's sums and the global counts
// for the auxiliary losses) and its backward pass twice (the two
// exchanges transposed). Only the psum spans the token axes: the others
// are over the expert axes, where in one process each expert group meets
// on its own (the dp replicas of a dp×ep mesh do not wait for each other
// there).
//
// A dropped choice contributes 0: in a transformer block, whose MoE output
// is added to the residual stream, a token with every choice dropped
// passes through unchanged.
//
// Everything is differentiable, so gradients flow to the tokens, the router
// and the experts; the ragged all-to-all's VJP is the reverse ragged
// all-to-all. The auxiliary losses (load balancing and router z-loss) are
// global: the counts and the router's sums are psummed over the token
// axes, so every device gets the value a single
// device computes on the whole batch.
//
// # Semantics
//
// The per-sender capacity rule makes the result depend on how tokens are
// split, never on where the experts are: with tokens split over S devices
// (in the order of the token axes, each device holding a consecutive run of
// rows), Forward equals nn.MoE.Forward on one device with Senders = S — in
// output, auxiliary losses, dropped choices and every gradient. With a
// capacity large enough that nothing drops (or NoDrop) it also equals the
// global-capacity layer (Senders = 0). The guide sizes the capacity with an
// extra factor ep (each sender may fill every expert to the capacity of
// the whole ep group); set CapacityFactor ep times larger to get its rule.
//
// # Placement
//
// The experts' stacked weights carry the logical axis nn.AxisExpert first
// (nn.DefaultMoEAxes), so Rules(axes) — AxisExpert to the expert axes — is
// the placement, combined with any data or FSDP rules. Apply runs the layer
// on global tensors; Forward is the per-device body for a model's own
// shard.Map, or for the Config.DeviceLoss of package parallel's trainer
// with the strategies parallel.EP and parallel.FSDPEP (examples/moe trains
// a transformer language model that way).
//
// # Why a package of its own
//
// Package nn imports only tensor (its layers are mesh-agnostic), shard
// imports only tensor and pytree, and the layer needs both nn.MoE and
// shard.Ctx; parallel is a trainer that builds on all of them. A small
// package importing nn and shard adds the layer without a cycle and keeps
// each package to one job.
package expert
