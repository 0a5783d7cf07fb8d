package optim

import (
	"fmt"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// PerExampleGlobalNormClip clips per-example gradients and sums them
// (optax.per_example_global_norm_clip): grads is a tree whose float32
// leaves all carry the examples along axis 0 (autodiff.Vmap of a gradient
// gives such a tree); example b's gradient, its slices b of every leaf,
// is scaled by 1/max(1, n_b/l2NormClip), n_b its global L2 norm over all
// the leaves, so that its norm is at most l2NormClip; the clipped
// gradients are then summed over the examples. The result is a tree like
// grads with the batch axis gone (the shape of the parameters), and the
// number of examples that were clipped (an int32 scalar).
//
// It panics unless l2NormClip > 0 and every float32 leaf has the same
// number of examples along axis 0.
func PerExampleGlobalNormClip(grads any, l2NormClip float64) (any, *tensor.Tensor) {
	const op = "optim.PerExampleGlobalNormClip"
	if !(l2NormClip > 0) {
		panic(fmt.Sprintf("%s: l2NormClip %v, want > 0", op, l2NormClip))
	}
	rejectHalf(op, "gradient", grads)
	n := perExampleBatch(op, grads)
	// The squared norm of every example over all the leaves: f32[n].
	var sq *tensor.Tensor
	for _, g := range pytree.Leaves(grads) {
		if !isFloat(g) {
			continue
		}
		s := tensor.Square(g)
		if g.Rank() > 1 {
			s = tensor.Sum(s, axesFrom(1, g.Rank())...)
		}
		if sq == nil {
			sq = s
		} else {
			sq = tensor.Add(sq, s)
		}
	}
	if sq == nil {
		return grads, tensor.ScalarInt(0)
	}
	divisors := tensor.Maximum(tensor.MulScalar(tensor.Sqrt(sq), float32(1/l2NormClip)), tensor.Scalar(1))
	clipped := tensor.Sum(tensor.AsType(tensor.Greater(divisors, tensor.Scalar(1)), tensor.Int32))
	summed := mapLeaves(grads, func(g *tensor.Tensor) *tensor.Tensor {
		shape := make([]int, g.Rank())
		for i := range shape {
			shape[i] = 1
		}
		shape[0] = n
		return tensor.Sum(tensor.Div(g, tensor.Reshape(divisors, shape...)), 0)
	})
	return summed, clipped
}

// perExampleBatch returns the number of examples along axis 0 of the
// float32 leaves of grads, panicking, naming op, if a leaf has none or
// another number.
func perExampleBatch(op string, grads any) int {
	paths, leaves := pytree.LeavesWithPath(grads)
	n, from := -1, ""
	for i, g := range leaves {
		if !isFloat(g) {
			continue
		}
		if g.Rank() == 0 {
			panic(fmt.Sprintf("%s: gradient %s %v has no batch axis: want per-example gradients, the examples along axis 0 of every leaf (autodiff.Vmap of the gradient)", op, paths[i], g))
		}
		switch {
		case n < 0:
			n, from = g.Dim(0), fmt.Sprintf("%s %v", paths[i], g)
		case g.Dim(0) != n:
			panic(fmt.Sprintf("%s: gradient %s %v has %d examples along axis 0 but %s has %d", op, paths[i], g, g.Dim(0), from, n))
		}
	}
	return n
}

// axesFrom returns the axes lo, lo+1, ..., hi-1.
func axesFrom(lo, hi int) []int {
	a := make([]int, 0, hi-lo)
	for i := lo; i < hi; i++ {
		a = append(a, i)
	}
	return a
}

// DifferentiallyPrivateAggregateState is the state of
// DifferentiallyPrivateAggregate: the key of the next step's noise, its
// two words as an i32[2] tensor (so that checkpoints save it), as optax
// keeps its rng_key.
type DifferentiallyPrivateAggregateState struct {
	RNGKey *tensor.Tensor
}

// DifferentiallyPrivateAggregate returns the aggregation step of DP-SGD
// (Abadi et al. 2016), optax.differentially_private_aggregate: its Update
// takes per-example gradients (every float32 leaf with the examples along
// axis 0, as autodiff.Vmap of a gradient returns them), clips each
// example's gradient to global L2 norm l2NormClip
// (PerExampleGlobalNormClip), sums them, adds Gaussian noise of standard
// deviation l2NormClip·noiseMultiplier to every element and divides by
// the number of examples. The updates have the parameters' shapes; chain
// an optimizer after it:
//
//	opt := optim.Chain(optim.DifferentiallyPrivateAggregate(1.0, 1.1, 0), optim.SGD(optim.Constant(0.1)))
//	per := autodiff.Vmap2(autodiff.GradWith(loss), autodiff.InAxes(autodiff.None, autodiff.Axis(0)))(model, batch)
//	model, state = optim.Step(opt, model, per, state)
//
// The noise is drawn as optax draws it: the state's key k is split into
// len(leaves)+1 keys, the first becoming the next state's key and key i+1
// drawing tensor.Normal for float32 leaf i (in pytree.Leaves order),
// from tensor.NewKey(seed) at first: the keys optax uses. It panics unless l2NormClip > 0 and
// noiseMultiplier >= 0.
func DifferentiallyPrivateAggregate(l2NormClip, noiseMultiplier float64, seed uint64) Transform {
	const op = "optim.DifferentiallyPrivateAggregate"
	if !(l2NormClip > 0) {
		panic(fmt.Sprintf("%s: l2NormClip %v, want > 0", op, l2NormClip))
	}
	checkNonNeg(op, "noiseMultiplier", noiseMultiplier)
	return &dpAggregate{clip: l2NormClip, std: l2NormClip * noiseMultiplier, seed: seed}
}

type dpAggregate struct {
	clip, std float64
	seed      uint64
}

func keyTensor(k tensor.Key) *tensor.Tensor {
	d := k.Data()
	return tensor.FromInt32([]int32{int32(d[0]), int32(d[1])}, 2)
}

func (d *dpAggregate) Init(any) State {
	return DifferentiallyPrivateAggregateState{RNGKey: keyTensor(tensor.NewKey(d.seed))}
}

func (d *dpAggregate) Update(grads any, state State, _ any) (any, State) {
	const op = "optim.DifferentiallyPrivateAggregate"
	s := stateAs[DifferentiallyPrivateAggregateState](op, state)
	if s.RNGKey == nil || s.RNGKey.DType() != tensor.Int32 || s.RNGKey.Size() != 2 {
		panic(fmt.Sprintf("%s: state key is %v, want i32[2]; create the state with Init", op, s.RNGKey))
	}
	w := s.RNGKey.Int32s()
	key := tensor.WrapKeyData([2]uint32{uint32(w[0]), uint32(w[1])})

	rejectHalf(op, "gradient", grads)
	n := perExampleBatch(op, grads)
	summed, _ := PerExampleGlobalNormClip(grads, d.clip)
	nf := 0
	for _, g := range pytree.Leaves(summed) {
		if isFloat(g) {
			nf++
		}
	}
	keys := key.Split(nf + 1)
	i := 0
	noised := mapLeaves(summed, func(g *tensor.Tensor) *tensor.Tensor {
		i++
		if d.std != 0 {
			g = tensor.Add(g, tensor.MulScalar(tensor.Normal(keys[i], g.Shape()...), float32(d.std)))
		}
		return tensor.Div(g, tensor.Scalar(float32(n)))
	})
	return noised, DifferentiallyPrivateAggregateState{RNGKey: keyTensor(keys[0])}
}
