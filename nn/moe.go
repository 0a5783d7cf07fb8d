package nn

import (
	"fmt"
	"math"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// Gating says how a MoE turns router logits into the weights of the chosen
// experts. The zero value is GateTopKSoftmax.
type Gating int

const (
	// GateTopKSoftmax takes the k largest logits of a token and applies a
	// softmax over those k only (Mixtral; the JAX sharding guide's MoE), so
	// each token's gates sum to 1. With k = 1 every gate is exactly 1: the
	// router then learns only from the auxiliary loss.
	GateTopKSoftmax Gating = iota
	// GateSoftmaxTopK applies a softmax over all E logits and keeps the k
	// largest probabilities, unnormalized (Switch Transformer for k = 1,
	// GShard without renormalization), so the output is scaled by the
	// router's confidence and the router learns from the task loss for any k.
	GateSoftmaxTopK
)

// String returns the name of the gating.
func (g Gating) String() string {
	switch g {
	case GateTopKSoftmax:
		return "GateTopKSoftmax"
	case GateSoftmaxTopK:
		return "GateSoftmaxTopK"
	}
	return fmt.Sprintf("Gating(%d)", int(g))
}

// MoEAxes holds the logical axes of the parameters of a MoE. See
// DefaultMoEAxes.
type MoEAxes struct {
	Router   [2]string // [dim, experts]
	Up, Down [3]string // [experts, dim, hidden] and [experts, hidden, dim]
}

// DefaultMoEAxes returns the expert-parallel convention: the stacked expert
// weights have AxisExpert first, then (AxisEmbed, AxisMLP) and (AxisMLP,
// AxisEmbed) as in an MLP, so rules can split experts over an expert-parallel
// axis and each expert's MLP over a tensor-parallel one. The router's expert
// dimension is left unnamed (it is AxisEmbed, ""): every device needs all
// of a token's logits to route it, so the router is not split over experts.
func DefaultMoEAxes() MoEAxes {
	return MoEAxes{
		Router: [2]string{AxisEmbed, ""},
		Up:     [3]string{AxisExpert, AxisEmbed, AxisMLP},
		Down:   [3]string{AxisExpert, AxisMLP, AxisEmbed},
	}
}

// DefaultCapacityFactor is the capacity factor of a MoE built with a zero
// MoEOptions.CapacityFactor, the Switch Transformer's training value.
const DefaultCapacityFactor = 1.25

// MoEOptions configures NewMoE. The zero value routes each token to 2
// experts with GateTopKSoftmax, capacity factor 1.25 with token dropping,
// ReLU experts, and Linear-style initialization.
type MoEOptions struct {
	// TopK is the number of experts per token, k; 0 means 2.
	TopK int
	// CapacityFactor scales the capacity of each expert,
	// ceil(tokens·k/E·CapacityFactor) token choices per forward pass;
	// 0 means DefaultCapacityFactor.
	CapacityFactor float64
	// NoDrop gives every expert room for every token, so no token is ever
	// dropped (the capacity becomes the number of tokens).
	NoDrop bool
	// Senders selects the capacity rule. 0 or 1 is the global rule: all N
	// tokens of a forward pass compete for Capacity(N) places per expert.
	// S > 1 is the per-sender rule of expert parallelism: the tokens are
	// split into S consecutive groups, each with Capacity(N/S) places per
	// expert, as if each group were a device dropping its own tokens
	// before sending them (see MoE.Forward and package expert).
	Senders int
	// Gating chooses how router logits become gates.
	Gating Gating
	// Activation is the experts' nonlinearity; nil means Relu.
	Activation Activation
	// RouterInit draws the [dim, E] router; nil means
	// UniformRange(-1/√dim, 1/√dim), as a Linear layer.
	RouterInit Initializer
	// ExpertInit draws the stacked [E, dim, hidden] and [E, hidden, dim]
	// expert weights; nil means uniform in ±1/√fan_in for each expert, as a
	// Linear layer (VarianceScalingAxes(1/3, FanIn, DistUniform,
	// FanAxes{Batch: []int{0}})). Fan-based initializers should be given
	// FanAxes{Batch: []int{0}} so that E is not counted as a receptive field.
	ExpertInit Initializer
	// Axes are the logical axes of the parameters; the zero value sets none.
	// See DefaultMoEAxes.
	Axes MoEAxes
}

// MoE is a mixture-of-experts feed-forward layer on one device, with top-k
// routing and token dropping as in the JAX sharding guide (and the Switch
// Transformer), and the experts' MLPs stored as stacked weights:
//
//  1. A linear router scores every token against E experts: logits
//     f32[N,E] = tokens @ Router.
//  2. Each token picks its k best experts; Gating turns their logits into
//     gates.
//  3. Each expert takes at most Capacity of the N·k token choices routed to
//     it, preferring larger gates (ties by token order, then choice order:
//     see DropTokenMask). The other choices are dropped and contribute 0.
//  4. Expert e computes Activation(t @ Up[e]) @ Down[e] for its tokens t.
//  5. A token's output is the sum over its k choices of gate × expert
//     output (a segment sum over the token's choices).
//
// The experts run as one grouped matrix product over the tokens each
// received (tensor.RaggedDot, the guide's ragged dot), so no compute is
// spent on padding.
//
// Capacity is global by default: every expert takes at most Capacity(N) of
// the choices of all N tokens. Senders selects the per-sender rule that
// expert parallelism uses (package expert), so that a layer on one device
// computes exactly what the layer computes sharded.
type MoE struct {
	Router *tensor.Tensor // f32[D, E]
	Up     *tensor.Tensor // f32[E, D, H]
	Down   *tensor.Tensor // f32[E, H, D]

	TopK           int
	CapacityFactor float64
	NoDrop         bool
	Senders        int // capacity rule: see MoEOptions.Senders
	Gating         Gating
	Activation     Activation // nil means Identity

	// policy (static, set by WithPolicy): the zero value computes in the
	// parameters' dtype.
	policy Policy
}

// WithPolicy returns m with mixed-precision policy p: Forward computes in
// p.Compute and returns p.Output. With float32 host parameters and a half
// p.Compute the experts' grouped products run in p.Compute from the
// float32 weights and tokens, each rounded as the product reads it, with
// float32 results and gradients (tensor.RaggedDotAs, ActRaggedDotAs), and
// everything else in float32, routing included: the router's product
// decides which experts a token goes to, and the Switch Transformer keeps
// it in float32 (selective precision). Otherwise Forward casts the
// parameters and the input to p.Compute. The zero Policy switches the
// policy off.
func (m MoE) WithPolicy(p Policy) MoE {
	m.policy = checkPolicy("nn.MoE.WithPolicy", p)
	return m
}

// Policy returns the mixed-precision policy of m (the zero Policy if none).
func (m MoE) Policy() Policy { return m.policy }

func (m MoE) withPolicy(p Policy) any { return m.WithPolicy(p) }

// NewMoE returns a MoE layer over dim features with numExperts experts of
// hidden features each. key is split into keys for the router and the two
// expert weights.
func NewMoE(key tensor.Key, dim, hidden, numExperts int, opts MoEOptions) MoE {
	if dim <= 0 || hidden <= 0 || numExperts <= 0 {
		panic(fmt.Sprintf("nn.NewMoE: dim %d, hidden %d, experts %d: sizes must be positive", dim, hidden, numExperts))
	}
	m := MoE{TopK: opts.TopK, CapacityFactor: opts.CapacityFactor, NoDrop: opts.NoDrop, Senders: opts.Senders, Gating: opts.Gating, Activation: opts.Activation}
	if m.TopK == 0 {
		m.TopK = 2
	}
	if m.CapacityFactor == 0 {
		m.CapacityFactor = DefaultCapacityFactor
	}
	if m.Activation == nil {
		m.Activation = Relu
	}
	m.check("nn.NewMoE", numExperts)
	rinit, einit := opts.RouterInit, opts.ExpertInit
	if rinit == nil {
		lim := 1 / math.Sqrt(float64(dim))
		rinit = UniformRange(-lim, lim)
	}
	if einit == nil {
		einit = VarianceScalingAxes(1.0/3, FanIn, DistUniform, FanAxes{Batch: []int{0}})
	}
	keys := key.Split(3)
	m.Router = withAxes(checkInit("nn.NewMoE", "router", rinit(keys[0], dim, numExperts), dim, numExperts), opts.Axes.Router[:]...)
	m.Up = withAxes(checkInit("nn.NewMoE", "expert", einit(keys[1], numExperts, dim, hidden), numExperts, dim, hidden), opts.Axes.Up[:]...)
	m.Down = withAxes(checkInit("nn.NewMoE", "expert", einit(keys[2], numExperts, hidden, dim), numExperts, hidden, dim), opts.Axes.Down[:]...)
	return m
}

func (m MoE) check(fn string, experts int) {
	if m.TopK < 1 || m.TopK > experts {
		panic(fmt.Sprintf("%s: TopK %d must be in [1, %d experts]", fn, m.TopK, experts))
	}
	if !(m.CapacityFactor > 0) || math.IsInf(m.CapacityFactor, 0) {
		panic(fmt.Sprintf("%s: CapacityFactor %g must be positive and finite", fn, m.CapacityFactor))
	}
	if m.Senders < 0 {
		panic(fmt.Sprintf("%s: negative Senders %d", fn, m.Senders))
	}
	if m.Gating != GateTopKSoftmax && m.Gating != GateSoftmaxTopK {
		panic(fmt.Sprintf("%s: invalid %v", fn, m.Gating))
	}
}

// NumExperts returns E.
func (m MoE) NumExperts() int { return m.Router.Dim(1) }

// Capacity returns how many token choices each expert accepts in a forward
// pass over the given number of tokens: ExpertCapacity(tokens, TopK, E,
// CapacityFactor), or tokens with NoDrop.
func (m MoE) Capacity(tokens int) int {
	if m.NoDrop {
		return tokens
	}
	return ExpertCapacity(tokens, m.TopK, m.NumExperts(), m.CapacityFactor)
}

// ExpertCapacity returns ceil(tokens·k/experts·factor), the number of token
// choices an expert accepts, as the JAX guide and the Switch Transformer
// compute it. Like the guide's jnp.ceil of a Python float, the product is
// formed in float64 and rounded to float32 before the ceiling, so that
// 5·1.2 = 6.000000000000001 gives 6, not 7.
func ExpertCapacity(tokens, k, experts int, factor float64) int {
	if tokens < 0 || k < 0 || experts <= 0 || !(factor >= 0) || math.IsInf(factor, 0) {
		panic(fmt.Sprintf("nn.ExpertCapacity: tokens %d, k %d, experts %d, factor %g: invalid", tokens, k, experts, factor))
	}
	c := float32(float64(tokens*k) / float64(experts) * factor)
	return int(math.Ceil(float64(c)))
}

// MoEOutput is the result of MoE.Forward: the output, the auxiliary losses
// to add to the training loss, and the routing decisions for monitoring. N
// is the number of tokens (the product of x's leading dimensions) and k the
// layer's TopK.
type MoEOutput struct {
	// Output has x's shape.
	Output *tensor.Tensor
	// AuxLoss is the Switch Transformer load-balancing loss, f32[]:
	//
	//	E · Σ_e f_e · P_e
	//
	// where f_e is the fraction of the N·k token choices routed to expert
	// e (before dropping; all k choices count, so Σ f_e = 1) and P_e the
	// mean over tokens of the router's softmax probability of e over all E
	// experts. It is 1 when routing is perfectly balanced and E when every
	// choice goes to one expert with certainty; for k = 1 it is exactly the
	// Switch loss. (Implementations that sum f over the k choices without
	// dividing by k, such as Hugging Face's Mixtral, report k times this.)
	// Only P_e carries a gradient. Multiply it by a small coefficient (the
	// Switch Transformer uses 0.01) and add it to the loss.
	AuxLoss *tensor.Tensor
	// RouterZLoss is the ST-MoE router z-loss, mean over tokens of
	// logsumexp(logits)², f32[]; it keeps router logits small (ST-MoE
	// weights it by 0.001).
	RouterZLoss *tensor.Tensor
	// ExpertIDs are the chosen experts, i32[N, k], best first.
	ExpertIDs *tensor.Tensor
	// Gates are the weights of the chosen experts, f32[N, k] (traced when
	// the router is differentiated).
	Gates *tensor.Tensor
	// Dropped marks the token choices that exceeded their expert's
	// capacity, bool[N, k]; they contribute 0 to the output.
	Dropped *tensor.Tensor
	// Load counts the token choices routed to each expert before dropping,
	// i32[E]; Processed counts those each expert computed, i32[E], at most
	// Capacity per sender.
	Load, Processed *tensor.Tensor
	// Capacity is the number of token choices each expert accepted from
	// each sender (from all tokens under the global rule).
	Capacity int
}

// MoERouting is the router's decision for N tokens: see MoE.Route.
type MoERouting struct {
	// Logits are the router scores, f32[N, E]; Probs their softmax over
	// all E experts.
	Logits, Probs *tensor.Tensor
	// Gates are the weights of the chosen experts, f32[N, k], and IDs the
	// chosen experts, i32[N, k], best first.
	Gates, IDs *tensor.Tensor
}

// Route scores tokens f32[N, D] against the experts and picks each token's
// k best, with gates as Gating says (steps 1 and 2 of the layer). Expert
// parallelism routes on the sender with it.
func (m MoE) Route(tokens *tensor.Tensor) MoERouting {
	logits := tensor.MatMul(tokens, m.Router) // [N, E]
	probs := tensor.Softmax(logits, -1)
	var gates, ids *tensor.Tensor // [N, k]
	if m.Gating == GateSoftmaxTopK {
		gates, ids = tensor.TopK(probs, m.TopK)
	} else {
		var top *tensor.Tensor
		top, ids = tensor.TopK(logits, m.TopK)
		gates = tensor.Softmax(top, -1)
	}
	return MoERouting{Logits: logits, Probs: probs, Gates: gates, IDs: ids}
}

// Experts computes the experts' MLPs on tokens grouped by expert (step 4):
// the rows of x f32[M, D] are split into consecutive groups of groupSizes
// i32[G] rows, and group g computes Activation(x_g @ up[g]) @ down[g], with
// up f32[G, D, H] and down f32[G, H, D] (all E experts, or a device's
// block of them). Each group is one grouped matrix product
// (tensor.RaggedDot); rows past the groups give 0.
//
// Under a policy that runs m as automatic mixed precision (see
// WithPolicy), float32 x, up and down host tensors are multiplied in the
// policy's compute dtype with float32 results.
func (m MoE) Experts(x, up, down, groupSizes *tensor.Tensor) *tensor.Tensor {
	compute := ampCompute(m.policy, x, up, down)
	dot := func(x, w *tensor.Tensor) *tensor.Tensor {
		if compute != 0 {
			return tensor.RaggedDotAs(x, w, groupSizes, compute)
		}
		return tensor.RaggedDot(x, w, groupSizes)
	}
	h := dot(x, up)
	if a, ok := m.Activation.Fused(); ok {
		// The second product applies the activation and keeps h, not
		// Activation(h), for the backward pass (tensor.ActRaggedDot).
		if compute != 0 {
			return tensor.ActRaggedDotAs(a, h, down, groupSizes, compute)
		}
		return tensor.ActRaggedDot(a, h, down, groupSizes)
	}
	if m.Activation != nil {
		h = m.Activation(h)
	}
	return dot(h, down)
}

// Forward routes the tokens of x f32[..., D] (every leading dimension is a
// token dimension) through the experts and returns the output and routing
// statistics. Routing is discrete: the gradient flows through the gates and
// the experts, not through which experts were chosen or which choices were
// dropped.
//
// With Senders = S > 1 the N tokens (in row-major order of x's leading
// dimensions) are split into S consecutive groups of N/S, and each group's
// choices compete only among themselves for Capacity(N/S) places per
// expert: the per-sender capacity rule of expert parallelism, where each
// device drops its own tokens before sending them (package expert). It
// panics if S does not divide N.
func (m MoE) Forward(x *tensor.Tensor) MoEOutput {
	requireInput("nn.MoE", "x", x)
	requireBuilt("nn.MoE", "Router", m.Router, "nn.NewMoE")
	p := m.policy
	if p == (Policy{}) {
		return m.forward(x)
	}
	if ampCompute(p, m.Router, m.Up, m.Down) != 0 {
		return CastToOutput(p, m.forward(ampInput(x, tensor.Float32)))
	}
	m.policy = Policy{}
	return CastToOutput(p, CastToCompute(p, m).forward(CastToCompute(p, x)))
}

// forward is Forward, the experts under m's policy (see Experts).
func (m MoE) forward(x *tensor.Tensor) MoEOutput {
	D, E := m.Router.Dim(0), m.Router.Dim(1)
	m.check("nn.MoE", E)
	if x.Rank() == 0 || x.Dim(-1) != D || !x.DType().IsFloat() {
		panic(fmt.Sprintf("nn.MoE: x %v: want a float tensor [..., %d]", x, D))
	}
	requireParamDType("nn.MoE", x, m.Router)
	k := m.TopK
	tokens := tensor.Reshape(x, -1, D)
	N := tokens.Dim(0)
	S := max(m.Senders, 1)
	if N%S != 0 {
		panic(fmt.Sprintf("nn.MoE: x %v: %d tokens do not split into %d senders", x, N, S))
	}
	C := m.Capacity(N / S)

	// 1-2. Route.
	r := m.Route(tokens)
	idsFlat := tensor.Reshape(r.IDs, N*k)
	gatesFlat := tensor.Reshape(r.Gates, N*k)

	// 3. Drop the choices beyond each expert's capacity: per sender, by
	// ranking (sender, expert) pairs as if they were S·E experts; then
	// the dispatch's indices. This host work runs beside the auxiliary
	// losses (tensor.Beside), which do not need it: at two threads the
	// second core computes it while the first runs the losses' small ops.
	ids := idsFlat.Int32s()
	var rt hostRouting
	var wait func()
	if gatesFlat.DType() == tensor.Float32 {
		gates := gatesFlat.Float32s()
		wait = tensor.Beside(tokens, func() { rt.route(ids, gates, N, S, E, C) })
	} else {
		keys := senderKeys(ids, N, S, E)
		groups := groupChoices(keys, S*E)
		dropped, _ := DropTokenMask(tensor.FromInt32(keys), tensor.StopGradient(gatesFlat), S*E, C)
		rt.index(groups, dropped.Bools(), N, S, E)
		wait = func() {}
	}

	// Auxiliary losses.
	load := tensor.Bincount(idsFlat, nil, E)
	f := tensor.Div(tensor.AsType(load, r.Probs.DType()), tensor.Scalar(float32(N*k)))
	p := tensor.Mean(r.Probs, 0)
	aux := tensor.MulScalar(tensor.Sum(tensor.Mul(f, p)), float32(E))
	z := tensor.Mean(tensor.Square(tensor.LogSumExp(r.Logits, -1)))

	wait()
	out := m.dispatch(tokens, rt, gatesFlat, m.Up, m.Down)

	return MoEOutput{
		Output:      tensor.Reshape(out, x.Shape()...),
		AuxLoss:     aux,
		RouterZLoss: z,
		ExpertIDs:   r.IDs,
		Gates:       r.Gates,
		Dropped:     tensor.FromBool(rt.drop, N, k),
		Load:        load,
		Processed:   tensor.FromInts(rt.counts),
		Capacity:    C,
	}
}

// hostRouting is the host side of a routing: which choices are dropped
// and, for the kept ones grouped by expert, the dispatch's indices.
type hostRouting struct {
	drop   []bool  // the N·k choices (token-major) beyond capacity
	src    []int32 // token of each grouped row
	choice []int32 // choice of each grouped row
	counts []int   // rows of each expert
}

// senderKeys returns the key of each choice for the per-sender capacity
// rule: its expert, or with S > 1 senders of N/S tokens each, its
// (sender, expert) pair as one of S·E keys.
func senderKeys(ids []int32, N, S, E int) []int32 {
	if S == 1 {
		return ids
	}
	k := len(ids) / N
	keys := make([]int32, len(ids))
	for a, e := range ids {
		keys[a] = int32(a/(N/S*k)*E) + e
	}
	return keys
}

// route fills rt from the experts ids chosen (token-major, k a token of
// N) and their gates, the priorities of the capacity drop (C places per
// expert and sender): host work only, see tensor.Beside.
func (rt *hostRouting) route(ids []int32, gates []float32, N, S, E, C int) {
	// The choices grouped by (sender, expert) once: the drop ranks each
	// overflowing group's choices and the dispatch walks the groups.
	groups := groupChoices(senderKeys(ids, N, S, E), S*E)
	rt.index(groups, groups.dropOverCapacity(gates, C), N, S, E)
}

// index groups the kept choices by expert (in choice order within an
// expert) for the dispatch, the choices grouped by sender and expert
// (groups, of S·E keys) and drop marking those beyond capacity.
func (rt *hostRouting) index(groups choiceGroups, drop []bool, N, S, E int) {
	k := len(drop) / N
	rt.drop = drop
	// The index tensors wrap the slices built here (int32 from the start:
	// the routing's host work runs between the step's parallel regions).
	rt.src = make([]int32, 0, len(drop))
	rt.choice = make([]int32, 0, len(drop))
	rt.counts = make([]int, E)
	for e := range E {
		// An expert's choices from each sender in turn: in choice order,
		// the senders' tokens being consecutive.
		before := len(rt.src)
		for s := range S {
			for _, a := range groups.of(s*E + e) {
				if !drop[a] {
					rt.src, rt.choice = append(rt.src, a/int32(k)), append(rt.choice, a)
				}
			}
		}
		rt.counts[e] = len(rt.src) - before
	}
}

// dispatch runs the experts on the kept choices grouped by expert (rt)
// and sums each token's gated outputs: steps 4 and 5 on tokens f32[N, D]
// with the gates of the N·k choices. It returns the output f32[N, D].
func (m MoE) dispatch(tokens *tensor.Tensor, rt hostRouting, gates, up, down *tensor.Tensor) *tensor.Tensor {
	N, D := tokens.Dim(0), tokens.Dim(1)
	if len(rt.src) == 0 {
		return tensor.Zeros(tensor.Float32, N, D)
	}
	srcT := tensor.WrapInt32(rt.src)
	ys := m.Experts(tensor.Take(tokens, srcT, 0), up, down, tensor.FromInts(rt.counts)) // [M, D]
	g := tensor.Take(gates, tensor.WrapInt32(rt.choice), 0)
	// Each row weighted by its gate and summed into its token in one pass
	// (the bits of SegmentSum(ys·g)), without the weighted rows.
	return tensor.SegmentWeightedSum(ys, g, srcT, N)
}

// choiceGroups holds the positions of a routing's choices grouped by key
// (expert, or sender and expert), each group in ascending position: a
// counting sort, so that the drop and the dispatch read each group's
// choices instead of scanning all of them once per expert.
type choiceGroups struct {
	pos    []int32 // the positions, group after group
	starts []int   // group e is pos[starts[e]:starts[e+1]]
}

// groupChoices groups the positions of keys, each in [0, numKeys).
func groupChoices[I int | int32](keys []I, numKeys int) choiceGroups {
	starts := make([]int, numKeys+2)
	for _, e := range keys {
		starts[e+2]++
	}
	for e := 2; e < len(starts); e++ {
		starts[e] += starts[e-1]
	}
	// starts[e+1] is now group e's start: it advances to its end as the
	// group fills.
	pos := make([]int32, len(keys))
	for a, e := range keys {
		pos[starts[e+1]] = int32(a)
		starts[e+1]++
	}
	return choiceGroups{pos: pos, starts: starts[:numKeys+1]}
}

// of returns group e's positions.
func (g choiceGroups) of(e int) []int32 { return g.pos[g.starts[e]:g.starts[e+1]] }

// dropOverCapacity is DropOverCapacity's mask of the grouped choices with
// their priorities: in each group of more than capacity choices, those
// from the capacity-th by rank on are dropped.
func (g choiceGroups) dropOverCapacity(priorities []float32, capacity int) []bool {
	dropped := make([]bool, len(g.pos))
	var choices []uint64 // rank key << 32 | position
	for e := range len(g.starts) - 1 {
		run := g.of(e)
		if len(run) <= capacity {
			continue
		}
		if cap(choices) < len(run) {
			choices = make([]uint64, 0, len(run))
		}
		choices = choices[:0]
		for _, a := range run {
			choices = append(choices, uint64(priorityKey(priorities[a]))<<32|uint64(a))
		}
		// The keys are distinct (positions): those from the capacity-th
		// smallest on are dropped.
		last := nthSmallest(choices, capacity)
		for _, ka := range choices {
			if ka >= last {
				dropped[uint32(ka)] = true
			}
		}
	}
	return dropped
}

// DropOverCapacity is DropTokenMask's mask computed on the host, for the
// expert of each choice in [0, numExperts) and float32 priorities: the
// same choices are dropped (ties by position, -0 equal to +0, NaN last).
// Only the choices of an expert chosen more than capacity times are
// ranked, by a selection rather than a sort: DropTokenMask's ops (a sort
// of all the choices, two gathers, a count, a cumulative sum and a
// scatter: ~11 ops a MoE layer) ran mostly on one core between the
// training step's parallel regions. MoE.Forward drops its choices by the
// same selection, over the choices it groups once for the dispatch too.
// It panics on an expert outside [0, numExperts), a negative
// capacity, or slices of different lengths.
func DropOverCapacity(expertIDs []int, priorities []float32, numExperts, capacity int) []bool {
	if len(expertIDs) != len(priorities) || capacity < 0 {
		panic(fmt.Sprintf("nn.DropOverCapacity: %d expert ids, %d priorities, capacity %d", len(expertIDs), len(priorities), capacity))
	}
	for i, e := range expertIDs {
		if e < 0 || e >= numExperts {
			panic(fmt.Sprintf("nn.DropOverCapacity: expert id %d at index %d is outside [0, %d)", e, i, numExperts))
		}
	}
	return groupChoices(expertIDs, numExperts).dropOverCapacity(priorities, capacity)
}

// nthSmallest returns the k-th smallest element of x (0-based; x[k] once
// sorted), reordering x (Hoare's selection: linear on average, where a
// sort of the ~600-1000 choices of an expert took ~60 µs a layer).
func nthSmallest(x []uint64, k int) uint64 {
	lo, hi := 0, len(x)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		// The median of x[lo], x[mid], x[hi] as the pivot, in x[mid].
		if x[mid] < x[lo] {
			x[mid], x[lo] = x[lo], x[mid]
		}
		if x[hi] < x[lo] {
			x[hi], x[lo] = x[lo], x[hi]
		}
		if x[hi] < x[mid] {
			x[hi], x[mid] = x[mid], x[hi]
		}
		pivot := x[mid]
		i, j := lo, hi
		for i <= j {
			for x[i] < pivot {
				i++
			}
			for x[j] > pivot {
				j--
			}
			if i <= j {
				x[i], x[j] = x[j], x[i]
				i++
				j--
			}
		}
		switch {
		case k <= j:
			hi = j
		case k >= i:
			lo = i
		default:
			return x[k] // between j and i: equal to the pivot
		}
	}
	return x[k]
}

// priorityKey maps a priority to a uint32 whose unsigned order ranks
// priorities descending, -0 equal to +0 and NaNs last (LexSort's order of
// their negations).
func priorityKey(p float32) uint32 {
	if p != p {
		return math.MaxUint32
	}
	b := math.Float32bits(p)
	if b&^(1<<31) == 0 {
		b = 0 // -0 ranks as +0
	}
	// b's ascending key (sign flipped for positive numbers, all bits for
	// negative ones), inverted; +Inf's is 0x007fffff, -Inf's 0xff800000.
	return ^(b ^ (uint32(int32(b)>>31) | 1<<31))
}

// DropTokenMask decides which token choices exceed their expert's capacity,
// with the semantics of calculate_drop_token_mask in the JAX sharding guide.
// expertIDs i32[n] holds the expert of each choice and probs f32[n] its
// priority (a router probability). Within each expert, choices are ranked by
// descending priority, ties broken by position (a stable sort, jnp.lexsort
// of (-probs, expertIDs)); the choice of rank r is dropped when r >= capacity.
//
// It returns the mask dropped bool[n] and each choice's rank within its
// expert, i32[n]. Neither is differentiable. It panics on an expert id
// outside [0, numExperts) or a negative capacity.
func DropTokenMask(expertIDs, probs *tensor.Tensor, numExperts, capacity int) (dropped, rank *tensor.Tensor) {
	if expertIDs.DType() != tensor.Int32 || expertIDs.Rank() != 1 || !probs.DType().IsFloat() ||
		!slices.Equal(probs.Shape(), expertIDs.Shape()) {
		panic(fmt.Sprintf("nn.DropTokenMask: expertIDs %v, probs %v: want i32[n] and f32[n]", expertIDs, probs))
	}
	if capacity < 0 {
		panic(fmt.Sprintf("nn.DropTokenMask: negative capacity %d", capacity))
	}
	for i, e := range expertIDs.RawInt32() {
		if e < 0 || int(e) >= numExperts {
			panic(fmt.Sprintf("nn.DropTokenMask: expert id %d at index %d is outside [0, %d)", e, i, numExperts))
		}
	}
	n := expertIDs.Dim(0)
	order := tensor.LexSort(tensor.Neg(tensor.StopGradient(probs)), expertIDs) // by expert, then priority
	sortedIDs := tensor.Take(expertIDs, order, 0)
	starts := tensor.CumsumExclusive(tensor.Bincount(expertIDs, nil, numExperts), 0)
	sortedRank := tensor.Sub(tensor.Arange(n), tensor.Take(starts, sortedIDs, 0))
	rank = tensor.ScatterAdd(tensor.Zeros(tensor.Int32, n), order, sortedRank, 0) // undo the sort
	dropped = tensor.GreaterEqual(rank, tensor.ScalarInt(int32(capacity)))
	return dropped, rank
}
