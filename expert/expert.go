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
	dropped, _ := nn.DropTokenMask(idsFlat, tensor.StopGradient(gatesFlat), E, C)
	ids, drops := idsFlat.Ints(), dropped.Bools()

	// 2. Sort the kept choices by expert (so by device), in choice order.
	counts := make([]int, E)
	for a, e := range ids {
		if !drops[a] {
			counts[e]++
		}
	}
	fill := make([]int, E)
	Ms := 0
	for e, cnt := range counts {
		fill[e] = Ms
		Ms += cnt
	}
	src := make([]int, Ms)    // token of each sent row
	choice := make([]int, Ms) // choice of each sent row
	for a, e := range ids {
		if !drops[a] {
			src[fill[e]], choice[fill[e]] = a/k, a
			fill[e]++
		}
	}
	sendSizes := make([]int, ep)
	for e, cnt := range counts {
		sendSizes[e/El] += cnt
	}
	inputOffsets := exclusiveCumsum(sendSizes)

	// Row counts per (receiver, local expert) go ahead of the rows.
	recvCnt := c.AllToAll(tensor.FromInts(counts, ep, El), cfg.Experts, 0, 0, true).Ints() // [sender, local expert]
	recvSizes := make([]int, ep)
	groupSizes := make([]int, El)
	for j := range ep {
		for l := range El {
			recvSizes[j] += recvCnt[j*El+l]
			groupSizes[l] += recvCnt[j*El+l]
		}
	}
	recvOffsets := exclusiveCumsum(recvSizes)
	R := 0
	for _, s := range recvSizes {
		R += s
	}
	// Where my rows land on each receiver, and where each receiver's
	// results land back here.
	fwdRemote := c.AllToAll(tensor.FromInts(recvOffsets), cfg.Experts, 0, 0, true)
	bwdRemote := c.AllToAll(tensor.FromInts(inputOffsets), cfg.Experts, 0, 0, true)

	srcT := tensor.FromInts(src)
	send := tensor.Take(tokens, srcT, 0) // [Ms, D]
	recv := c.RaggedAllToAll(send, tensor.Zeros(tensor.Float32, R, D),
		tensor.FromInts(inputOffsets), tensor.FromInts(sendSizes), fwdRemote, tensor.FromInts(recvSizes), cfg.Experts)

	// 3. Regroup by local expert (received rows are sender-major) and run
	// the local experts.
	perm := make([]int, 0, R) // grouped row -> received row
	for l := range El {
		for j := range ep {
			at := recvOffsets[j]
			for q := range l {
				at += recvCnt[j*El+q]
			}
			for i := range recvCnt[j*El+l] {
				perm = append(perm, at+i)
			}
		}
	}
	inv := make([]int, R)
	for i, p := range perm {
		inv[p] = i
	}
	ys := m.Experts(tensor.Take(recv, tensor.FromInts(perm), 0), m.Up, m.Down, tensor.FromInts(groupSizes))
	back := tensor.Take(ys, tensor.FromInts(inv), 0) // received order

	// 4. Return the results and combine with the gates.
	ret := c.RaggedAllToAll(back, tensor.Zeros(tensor.Float32, Ms, D),
		tensor.FromInts(recvOffsets), tensor.FromInts(recvSizes), bwdRemote, tensor.FromInts(sendSizes), cfg.Experts)
	g := tensor.Take(gatesFlat, tensor.FromInts(choice), 0)
	out := tensor.SegmentSum(tensor.Mul(ret, tensor.Reshape(g, Ms, 1)), srcT, n)

	// Global statistics and auxiliary losses.
	N := float32(n * c.AxisSize(cfg.Tokens...))
	load := c.Psum(tensor.AsType(tensor.Bincount(idsFlat, nil, E), tensor.Float32), cfg.Tokens...)
	processed := c.Psum(tensor.FromFloat32(toF32(counts)), cfg.Tokens...)
	f := tensor.MulScalar(load, 1/(N*float32(k)))
	p := tensor.MulScalar(c.Psum(tensor.Sum(r.Probs, 0), cfg.Tokens...), 1/N)
	aux := tensor.MulScalar(tensor.Sum(tensor.Mul(f, p)), float32(E))
	lse := tensor.LogSumExp(r.Logits, -1)
	z := tensor.MulScalar(c.Psum(tensor.Sum(tensor.Square(lse)), cfg.Tokens...), 1/N)

	return nn.MoEOutput{
		Output:      tensor.Reshape(out, x.Shape()...),
		AuxLoss:     aux,
		RouterZLoss: z,
		ExpertIDs:   r.IDs,
		Gates:       r.Gates,
		Dropped:     tensor.Reshape(dropped, n, k),
		Load:        tensor.AsType(load, tensor.Int32),
		Processed:   tensor.AsType(processed, tensor.Int32),
		Capacity:    C,
	}
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
