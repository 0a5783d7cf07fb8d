package parallel

import (
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// This file is the propagation path: the loss runs on the placed
// parameters and batch as it would on the host, and package shard computes
// every op blockwise on the devices of the mesh (sharding propagation).

// placeBatch puts every leaf of rank one or more of b on the mesh with its
// rows split over the data axes (in place when it is there already).
func (t *Trainer[M, B]) placeBatch(b B) B {
	s := t.BatchSharding()
	return pytree.Map(b, func(x *tensor.Tensor) *tensor.Tensor {
		if x.Rank() == 0 {
			return x
		}
		if have, ok := shard.ShardingOf(x); ok && have.Equal(s) {
			return x
		}
		return shard.Put(x, s)
	})
}

// propGrads returns the loss and the gradients of the placed parameters,
// placed like them, accumulated over the micro-batches.
func (t *Trainer[M, B]) propGrads(b B, key tensor.Key, flow *stateFlow) (*tensor.Tensor, M) {
	b = t.placeBatch(b)
	loss := func(p M, mb B, i int) *tensor.Tensor {
		return t.userLoss(nil, p, mb, tensor.FoldIn(key, uint32(i)), i, flow)
	}
	var l *tensor.Tensor
	var g M
	if t.cfg.MicroBatches == 1 {
		l, g = valueAndGrad(t.params, func(p M) *tensor.Tensor { return loss(p, b, 0) })
	} else {
		l, g = accumulate(t.cfg.MicroBatches, t.params, b, loss)
	}
	// Gradients come out placed like their parameters; make sure of it,
	// so that the optimizer updates shards in place of their parameters.
	g = pytree.MapN(func(xs []*tensor.Tensor) *tensor.Tensor {
		p, g := xs[0], xs[1]
		if p == nil || g == nil {
			return g
		}
		want, ok := shard.ShardingOf(p)
		if !ok {
			return g
		}
		if have, ok := shard.ShardingOf(g); ok && have.Equal(want) {
			return g
		}
		return shard.Reshard(g, want)
	}, t.params, g)
	return l, g
}

// propLoss is the loss of the placed parameters p on b.
func (t *Trainer[M, B]) propLoss(p M, b B, key tensor.Key, flow *stateFlow) *tensor.Tensor {
	return t.userLoss(nil, p, t.placeBatch(b), tensor.FoldIn(key, 0), 0, flow)
}

// propResiduals reports what the backward pass of the loss keeps on the
// mesh's first device of this process (device 0 in one process): the blocks it holds of placed residuals, host ones whole.
func (t *Trainer[M, B]) propResiduals(b B, key tensor.Key) tensor.ResidualReport {
	tr := tensor.NewTrace()
	p := pytree.Map(t.params, func(x *tensor.Tensor) *tensor.Tensor {
		if x.DType().IsFloat() {
			return tr.Leaf(x)
		}
		return x
	})
	out := t.userLoss(nil, p, t.placeBatch(b), tensor.FoldIn(key, 0), 0, newFlow(t.mstate, t.cfg.StateLoss != nil))
	rep := tensor.ResidualReport{ByLabel: map[string]tensor.ResidualStat{}, ByDevice: map[int]tensor.ResidualStat{}}
	dev := firstLocalDevice(t.mesh).ID() // device 0 in one process
	seen := map[*tensor.Tensor]bool{}
	for _, r := range tensor.ResidualTensors(out) {
		x := r.Tensor
		if x == nil || seen[x] || x.Size() == 0 {
			continue
		}
		seen[x] = true
		n := x.Bytes()
		if x.Layout() != nil {
			n = firstLocalBlock(x).Bytes()
		}
		add := func(s tensor.ResidualStat) tensor.ResidualStat {
			return tensor.ResidualStat{Count: s.Count + 1, Bytes: s.Bytes + n}
		}
		rep.ByLabel[r.Label] = add(rep.ByLabel[r.Label])
		rep.ByDevice[dev] = add(rep.ByDevice[dev])
		rep.ResidualStat = add(rep.ResidualStat)
	}
	return rep
}
