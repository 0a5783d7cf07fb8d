package tensor

import "fmt"

// This file declares what an op is: the one registration every primitive
// makes (Op, its Traits and its SaveMask). apply.go is the engine's
// dispatch that reads it; "How to write an op" in doc.go is the recipe.

// Op is a primitive operation, declared once where it is defined, as JAX
// registers a primitive with its rules. An Op says, in three groups:
//
//   - what it computes: Impl (one output) or ImplN (several outputs), and
//     ImplVJP when differentiating needs more than the plain forward;
//   - how each transformation treats it, one rule per transformation:
//     reverse mode (VJP, or VJPNeed or VJPN, with Save or SaveFor
//     selecting what the rule reads), forward mode (JVP), batching for
//     Vmap (Batch) and sharding propagation (Sharding, which package
//     shard interprets). A transformation reads its rule where the engine
//     dispatches the op (apply.go, ad_backward.go, ad_jvp.go, ad_vmap.go,
//     the placer); an op without the rule gets the transformation's safe
//     default (no VJP: not differentiable; no JVP: the transpose of the
//     VJP; no batching rule: computed example by example under Vmap,
//     counted, and a panic under a strict Vmap; no sharding rule:
//     operands gathered);
//   - its Traits: the per-op decisions the engine would otherwise have to
//     guess — how it meets bfloat16 and float16 operands, which buffers
//     the backward pass may reuse around its VJP, how it meets placed
//     tensors and shard.Map blocks. The zero Traits is always correct.
//
// The engine reads these fields and nothing else: it never compares an op
// with a list of ops. Every op of this package is an Op; other packages
// declare their own the same way (package shard's collectives,
// autodiff.CustomVJP). An Op must not change once it has been applied.
type Op struct {
	// Name names the op in residual reports, remat policies, error
	// messages and communication accounting ("matmul", "all_gather", ...).
	Name string

	// Impl computes the single output from host inputs that carry no
	// autodiff node. It must return a new *Tensor (it may share storage
	// with an input). Exactly one of Impl and ImplN is set.
	Impl func(in []*Tensor, params any) *Tensor
	// ImplN computes several outputs and an optional state that its VJPN
	// receives (internal residuals).
	ImplN func(in []*Tensor, params any) (outs []*Tensor, state any)
	// ImplVJP, if set, replaces ImplN when the op is being differentiated:
	// it computes the outputs and the state VJPN will need, which ImplN
	// may skip (shard.Map keeps per-device graphs only then).
	ImplVJP func(in []*Tensor, params any) (outs []*Tensor, state any)

	// VJP maps the output cotangent g to one cotangent per input (nil for
	// an input that gets none). in holds the inputs: those selected by Save
	// with their data, the others as shape-only placeholders; out is the
	// output if Save has SaveOutput, else a placeholder. A nil VJP (and
	// VJPN and VJPNeed) makes the op non-differentiable: its outputs are
	// never traced. The VJP is built from ops, never from raw storage, so
	// it works on traced values (higher derivatives) and on placed
	// cotangents (sharded models).
	VJP func(g *Tensor, in []*Tensor, out *Tensor, params any) []*Tensor
	// VJPN is VJP for ImplN ops. gs has nil for outputs that received no
	// cotangent.
	VJPN func(gs []*Tensor, in []*Tensor, outs []*Tensor, params any, state any) []*Tensor
	// VJPNeed, if set, is used instead of VJP and is told which inputs
	// want a cotangent: bit i of need is set for input i (bit 63 stands
	// for every input from 63 on). It may return nil for the others and
	// skip their work — the input batch of a first layer, a target.
	VJPNeed func(g *Tensor, in []*Tensor, out *Tensor, params any, need uint64) []*Tensor

	// JVP is the forward-mode rule: given the primal inputs, their
	// tangents (nil for an input whose tangent is zero, and for integer
	// inputs) and the primal outputs, it returns one tangent per output
	// (nil for zero), each of its output's shape and dtype. Like the VJP
	// it is built from ops, so it works on traced, batched and placed
	// values. A differentiable op without a JVP gets the transpose of its
	// VJP (about twice the work): linear ops and the common ones declare
	// their own.
	JVP func(primals, tangents, outs []*Tensor, params any) []*Tensor
	// Batch is the batching rule (Vmap): it computes the op on a batch of
	// examples at once. in holds the operands, those with batched[i] set
	// with the batch dimension first (in[i].Shape()[1:] is one example's
	// shape), the others as they are (the same for every example); params
	// are the op's params for one example. It returns every output with
	// the batch dimension first, usually by calling the op's public
	// function once on operands whose batch dimension it moved or
	// broadcast (see "How to write an op"). A nil Batch makes Vmap compute
	// the op example by example (counted; a panic under a strict Vmap):
	// every op of this package has a rule.
	Batch func(in []*Tensor, batched []bool, params any) []*Tensor

	// Save selects the residuals the VJP needs.
	Save SaveMask
	// SaveFor, if set, overrides Save for ops whose needs depend on their
	// parameters.
	SaveFor func(params any) SaveMask

	// Sharding is the op's sharding-propagation rule: the family of rules
	// package shard applies when an operand is a placed tensor, and the
	// description of the op's parameters that rule reads (see
	// ShardingRule). The zero value gathers the operands.
	Sharding ShardingRule

	// Traits are the op's per-op decisions (see Traits).
	Traits Traits

	// bwd is the float32 kernel of a fused backward op (bwdOp), which
	// applyBwd calls without a dispatch on plain operands.
	bwd *bwdKernel
}

// Traits are the decisions about one op that the engine reads when it
// applies the op and runs its VJP. Each is declared with the op, in its
// registration, so that adding an op never means adding it to a list
// elsewhere.
//
// The zero Traits is always correct: half-precision operands are widened
// to float32 and the results rounded back, the backward pass reuses no
// buffer around the op's VJP, placed operands are computed blockwise by
// package shard, and Apply tracks shard.Map's varying axes. An op sets a
// trait only to claim a property the engine cannot check (its VJP returns
// storage of its own) or to take over a generic treatment (it moves 16-bit
// data itself, it takes placed tensors).
type Traits struct {
	// Half says how the op meets bfloat16 and float16 operands.
	Half HalfMode
	// Reuse says which buffers a backward pass may reuse around the op's
	// VJP.
	Reuse Reuse
	// Placement says how the op meets placed tensors (shard.Put) and
	// shard.Map blocks.
	Placement Placement
	// Through says which transformations (Vmap, forward mode) pass
	// through the op to the ops its implementation applies.
	Through Through
	// Types says which of the dtypes Float64, Int64 and Uint8 the op
	// computes on (see dtype_wide.go); Apply panics, naming the op, on an
	// operand of another of them. The zero value takes none.
	Types TypeSet
}

// HalfMode says how an op meets bfloat16 and float16 host operands.
type HalfMode uint8

const (
	// WidenHalf, the zero value: Apply widens the op's half operands to
	// float32, runs its float32 Impl (or ImplN), and rounds each float32
	// result once to the operands' dtype (float32 when float operands of
	// different dtypes meet). The backward pass does the same around the
	// VJP: cotangents and residuals are widened and each input's
	// cotangent is rounded to that input's dtype. An op written for
	// float32 thus works on half data unchanged, single- or multi-output.
	WidenHalf HalfMode = iota
	// NativeHalf: the op takes half operands as they are and its VJP
	// receives half cotangents. For ops that move 16-bit data bit for bit
	// (Reshape, Slice), have half kernels of their own (Convert, MatMul),
	// mark values (Named, Vary), pass their operands to code that handles
	// the dtype itself (autodiff.CustomVJP), or are collectives, which
	// move 16-bit data and accumulate sums in float32 themselves.
	// Distributed ops always take their operands as they are.
	NativeHalf
)

// Reuse says which buffers a backward pass may reuse around an op's VJP
// (see "Reusing cotangent buffers" in ad_backward.go). The zero value
// reuses nothing: declaring a flag is a promise about the VJP that the
// engine relies on and checks only in part.
type Reuse uint8

const (
	// FreshVJP: every tensor the VJP returns that is not one of its
	// cotangent arguments has storage nothing else references (a product,
	// a sum, a fused kernel's result, or a view of one of those), so the
	// backward pass may own it: accumulate into it in place and donate it
	// once dead. The pass still refuses a result whose storage it sees
	// elsewhere (another result, an operand, a residual). The VJP must
	// also have read its cotangent when it returns, as SyncVJP says, on a
	// shard.Map device too.
	FreshVJP Reuse = 1 << iota
	// TakesCotangent: the VJP reads its cotangent once, through an op whose
	// kernel may write its result over that cotangent (takeDonated: the
	// activations' backward kernels, BiasAct's). When the pass owns the
	// cotangent it donates it to the VJP, which then allocates nothing.
	TakesCotangent
)

// Placement says how an op meets placed tensors (shard.Put) and shard.Map
// blocks.
type Placement uint8

const (
	// Distributed ops take global placed tensors themselves (shard.Put,
	// Gather, shard.Map, a checkpoint, which replays ops that do): Apply
	// calls their Impl with the placed operands, and with any operand as
	// it is, whatever its dtype. Any other op with a placed operand is
	// handed to the placer that package shard installs (SetPlacer), which
	// computes it blockwise by its sharding rule.
	Distributed Placement = 1 << iota
	// SyncVJP ops' VJPs have read their cotangent when they return, also
	// on a shard.Map device: they compute on the device alone or through
	// synchronous collectives, which meet the other devices at a barrier
	// after reading every operand. A backward pass may then donate a
	// cotangent it made itself once such a VJP has consumed it (see
	// Donate); an op whose VJP starts an asynchronous transfer of its
	// cotangent must not declare it.
	SyncVJP
	// HandlesVary ops track shard.Map's varying axes themselves (a
	// checkpoint's recorded ops broadcast their invariant operands
	// inside): Apply inserts no implicit pvary for their operands.
	HandlesVary
)

// Has reports whether every flag of q is set in p.
func (p Placement) Has(q Placement) bool { return p&q == q }

// Has reports whether every flag of q is set in r.
func (r Reuse) Has(q Reuse) bool { return r&q == q }

// distributed reports whether op takes placed operands itself.
func (op *Op) distributed() bool { return op.Traits.Placement.Has(Distributed) }

// widensHalf reports whether Apply and the backward pass widen op's half
// operands (HalfMode).
func (op *Op) widensHalf() bool { return op.Traits.Half == WidenHalf && !op.distributed() }

func (op *Op) differentiable() bool { return op.VJP != nil || op.VJPN != nil || op.VJPNeed != nil }

func (op *Op) saveMask(params any) SaveMask {
	if op.SaveFor != nil {
		return op.SaveFor(params)
	}
	return op.Save
}

// SaveMask selects which inputs and outputs of a primitive its VJP needs.
// Only those are kept alive for the backward pass (and counted by
// Residuals); the others reach the VJP as shape-only placeholders.
type SaveMask uint64

const (
	// SaveOutput keeps the output(s) of the op for its VJP.
	SaveOutput SaveMask = 1 << 63
	// SaveAllInputs keeps every input, however many there are.
	SaveAllInputs SaveMask = 1 << 62

	maxMaskInput = 62
)

// SaveInputs returns a mask that keeps the given inputs (indices below 62;
// use SaveAllInputs for ops with more inputs).
func SaveInputs(idx ...int) SaveMask {
	var m SaveMask
	for _, i := range idx {
		if i < 0 || i >= maxMaskInput {
			panic(fmt.Sprintf("tensor.SaveInputs: input index %d out of range [0,%d)", i, maxMaskInput))
		}
		m |= 1 << uint(i)
	}
	return m
}

func (m SaveMask) input(i int) bool {
	return m&SaveAllInputs != 0 || (i < maxMaskInput && m&(1<<uint(i)) != 0)
}

// Wants reports whether a need mask passed to Op.VJPNeed asks for the
// cotangent of input i.
func Wants(need uint64, i int) bool { return need&(1<<uint(min(i, 63))) != 0 }

// needBit returns the bit of input i in a need mask.
func needBit(i int) uint64 { return 1 << uint(min(i, 63)) }
