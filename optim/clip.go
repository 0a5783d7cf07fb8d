package optim

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// PsumFunc sums x over the named mesh axes across the devices of a
// shard.Map. shard.Ctx.Psum has this signature, so inside shard.Map pass the
// method value c.Psum.
type PsumFunc func(x *tensor.Tensor, axes ...string) *tensor.Tensor

// GlobalNorm returns the L2 norm of all the tensor leaves of tree taken
// together, sqrt(Σ x²), as a float32 scalar (optax.global_norm).
//
// Outside shard.Map pass a nil psum. Inside shard.Map each device holds
// only blocks of sharded leaves, so a local sum of squares is not the
// global one: pass c.Psum, and GlobalNorm sums the squares of the leaves
// that vary over the same mesh axes (tensor.Local().AxisNames()), psums each
// group over exactly those axes, then adds the groups. Leaves that are
// invariant (replicated) are counted once, sharded ones across all their
// blocks. Every device issues the same psums in the same order.
func GlobalNorm(tree any, psum PsumFunc) *tensor.Tensor {
	total := treeSum(tree, psum, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Sum(tensor.Square(x)) })
	if total == nil {
		return tensor.Scalar(0)
	}
	return tensor.Sqrt(total)
}

// treeSum returns the sum of f over the float32 leaves of tree (f returns
// a scalar per leaf), or nil if there are none. With psum, inside
// shard.Map, the leaves that vary over the same mesh axes are summed
// together and psummed over exactly those axes, so sharded leaves count
// across devices and replicated ones once; every device issues the same
// psums in the same order.
func treeSum(tree any, psum PsumFunc, f func(*tensor.Tensor) *tensor.Tensor) *tensor.Tensor {
	leaves := pytree.Leaves(tree)
	type group struct {
		axes []string
		sum  *tensor.Tensor
	}
	var groups []*group
	find := func(axes []string) *group {
		for _, g := range groups {
			if slices.Equal(g.axes, axes) {
				return g
			}
		}
		g := &group{axes: axes}
		groups = append(groups, g)
		return g
	}
	for _, x := range leaves {
		if x.DType() != tensor.Float32 && x.DType() != tensor.Float64 {
			continue
		}
		var axes []string
		if psum != nil {
			axes = x.Local().AxisNames()
		}
		g := find(axes)
		s := f(x)
		if g.sum == nil {
			g.sum = s
		} else {
			if s.DType() != g.sum.DType() {
				s = tensor.Convert(s, g.sum.DType()) // float64 leaves among float32 ones
			}
			g.sum = tensor.Add(g.sum, s)
		}
	}
	// A fixed order (by axis names) so that every device psums alike.
	slices.SortFunc(groups, func(a, b *group) int {
		return strings.Compare(strings.Join(a.axes, ","), strings.Join(b.axes, ","))
	})
	var total *tensor.Tensor
	for _, g := range groups {
		s := g.sum
		if len(g.axes) > 0 {
			s = psum(s, g.axes...)
		}
		if total == nil {
			total = s
		} else {
			total = tensor.Add(total, s)
		}
	}
	return total
}

// ClipOptions are the options of ClipByGlobalNorm.
type ClipOptions struct {
	// Psum, inside shard.Map, is c.Psum: the norm is then the global norm
	// of the sharded updates (see GlobalNorm). Leave it nil outside
	// shard.Map.
	Psum PsumFunc
}

// ClipByGlobalNorm returns a transform that scales the updates so that
// their global L2 norm (GlobalNorm) is at most maxNorm
// (optax.clip_by_global_norm): updates whose norm n is below maxNorm pass
// unchanged, others become u·maxNorm/n. A NaN norm gives NaN updates, as in
// optax. Its state is EmptyState. It panics unless maxNorm > 0.
//
// torch.nn.utils.clip_grad_norm_ scales by maxNorm/(n + 1e-6) instead: the
// two differ by a relative 1e-6/n, and PyTorch's also scales (by a hair)
// gradients whose norm is just below maxNorm.
func ClipByGlobalNorm(maxNorm float64, opts ...ClipOptions) Transform {
	const op = "optim.ClipByGlobalNorm"
	if !(maxNorm > 0) {
		panic(fmt.Sprintf("%s: maxNorm %v, want > 0", op, maxNorm))
	}
	return &clipGlobal{max: maxNorm, o: oneOpt(op, opts)}
}

type clipGlobal struct {
	max float64
	o   ClipOptions
}

func (c *clipGlobal) Init(any) State { return EmptyState{} }

func (c *clipGlobal) Update(grads any, state State, _ any) (any, State) {
	rejectHalf("optim.ClipByGlobalNorm", "gradient", grads)
	norm := GlobalNorm(grads, c.o.Psum)
	if norm.Item() < c.max {
		return grads, state
	}
	f := tensor.Div(tensor.Scalar(float32(c.max)), norm)
	return mapLeaves(grads, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Mul(x, f) }), state
}

// Clip returns a transform that clips every update element to
// [-maxDelta, maxDelta] (optax.clip). Its state is EmptyState. It panics
// unless maxDelta >= 0.
func Clip(maxDelta float64) Transform {
	checkNonNeg("optim.Clip", "maxDelta", maxDelta)
	m := float32(maxDelta)
	return Stateless(func(u, _ any) any {
		rejectHalf("optim.Clip", "update", u)
		return mapLeaves(u, func(x *tensor.Tensor) *tensor.Tensor { return tensor.Clamp(x, -m, m) })
	})
}

// ClipByBlockRMS returns a transform that scales each update leaf so that
// its root mean square is at most threshold (optax.clip_by_block_rms):
// u / max(1, rms(u)/threshold). Adafactor uses it. Its state is EmptyState.
// It panics unless threshold > 0.
func ClipByBlockRMS(threshold float64) Transform {
	if !(threshold > 0) {
		panic(fmt.Sprintf("optim.ClipByBlockRMS: threshold %v, want > 0", threshold))
	}
	return Stateless(func(u, _ any) any {
		rejectHalf("optim.ClipByBlockRMS", "update", u)
		return mapLeaves(u, func(x *tensor.Tensor) *tensor.Tensor {
			den := tensor.Maximum(tensor.MulScalar(rms(x), float32(1/threshold)), tensor.Scalar(1))
			return tensor.Div(x, den)
		})
	})
}
