// Package autodiff differentiates functions of tensors and of whole models.
//
// # Gradients of models
//
// A model is any Go value holding *tensor.Tensor leaves (see package
// pytree). ValueAndGrad differentiates a scalar loss with respect to every
// floating-point leaf (float32, float64, bfloat16, float16) and returns the
// gradient as a value of the model's type, as Equinox's
// filter_value_and_grad does:
//
//	loss := func(m MLP) *tensor.Tensor { return tensor.MSE(m.Forward(x), y) }
//	value, grads := autodiff.ValueAndGrad(loss)(model)
//
// Leaves that are not floating-point (int32 step counters, bool masks) get
// nil gradients; float leaves the loss does not use get zeros. Gradients carry
// their parameter's logical axis names and sharding. Variants take a second,
// non-differentiated argument (ValueAndGradWith), return auxiliary data
// (ValueAndGradAux), or both; Grad and GradWith return only the gradient;
// VJP returns a pullback for any output tree.
//
// # How it works
//
// Differentiation is define-by-run reverse mode built on package tensor's
// traces: every op on a traced tensor records a node on its result, so the
// graph hangs on the tensors and there is no global tape. Several
// goroutines can differentiate independently at once. The backward pass
// visits nodes in the reverse of their recording order, so SPMD devices in
// shard.Map issue the collectives of their backward passes in the same
// order. VJP rules are written with ops, and traces nest, so gradients of
// gradients (Hessian-vector products) work.
//
// # Donating buffers
//
// A training loop can give each step's dead buffers back for the next one
// to reuse, as JAX's donate_argnums does (see "Donation" in package
// tensor): DonateTree donates the gradients once the optimizer has used
// them (and the previous parameters and state, if nothing else holds
// them), and the option RecycleIntermediates makes the backward pass
// donate the activations it kept. The backward pass always donates the
// cotangents it owns once they are dead. A donated tensor panics when used,
// naming the op, so a buffer donated too early is a loud error, never a
// wrong number:
//
//	step := autodiff.ValueAndGradWith(loss, autodiff.RecycleIntermediates())
//	for ... {
//		l, g := step(model, batch)
//		newModel, newState := optim.Step(opt, model, g, state)
//		tensor.Donate(l)
//		autodiff.DonateTree(g)
//		model, state = newModel, newState
//	}
//
// parallel.Trainer's Step does this by itself.
//
// # Rematerialisation
//
// Checkpoint wraps a function so that its intermediate values are not kept
// for the backward pass but recomputed from its inputs when needed
// (jax.checkpoint). A Policy selects values that may be kept anyway:
// NothingSaveable, EverythingSaveable, DotsSaveable, SaveOnlyTheseNames and
// SaveAnythingExceptTheseNames, where names are given with tensor.Named or
// are op names such as "matmul" and "all_gather". Residuals reports what a
// backward pass would keep — count and bytes per producing op or name, and
// per shard.Map device — the measurable effect of a policy.
//
// # Loops
//
// Scan is jax.lax.scan: it threads a carry through f over the leading axis
// of xs and stacks what f returns per step, for any pytrees, forwards or
// (ScanReverse) backwards. Its gradient reaches the initial carry, xs and
// the parameters f closes over. Without remat the backward pass keeps
// every step's intermediate values; ScanRemat(k) keeps only every k-th
// carry and recomputes the steps between during the backward pass, so a
// 10 000-step recurrence needs O(√T) steps of memory instead of O(T):
//
//	step := func(h, x *tensor.Tensor) (*tensor.Tensor, *tensor.Tensor) {
//		h = cell.Forward(x, h)
//		return h, h
//	}
//	hT, hs := autodiff.Scan(step, h0, xs, autodiff.ScanRemat(0)) // k = ⌈√T⌉
//
// f is traced once for all the segments (tensor.RematCompiled): what the
// forward pass keeps per segment is its first carry, not a program of k
// steps. BenchmarkScanRemat measures the peak of the live heap and the
// time of the gradient of a 4096-step GRU scan with and without remat.
//
// # Vmap
//
// Vmap vectorises a function written for one example (jax.vmap,
// eqx.filter_vmap): the function runs once on whole batches, each op
// through its batching rule, never in a loop over examples. InAxes and
// OutAxes say which tensor leaves of the arguments and result carry the
// batch and where (an Axis, None for a broadcast leaf, an AxesFunc for a
// choice per leaf); Vmap2 and Vmap3 take two and three arguments.
//
//	// Per-example gradients, as DP-SGD needs them.
//	per := autodiff.Vmap2(autodiff.GradWith(loss), autodiff.InAxes(autodiff.None, autodiff.Axis(0)))(model, batch)
//	// An ensemble of 8 models, one key each.
//	models := autodiff.Vmap(newModel)(tensor.StackKeys(key.Split(8)))
//
// optim.DifferentiallyPrivateAggregate turns such per-example gradients
// into DP-SGD's clipped, noised mean; docs/transforms.md walks through
// per-example gradients, ensembles and forward mode with their speed.
//
// Vmap composes with Grad both ways (per-example gradients; gradients of a
// vmapped loss), with itself (nested maps), with Checkpoint, with the
// forward-mode transforms and with sharding: mapped leaves may be placed
// tensors, or blocks inside shard.Map. Strict makes an op without a
// batching rule (one from another package) a panic instead of a counted
// loop over examples (Fallbacks reports the counts).
//
// # Forward mode
//
// JVP computes a Jacobian-vector product in one forward pass (jax.jvp);
// Linearize returns the linear map for several tangents. Jacfwd and
// Jacrev compute whole Jacobians of functions of trees, one block per pair
// of result and argument leaves, by forward mode (a JVP per input element,
// vmapped) and reverse mode (a VJP per output element, vmapped). Hessian
// is forward mode over reverse mode, and JVP of Grad is a Hessian-vector
// product. Every op has a JVP rule; forward mode composes with Vmap,
// Checkpoint and the custom rules.
//
// # Custom rules and testing
//
// CustomVJP defines a function of trees with a hand-written derivative
// (jax.custom_vjp), CustomJVP one with a hand-written forward-mode rule
// (jax.custom_jvp, transposed for reverse mode). CheckGrad
// compares reverse-mode derivatives with finite differences; the tests of
// every op and collective use it. It judges each finite difference against
// an estimate of its own error (truncation, and the float32 rounding noise
// of f measured by a fourth difference), so a check passes or fails the
// same way on every kernel set, whatever order the kernels sum in.
package autodiff
