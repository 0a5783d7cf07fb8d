package optim

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// SetToZero returns a transform that replaces every update by zeros
// (optax.set_to_zero): the parameters it sees do not move. Nil updates stay
// nil. Its state is EmptyState.
func SetToZero() Transform {
	return Stateless(func(u, _ any) any {
		rejectHalf("optim.SetToZero", "update", u)
		return mapLeaves(u, func(x *tensor.Tensor) *tensor.Tensor { return like(x, 0) })
	})
}

// Freeze returns a transform that zeros the updates of the leaves mask
// selects and passes the others through (optax.freeze): Masked(SetToZero(),
// mask). Chained after an optimizer it holds the selected parameters
// constant, though the optimizer still keeps (and updates) state for them;
// SelectiveTransform keeps none.
func Freeze(mask pytree.Predicate) Transform {
	if mask == nil {
		panic("optim.Freeze: nil mask")
	}
	return Masked(SetToZero(), mask)
}

// SelectiveTransform returns optimizer applied to the leaves frozen does
// not select and zero updates for those it does, with no optimizer state
// for the frozen ones (optax.selective_transform): Partition with the
// labels "train" and "freeze".
func SelectiveTransform(optimizer Transform, frozen pytree.Predicate) Transform {
	if optimizer == nil || frozen == nil {
		panic("optim.SelectiveTransform: nil optimizer or mask")
	}
	return Partition(map[string]Transform{"train": optimizer, "freeze": SetToZero()},
		func(p pytree.Path, x *tensor.Tensor) string {
			if frozen(p, x) {
				return "freeze"
			}
			return "train"
		})
}

// LabelFunc names the group a parameter belongs to, from its path and
// value (its shape, logical axes): Partition gives each group its own
// transform.
type LabelFunc func(path pytree.Path, x *tensor.Tensor) string

// PartitionState is the state of Partition: each group's state, by label.
// A group's state mirrors only its own parameters (nil leaves elsewhere).
type PartitionState struct {
	Inner map[string]State
}

// Partition returns a transform that applies transforms[label(path, p)] to
// each float parameter p (optax.partition, formerly multi_transform): a
// different optimizer, or none, per group of parameters.
//
//	opt := optim.Partition(map[string]optim.Transform{
//		"muon": optim.Muon(lr),
//		"adam": optim.AdamW(lr),
//		"frozen": optim.SetToZero(),
//	}, func(path pytree.Path, x *tensor.Tensor) string {
//		switch {
//		case strings.HasPrefix(path.String(), "Embed"):
//			return "frozen"
//		case x.Rank() == 2:
//			return "muon"
//		}
//		return "adam"
//	})
//
// Each transform sees trees of the full structure holding its own leaves
// and nil elsewhere (as under Masked), and keeps state for those only. The
// labels are computed from the params (from the updates when Update gets
// none), at Init and at every Update; a label that names no transform
// panics, listing the labels there are. Non-float leaves get no label and
// no update (bfloat16 and float16 ones are refused, as by the optimizers).
// The groups are updated in the order of their labels.
func Partition(transforms map[string]Transform, label LabelFunc) Transform {
	const op = "optim.Partition"
	if label == nil || len(transforms) == 0 {
		panic(op + ": no transforms or nil label function")
	}
	return newPartition(op, transforms, label)
}

func newPartition(op string, transforms map[string]Transform, label LabelFunc) *partition {
	p := &partition{op: op, label: label, txs: maps.Clone(transforms), names: slices.Sorted(maps.Keys(transforms))}
	for _, name := range p.names {
		if p.txs[name] == nil {
			panic(fmt.Sprintf("%s: transform %q is nil", op, name))
		}
	}
	return p
}

// MultiTransform is Partition under optax's older name
// (optax.multi_transform).
func MultiTransform(transforms map[string]Transform, label LabelFunc) Transform {
	return Partition(transforms, label)
}

type partition struct {
	op    string
	label LabelFunc
	txs   map[string]Transform
	names []string
}

// labels returns the label of every float leaf of tree by path, checking
// that each names a transform.
func (p *partition) labels(tree any) map[string]string {
	out := map[string]string{}
	paths, leaves := pytree.LeavesWithPath(tree)
	for i, x := range leaves {
		if !isFloat(x) {
			continue
		}
		l := p.label(paths[i], x)
		if _, ok := p.txs[l]; !ok {
			panic(fmt.Sprintf("%s: parameter %s has label %q, which names no transform (labels: %s)",
				p.op, paths[i], l, strings.Join(p.names, ", ")))
		}
		out[paths[i].String()] = l
	}
	return out
}

// group returns the Masked transform of one label.
func (p *partition) group(labels map[string]string, name string) *masked {
	return &masked{op: p.op, inner: p.txs[name], mask: func(path pytree.Path, _ *tensor.Tensor) bool {
		return labels[path.String()] == name
	}}
}

func (p *partition) Init(params any) State {
	rejectHalf(p.op, "parameter", params)
	labels := p.labels(params)
	st := PartitionState{Inner: map[string]State{}}
	for _, name := range p.names {
		st.Inner[name] = p.group(labels, name).Init(params).(MaskedState).Inner
	}
	return st
}

func (p *partition) Update(grads any, state State, params any) (any, State) {
	return p.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to every group's transform.
func (p *partition) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	op := p.op
	rejectHalf(op, "gradient", grads)
	st := stateAs[PartitionState](op, state)
	src := params
	if src == nil {
		src = grads
	}
	labels := p.labels(src)
	out := PartitionState{Inner: map[string]State{}}
	u := grads
	for _, name := range p.names {
		inner, ok := st.Inner[name]
		if !ok {
			panic(fmt.Sprintf("%s: state has no group %q (was it made by Init of this Partition?)", op, name))
		}
		var ms State
		u, ms = p.group(labels, name).UpdateExtra(u, MaskedState{Inner: inner}, params, extra)
		out.Inner[name] = ms.(MaskedState).Inner
	}
	return u, out
}
