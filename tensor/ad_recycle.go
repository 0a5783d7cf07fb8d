package tensor

import (
	"fmt"
	"sync"
)

// Recycling evaluates f(in...) without differentiating it (an inference
// pass: a model's loss on an evaluation batch), recording the ops f
// performs on in and on the values computed from them, and returns f's
// outputs and a function recycle that donates (Donate) every value those
// ops computed except the outputs and in. The activations of the pass
// then go to the allocator cache, as those of a backward pass that
// recycles its intermediates (Trace.RecycleIntermediates) do, instead of
// to the collector: an evaluation between training steps costs the next
// step no fresh memory. The outputs are bit for bit those of f(in...).
//
// Call recycle once the intermediates are dead: right after Recycling
// returns or, inside shard.Map, after the Map has returned (another device
// may still read the operand of a collective). Until then the recording
// holds them; calls after the first do nothing. Ops on values that depend
// on none of in (the batch alone) are not recorded, and their results go
// to the collector as usual. An intermediate that f let escape is donated
// too: using it after recycle panics naming the op. Traced inputs are
// evaluated as their values (StopGradient); ops on integer inputs alone
// are not recorded. A checkpoint (Remat) inside f donates the values it
// computed once it has compiled them, as under a recycling trace.
func Recycling(f func(in []*Tensor) []*Tensor, in ...*Tensor) (out []*Tensor, recycle func()) {
	c := NewTrace()
	c.recordAll = true
	c.recycle = true // checkpoints in f donate what they computed, once compiled
	keep := make(map[*Tensor]bool, len(in))
	leaves := make([]*Tensor, len(in))
	for i, x := range in {
		if x == nil || x.IsDonated() {
			checkNil("tensor.Recycling", fmt.Sprintf("in[%d]", i), x)
		}
		v := StopGradient(x)
		keep[v], leaves[i] = true, v
		if v.dtype.IsFloat() {
			leaves[i] = c.Leaf(v)
		}
	}
	outs := f(leaves)
	out = make([]*Tensor, len(outs))
	for i, o := range outs {
		if o == nil {
			continue
		}
		out[i] = stripTrace(o, c)
		keep[out[i]] = true
	}
	var once sync.Once
	return out, func() { once.Do(func() { c.releaseRecording(keep, true, true) }) }
}
