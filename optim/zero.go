package optim

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// ZeRO splits the update of an elementwise optimizer over the n devices of
// a data-parallel axis (ZeRO stages 1 and 2, Rajbhandari et al. 2020):
// each device keeps the optimizer state of, and updates, one n-th of the
// parameters.
//
// The float32 parameters are laid end to end in one flat vector of Len()
// elements (zero padded to a multiple of n); device i owns elements
// [i·ShardLen(), (i+1)·ShardLen()). A data-parallel step with ZeRO is
//
//	flat gradient    g   = z.Flatten(grads)                    f32[Len], per device
//	reduce-scatter   gᵢ  = PsumScatter(g, dp, 0, tiled)        f32[ShardLen], summed
//	own parameters   pᵢ  = SliceAxis(z.Flatten(params), i·S, (i+1)·S)
//	update           pᵢ', sᵢ' = z.UpdateShard(pᵢ, gᵢ, sᵢ)       one fused pass
//	all-gather       p'  = AllGatherInvariant(pᵢ', dp, 0, tiled) f32[Len]
//	params' = z.Unflatten(p', params)
//
// The reduce-scatter and the all-gather move the same bytes as the one
// all-reduce of plain data parallelism, while the update's work and the
// optimizer state are divided by n. The state of shard i is a state of the
// wrapped Transform for the one-leaf tree f32[ShardLen]: Init returns it
// for the whole flat vector (place its moments split over the data axis,
// and each device sees its own shard), InitShard for one shard.
//
// Only transforms whose update of each element depends on that element
// alone (and on scalars such as the step count) can be split this way:
// SGD (with or without momentum), the Adam family (Adam, AdamW, NAdam,
// AMSGrad, Adamax, RAdam, AdaBelief, Yogi), Adagrad, Adadelta and Lion,
// each without a Mask. NewZeRO panics for any other.
type ZeRO struct {
	tx       Transform
	n        int
	shapes   [][]int        // shapes of the float32 leaves, in pytree order
	offsets  []int          // where each leaf starts in the flat vector
	index    map[string]int // leaf number by path
	total    int            // float32 elements of the params (unpadded)
	shardLen int
}

// elementwiser is implemented by transforms that may be elementwise: they
// report whether this configuration of the transform is.
type elementwiser interface {
	elementwise() bool
}

// Elementwise reports whether tx updates each element of a parameter from
// that element, its gradient and state alone (and from scalars such as the
// step count): SGD (with or without momentum), the Adam family (Adam,
// AdamW, NAdam, AMSGrad, Adamax, RAdam, AdaBelief, Yogi), Adagrad, Adadelta,
// ScaleByRMS and Lion, each without a Mask: the transforms NewZeRO accepts. Such a
// transform may update any part of a parameter on its own — one device's block of a
// parameter split over the data axes (parallel's DP) or a shard of the
// flat vector (ZeRO) — and get what Step gives for those elements. Chains,
// masks (which see each leaf whole), clipping (a global norm) and
// Adafactor (row and column statistics) are not elementwise.
func Elementwise(tx Transform) bool {
	e, ok := tx.(elementwiser)
	return ok && e.elementwise()
}

func (s *sgd) elementwise() bool  { return true }
func (a *adam) elementwise() bool { return a.mask == nil }
func (l *lion) elementwise() bool { return l.mask == nil }

// NewZeRO prepares the sharded update of tx over n devices for parameter
// trees shaped like params (only shapes and dtypes are read). It panics if
// tx is not elementwise or n < 1.
func NewZeRO(tx Transform, params any, n int) *ZeRO {
	const op = "optim.NewZeRO"
	if n < 1 {
		panic(fmt.Sprintf("%s: %d devices", op, n))
	}
	if !Elementwise(tx) {
		panic(fmt.Sprintf("%s: %T is not an elementwise transform (see optim.Elementwise): its update cannot be split over a flat vector", op, tx))
	}
	z := &ZeRO{tx: tx, n: n, index: map[string]int{}}
	paths, leaves := pytree.LeavesWithPath(params)
	for i, x := range leaves {
		if isFloat(x) {
			z.index[paths[i].String()] = len(z.shapes)
			z.shapes = append(z.shapes, x.Shape())
			z.offsets = append(z.offsets, z.total)
			z.total += x.Size()
		}
	}
	z.shardLen = (z.total + n - 1) / n
	return z
}

// Devices returns the number of shards.
func (z *ZeRO) Devices() int { return z.n }

// Len returns the length of the flat vector: the float32 elements of the
// params, padded with zeros to a multiple of Devices().
func (z *ZeRO) Len() int { return z.shardLen * z.n }

// ShardLen returns the number of elements each device owns.
func (z *ZeRO) ShardLen() int { return z.shardLen }

// Flatten lays the float32 leaves of tree (params, or gradients like them)
// end to end as f32[Len()], zero padded. Leaves are matched to the params'
// by path; a float32 parameter without a leaf in tree (a gradient that was
// not computed, nil) contributes zeros.
func (z *ZeRO) Flatten(tree any) *tensor.Tensor {
	const op = "optim.ZeRO.Flatten"
	out := make([]float32, z.Len())
	paths, leaves := pytree.LeavesWithPath(tree)
	for i, x := range leaves {
		if !isFloat(x) {
			continue
		}
		k, ok := z.index[paths[i].String()]
		if !ok {
			panic(fmt.Sprintf("%s: %s: no such float32 parameter", op, paths[i]))
		}
		off, size := z.offsets[k], shapeSize(z.shapes[k])
		if x.Size() != size {
			panic(fmt.Sprintf("%s: %s is %v, the parameter is f32%v", op, paths[i], x, z.shapes[k]))
		}
		if x.Layout() != nil {
			copy(out[off:off+size], x.Float32s()) // placed: gathered
		} else {
			copy(out[off:off+size], x.RawFloat32())
		}
	}
	return tensor.FromFloat32(out, z.Len())
}

// Unflatten returns a tree like params whose float32 leaves are read from
// flat (f32[Len()], as Flatten lays them out), keeping each parameter's
// logical axes; the other leaves are those of params.
func (z *ZeRO) Unflatten(flat *tensor.Tensor, params any) any {
	const op = "optim.ZeRO.Unflatten"
	if flat.DType() != tensor.Float32 || flat.Rank() != 1 || flat.Size() != z.Len() {
		panic(fmt.Sprintf("%s: flat vector %v, want f32[%d]", op, flat, z.Len()))
	}
	data := flat.Float32s()
	off, k := 0, 0
	out := pytree.Map(params, func(p *tensor.Tensor) *tensor.Tensor {
		if !isFloat(p) {
			return p
		}
		if k >= len(z.shapes) {
			panic(fmt.Sprintf("%s: params have more float32 leaves than NewZeRO saw (%d)", op, len(z.shapes)))
		}
		if !slices.Equal(p.Shape(), z.shapes[k]) {
			panic(fmt.Sprintf("%s: float32 leaf %d of params is %v, NewZeRO saw f32%v", op, k, p, z.shapes[k]))
		}
		size := shapeSize(z.shapes[k])
		x := tensor.FromFloat32(data[off:off+size:off+size], z.shapes[k]...)
		off += size
		k++
		if ax := p.LogicalAxes(); ax != nil {
			x = tensor.WithLogicalAxes(x, ax...)
		}
		return x
	})
	if k != len(z.shapes) {
		panic(fmt.Sprintf("%s: params have %d float32 leaves, NewZeRO saw %d", op, k, len(z.shapes)))
	}
	return out
}

// Init returns the wrapped transform's state for the whole flat vector
// (one leaf f32[Len()]). Placed with its moments split over the data axis,
// each device holds the state of its own shard.
func (z *ZeRO) Init() State { return z.tx.Init(tensor.Zeros(tensor.Float32, z.Len())) }

// InitShard returns the initial state of one shard (one leaf
// f32[ShardLen()]).
func (z *ZeRO) InitShard() State { return z.tx.Init(tensor.Zeros(tensor.Float32, z.shardLen)) }

// UpdateShard updates one device's part of the parameters: p is its
// f32[ShardLen()] block of the flat parameters, g the same block of the
// summed (or averaged) flat gradient, state that shard's state. It returns
// the new block and state, computed in one fused pass where the transform
// has one (Adam, AdamW), bit for bit what Step gives for those elements.
func (z *ZeRO) UpdateShard(p, g *tensor.Tensor, state State) (*tensor.Tensor, State) {
	const op = "optim.ZeRO.UpdateShard"
	for _, x := range []*tensor.Tensor{p, g} {
		if x == nil || x.DType() != tensor.Float32 || x.Rank() != 1 || x.Size() != z.shardLen {
			panic(fmt.Sprintf("%s: %v, %v: want two f32[%d] blocks", op, p, g, z.shardLen))
		}
	}
	return Step(z.tx, p, g, state)
}

func shapeSize(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
