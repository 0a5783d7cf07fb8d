package tensor

import (
	"fmt"
	"math/bits"
	"slices"
	"sync/atomic"
)

// Local marks a tensor as one device's block inside shard.Map and records
// the mesh axes the value varies over (JAX's "varying manual axes"). A
// value invariant over an axis is the same on every device along it.
//
// Ops propagate marks: a result varies over the union of the axes its
// operands vary over. When a differentiable operand varies over fewer axes
// than the result, Apply inserts an implicit pvary (a broadcast) whose VJP
// sums the cotangent over the extra axes, so gradients of invariant values
// (replicated parameters) come out summed over the devices that used them,
// as in JAX.
type Local struct {
	// Env is the device environment that created the block.
	Env Env
	// Mask has bit i set when the value varies over mesh axis i.
	Mask uint64

	// own is the record of rarely set fields holding this mark and
	// nothing else (see rec), made at its first use.
	own atomic.Pointer[tensorExt]
	// named are records holding this mark and logical axis names (see
	// recNamed), at most maxNamedRecs.
	named atomic.Pointer[[]*tensorExt]
}

// maxNamedRecs bounds the records of a mark with logical axis names that
// the mark keeps for reuse (a model has a few kinds of named parameters).
const maxNamedRecs = 16

// recNamed returns a record holding the mark l and the logical axis names
// and nothing else: one l keeps when its names equal these (names are
// never changed once set), a new one holding names otherwise, kept for
// later calls while l keeps fewer than maxNamedRecs. Marking a named
// parameter, a gradient or a moment taking its value's names then makes
// no record of its own.
func (l *Local) recNamed(names []string) *tensorExt {
	if e := l.findNamed(names); e != nil {
		return e
	}
	e := &tensorExt{local: l, axes: names}
	for {
		p := l.named.Load()
		var old []*tensorExt
		if p != nil {
			old = *p
		}
		if len(old) >= maxNamedRecs {
			return e
		}
		grown := append(old[:len(old):len(old)], e)
		if l.named.CompareAndSwap(p, &grown) {
			return e
		}
	}
}

// findNamed returns the record l keeps with the names, nil if none.
func (l *Local) findNamed(names []string) *tensorExt {
	if p := l.named.Load(); p != nil {
		for _, e := range *p {
			if sameNames(e.axes, names) {
				return e
			}
		}
	}
	return nil
}

// sameNames reports whether a and b hold the same names.
func sameNames(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	if len(a) == 0 || &a[0] == &b[0] {
		return true
	}
	return slices.Equal(a, b)
}

// rec returns the record of rarely set fields (tensorExt) holding the
// mark l alone, one for every header so marked: a header inside
// shard.Map that carries nothing else needs no record of its own, and
// the record, in an allocation of its own, keeps no header's storage
// alive (a record lying in a header's allocation would).
func (l *Local) rec() *tensorExt {
	if e := l.own.Load(); e != nil {
		return e
	}
	l.own.CompareAndSwap(nil, &tensorExt{local: l})
	return l.own.Load()
}

// Env is a device's environment inside shard.Map, implemented by package
// shard. Package tensor calls it to name axes and to transpose implicit
// broadcasts.
type Env interface {
	// AxisNames returns the mesh axis names; bit i of a mask is axis i.
	AxisNames() []string
	// Local returns the (interned) mark for the given mask.
	Local(mask uint64) *Local
	// PsumMask sums x over the mesh axes in mask (a collective).
	PsumMask(x *Tensor, mask uint64) *Tensor
}

// AxisNames returns the names of the axes the value varies over, in mesh
// order.
func (l *Local) AxisNames() []string {
	if l == nil {
		return nil
	}
	all := l.Env.AxisNames()
	var out []string
	for m := l.Mask; m != 0; m &= m - 1 {
		out = append(out, all[bits.TrailingZeros64(m)])
	}
	return out
}

func localMask(x *Tensor) uint64 {
	if x.local() == nil {
		return 0
	}
	return x.local().Mask
}

func unionLocal(op string, a, b *Local) *Local {
	switch {
	case a == nil:
		return b
	case b == nil || a == b:
		return a
	case a.Env != b.Env:
		panic(fmt.Sprintf("tensor: op %q mixes blocks of different devices or shard.Map calls", op))
	}
	m := a.Mask | b.Mask
	switch m {
	case a.Mask:
		return a
	case b.Mask:
		return b
	}
	return a.Env.Local(m)
}

// WithLocal returns x marked as a block with the given mark (nil removes
// the mark). It does not change what the value is: shard.Map uses it to
// mark the blocks it hands to devices and the results of collectives.
// It panics if x is traced; use Vary to widen the mark of a traced value.
func WithLocal(x *Tensor, l *Local) *Tensor {
	checkNil("tensor.WithLocal", "x", x)
	if x.node != nil {
		panic(fmt.Sprintf("tensor.WithLocal: %v is traced", x))
	}
	return x.withLocal(l)
}

// WithLocals returns WithLocal(x, l) for every non-nil x of xs (nil for a
// nil x), the headers made in one allocation: the memory of none is freed
// before all are unreachable. Package shard makes the blocks of a Map
// call's output this way, and charges them to their devices once.
func WithLocals(xs []*Tensor, l *Local) []*Tensor {
	out := make([]*Tensor, len(xs))
	boxes := make([]struct {
		t Tensor
		e tensorExt
	}, len(xs))
	for i, x := range xs {
		if x == nil {
			continue
		}
		checkNil("tensor.WithLocals", "x", x)
		if x.node != nil {
			panic(fmt.Sprintf("tensor.WithLocals: %v is traced", x))
		}
		b := &boxes[i]
		x.shallowInto(&b.t)
		b.e = x.extOrZero()
		b.e.local = l
		switch {
		case b.e.layout != nil || b.e.axes != nil || b.e.xv != nil:
			b.t.ext = &b.e
		case l != nil:
			b.t.ext = l.rec()
		default:
			b.t.ext = nil
		}
		out[i] = &b.t
	}
	return out
}

// withLocal returns a header over t with the mark l (shallow, with its
// record in the same allocation).
func (t *Tensor) withLocal(l *Local) *Tensor {
	if t.local() == l {
		return t.shallow()
	}
	e := t.extOrZero()
	e.local = l
	return t.shallowExt(e)
}

// Vary returns x marked as varying over the axes of l, which must include
// those x already varies over (JAX's pvary). The value is unchanged; the
// cotangent is summed over the added axes.
func Vary(x *Tensor, l *Local) *Tensor {
	checkNil("tensor.Vary", "x", x)
	if m := localMask(x); m&^l.Mask != 0 {
		panic(fmt.Sprintf("tensor.Vary: %v already varies over axes outside %v", x, l.AxisNames()))
	}
	if x.local() != nil && x.local().Env != l.Env {
		panic(fmt.Sprintf("tensor.Vary: %v belongs to another device environment", x))
	}
	if localMask(x) == l.Mask && x.local() != nil {
		return x
	}
	if x.node == nil && x.xv() == nil && x.layout() == nil && !x.placeholder() {
		// A value of no trace or level: what Apply would return, without
		// its dispatch (a device marks every parameter at each step).
		return x.withLocal(l)
	}
	return Apply(pvaryOp, l, x)
}

var pvaryOp *Op

func init() {
	pvaryOp = &Op{
		Name: "pvary",
		Traits: Traits{
			Half:      NativeHalf, // a mark, not a computation
			Placement: SyncVJP,    // its VJP is a synchronous psum
			Types:     TypesAll,
		},
		Impl: func(in []*Tensor, p any) *Tensor {
			return in[0].withLocal(p.(*Local))
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, p any) []*Tensor {
			to := p.(*Local)
			extra := to.Mask &^ localMask(in[0])
			if extra == 0 {
				return []*Tensor{g}
			}
			return []*Tensor{to.Env.PsumMask(g, extra)}
		},
		JVP:   linearJVP(&pvaryOp),
		Batch: sameOpBatch(&pvaryOp),
	}
}
