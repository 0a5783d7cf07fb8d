package expert

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Config names the mesh axes of an expert-parallel MoE.
type Config struct {
	// Experts are the mesh axes the experts are split over (major to
	// minor), e.g. {"ep"}; E must be a multiple of their size.
	Experts shard.Axes
	// Tokens are all the mesh axes the tokens are split over (major to
	// minor), e.g. {"dp", "ep"}. They must include Experts: a device
	// dispatches its own tokens.
	Tokens shard.Axes
}

func (cfg Config) check(op string) {
	if len(cfg.Experts) == 0 {
		panic(fmt.Sprintf("%s: Config.Experts names no mesh axis", op))
	}
	for _, a := range cfg.Experts {
		if !slices.Contains(cfg.Tokens, a) {
			panic(fmt.Sprintf("%s: expert axis %q is not among the token axes %v", op, a, cfg.Tokens))
		}
	}
}

// Rules returns the logical-axis rules of expert parallelism: the experts
// of every MoE (nn.AxisExpert) split over the given mesh axes.
func Rules(axes ...string) shard.Rules {
	return shard.Rules{{nn.AxisExpert, shard.Axes(axes)}}
}

// Forward runs m inside shard.Map on this device's tokens x f32[..., D]
// (every leading dimension is a token dimension). m.Router is the whole
// router; m.Up and m.Down are this device's block of E/ep experts (the
// experts split over cfg.Experts, in order). See the package documentation
// for the dispatch and its semantics.
//
// The result's Output, ExpertIDs, Gates and Dropped are this device's;
// AuxLoss, RouterZLoss, Load and Processed are global (the same on every
// device); Capacity is the per-sender capacity. m.Senders is ignored: the
// senders are the devices.
func Forward(c *shard.Ctx, m nn.MoE, x *tensor.Tensor, cfg Config) nn.MoEOutput {
	const op = "expert.Forward"
	cfg.check(op)
	D, E := m.Router.Dim(0), m.Router.Dim(1)
	ep := c.AxisSize(cfg.Experts...)
	El := m.Up.Dim(0)
	if El*ep != E || m.Down.Dim(0) != El {
		panic(fmt.Sprintf("%s: router %v for %d experts but expert blocks %v and %v over %s=%d", op, m.Router, E, m.Up, m.Down, cfg.Experts, ep))
	}
	if x.Rank() == 0 || x.Dim(-1) != D || x.DType() != tensor.Float32 {
		panic(fmt.Sprintf("%s: x %v: want float32 [..., %d]", op, x, D))
	}
	m.Senders = 0
	k := m.TopK
	tokens := tensor.Reshape(x, -1, D)
	n := tokens.Dim(0)
	C := m.Capacity(n)

	// 1. Route and drop on the sender.
	r := m.Route(tokens)
	idsFlat := tensor.Reshape(r.IDs, n*k)
	gatesFlat := tensor.Reshape(r.Gates, n*k)
	ids := idsFlat.Ints()
	var drops []bool
	if gatesFlat.DType() == tensor.Float32 {
		drops = nn.DropOverCapacity(ids, gatesFlat.Float32s(), E, C)
	} else {
		dropped, _ := nn.DropTokenMask(idsFlat, tensor.StopGradient(gatesFlat), E, C)
		drops = dropped.Bools()
	}

	// 2. Sort the kept choices by expert (so by device), in choice order,
	// and learn the counts of the devices along the expert axes (the
	// global ones travel with the router's sums below).
	counts := make([]int, 2*E) // kept choices per expert, then all choices per expert
	for a, e := range ids {
		counts[E+e]++
		if !drops[a] {
			counts[e]++
		}
	}
	pl := newPlan(c, cfg, gatherCounts(c, counts[:E], cfg.Experts), E, El)
	src := make([]int, pl.sent)    // token of each sent row
	choice := make([]int, pl.sent) // choice of each sent row
	fill := slices.Clone(pl.fill)
	for a, e := range ids {
		if !drops[a] {
			src[fill[e]], choice[fill[e]] = a/k, a
			fill[e]++
		}
	}
	srcT := tensor.FromInts(src)
	// The rows arrive grouped by local expert, senders in order within a
	// group: each (receiver, local expert) pair is one group of the
	// ragged all-to-all. The receivers copy the sent rows (tokens[src],
	// in order) from tokens themselves.
	recv := c.RaggedAllToAllTake(tokens, srcT, pl.recv, tensor.FromInts(pl.fill), tensor.FromInts(pl.sendSizes),
		tensor.FromInts(pl.outOffsets), tensor.FromInts(pl.recvSizes), cfg.Experts)

	// 3. Run the local experts on the received rows, and 4. send the
	// results back where the rows came from (the transposed exchange).
	ys := m.Experts(recv, m.Up, m.Down, tensor.FromInts(pl.groupSizes))
	ret := c.RaggedAllToAllRows(ys, pl.sent, tensor.FromInts(pl.recvAt), tensor.FromInts(pl.recvSizes),
		tensor.FromInts(pl.senderFill), tensor.FromInts(pl.sendSizes), cfg.Experts)
	g := tensor.Take(gatesFlat, tensor.FromInts(choice), 0)
	out := tensor.SegmentWeightedSum(ret, g, srcT, n) // each row weighted by its gate

	// Global statistics and auxiliary losses: the router's sums and the
	// counts (exact in float32 below 2^24) meet in one psum over every
	// token axis, the only meeting of the layer that spans the devices
	// of other expert groups (in one process the expert groups meet on
	// their own in the all-gather and the exchanges: shard.Ctx).
	N := float32(n * pl.senders)
	// lse [n,1] summed over its rows is the [1] the concatenation takes:
	// no traced reshape (LogSumExp's, SumKeep's rank) on every device.
	lse := tensor.LogSumExpKeep(r.Logits, -1)
	sums := c.Psum(tensor.Concat(0, tensor.Sum(r.Probs, 0), tensor.Sum(tensor.Square(lse), 0),
		tensor.FromFloat32(toF32(counts))), cfg.Tokens...)
	for e, v := range sums.Float32s()[E+1:] {
		if e < E {
			pl.processed[e] = int(v)
		} else {
			pl.load[e-E] = int(v)
		}
	}
	// Every device computes the losses from the sums: few ops, each of
	// which every device pays for (a float32 product is rounded the same
	// on the host as by MulScalar, and scaling all the sums at once gives
	// each the bits of scaling it alone).
	f, perChoice := toF32(pl.load), 1/(N*float32(k))
	for e := range f {
		f[e] *= perChoice
	}
	scaled := tensor.MulScalar(sums, 1/N)
	p := tensor.SliceAxis(scaled, 0, 0, E)
	aux := tensor.MulScalar(tensor.Sum(tensor.Mul(tensor.FromFloat32(f), p)), float32(E))
	z := tensor.Take(scaled, tensor.ScalarInt(int32(E)), 0)

	return nn.MoEOutput{
		Output:      tensor.Reshape(out, x.Shape()...),
		AuxLoss:     aux,
		RouterZLoss: z,
		ExpertIDs:   r.IDs,
		Gates:       r.Gates,
		Dropped:     tensor.FromBool(drops, n, k),
		Load:        tensor.FromInts(pl.load),
		Processed:   tensor.FromInts(pl.processed),
		Capacity:    C,
	}
}

// gatherCounts returns every device's counts along axes, in their order:
// [devices][len(counts)], one backing array. They travel as float32
// (exact below 2^24): in one process a float32 all-gather meets once.
func gatherCounts(c *shard.Ctx, counts []int, axes shard.Axes) [][]int {
	all := c.AllGatherInvariant(tensor.FromFloat32(toF32(counts)), axes, 0, true).BorrowFloat32()
	flat := make([]int, len(all))
	for i, v := range all {
		flat[i] = int(v)
	}
	out := make([][]int, len(all)/len(counts))
	for t := range out {
		out[t] = flat[t*len(counts) : (t+1)*len(counts)]
	}
	return out
}

// plan is a device's part in the dispatch, from every device's counts:
// the offsets and sizes of both ragged all-to-alls (one group per
// (device, local expert) pair along the expert axes, i32[ep·El]) and the
// global statistics.
type plan struct {
	senders    int   // devices along the token axes
	sent, recv int   // rows this device sends, and receives
	fill       []int // [E]: where expert e's rows start among the sent ones
	sendSizes  []int // [ep·El]: rows sent to each (device, local expert)
	outOffsets []int // [ep·El]: where they land on that device
	recvSizes  []int // [ep·El]: rows received from each (sender, local expert)
	recvAt     []int // [ep·El]: where they sit among the received rows
	senderFill []int // [ep·El]: where the results go back on the sender
	groupSizes []int // [El]: rows of each local expert
	load       []int // [E]: choices routed to each expert (global; Forward sets it)
	processed  []int // [E]: choices each expert computes (global; Forward sets it)
}

// newPlan computes the plan of this device from cnt, the kept counts per
// expert of every device along the expert axes ([ep][E], in the order of
// cfg.Experts).
func newPlan(c *shard.Ctx, cfg Config, cnt [][]int, E, El int) *plan {
	ep, me := len(cnt), c.AxisIndex(cfg.Experts...)
	// One backing array for the plan's vectors.
	buf := make([]int, 5*ep*El+El+2*E)
	next := func(n int) []int {
		v := buf[:n:n]
		buf = buf[n:]
		return v
	}
	pl := &plan{
		fill: exclusiveCumsum(cnt[me]), sendSizes: next(ep * El), outOffsets: next(ep * El),
		recvSizes: next(ep * El), recvAt: next(ep * El), senderFill: next(ep * El),
		groupSizes: next(El), load: next(E), processed: next(E), senders: c.AxisSize(cfg.Tokens...),
	}
	// Receiver j groups its rows by local expert, senders in order within
	// a group.
	for j := range ep {
		at := 0
		for l := range El {
			e := j*El + l
			for s := range ep {
				if s == me {
					pl.sendSizes[e], pl.outOffsets[e] = cnt[me][e], at
				}
				if j == me {
					pl.recvSizes[s*El+l], pl.recvAt[s*El+l] = cnt[s][e], at
					pl.groupSizes[l] += cnt[s][e]
				}
				at += cnt[s][e]
			}
		}
		if j == me {
			pl.recv = at
		}
	}
	for s := range ep {
		at := 0 // where expert e's rows start among sender s's
		for e := range (me + 1) * El {
			if e >= me*El {
				pl.senderFill[s*El+e-me*El] = at
			}
			at += cnt[s][e]
		}
	}
	for _, n := range cnt[me] {
		pl.sent += n
	}
	return pl
}

func exclusiveCumsum(v []int) []int {
	out := make([]int, len(v))
	s := 0
	for i, x := range v {
		out[i] = s
		s += x
	}
	return out
}

func toF32(v []int) []float32 {
	out := make([]float32, len(v))
	for i, x := range v {
		out[i] = float32(x)
	}
	return out
}

// layerIn is the input tree of Apply's Map.
type layerIn struct {
	M nn.MoE
	X *tensor.Tensor
}

// Apply runs m on a mesh with expert parallelism: the rows of x (its
// first dimension) are split over cfg.Tokens and the experts over
// cfg.Experts, the router replicated; x and the weights may already be
// placed so, or be host tensors. Output, ExpertIDs, Gates and Dropped come
// back split over cfg.Tokens like x, the rest replicated. It equals
// m.Forward with Senders set to the number of devices along cfg.Tokens.
// Apply is differentiable.
func Apply(mesh *shard.Mesh, m nn.MoE, x *tensor.Tensor, cfg Config, opts ...shard.Option) nn.MoEOutput {
	cfg.check("expert.Apply")
	tok := shard.P([]string(cfg.Tokens))
	in := shard.Specs{"M.Up": shard.P([]string(cfg.Experts)), "M.Down": shard.P([]string(cfg.Experts)), "X": tok, "": shard.P()}
	out := shard.Specs{"Output": tok, "ExpertIDs": tok, "Gates": tok, "Dropped": tok, "": shard.P()}
	return shard.Map(mesh, in, out, func(c *shard.Ctx, in layerIn) nn.MoEOutput {
		return Forward(c, in.M, in.X, cfg)
	}, opts...)(layerIn{M: m, X: x})
}
