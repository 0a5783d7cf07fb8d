package nn

import (
	"fmt"
	"maps"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// State holds the mutable state of a model's stateful layers — the running
// statistics of BatchNorm — outside the model, as eqx.nn.State does: a
// model stays an immutable value, and a layer that updates its state takes
// the State and returns a new one,
//
//	y, state = bn.Forward(x, state)
//
// MakeWithState builds the initial State of a model. A State is a pytree
// (its tensors are the leaves of Values), so the trainer of package
// parallel carries it from step to step, checkpoints save it, and
// shard.FilterShard places it like any other tree. It is never
// differentiated: its updates are made from values whose gradient is
// stopped.
type State struct {
	// Values maps each stateful layer's index (StateIndex) to its
	// tensors. Treat it as read-only: Set returns a new State.
	Values map[string][]*tensor.Tensor
}

// StateIndex identifies a stateful layer's entry in a State
// (eqx.nn.StateIndex). A layer holds one, built with its initial value;
// MakeWithState numbers the indices of a model and collects those values.
type StateIndex struct {
	kind string
	id   int // 1, 2, ... once numbered by MakeWithState; 0 before
	init func() []*tensor.Tensor
}

// NewStateIndex returns an index for a stateful layer of the given kind
// ("batch_norm") whose state starts at the values init returns. init is
// static data of the model (its tensors are not leaves: no transform sees
// them); MakeWithState calls it.
func NewStateIndex(kind string, init func() []*tensor.Tensor) StateIndex {
	return StateIndex{kind: kind, init: init}
}

// Key returns the index's key in State.Values: its kind and number,
// "batch_norm#3"; "" before MakeWithState numbered it.
func (i StateIndex) Key() string {
	if i.id == 0 {
		return ""
	}
	return fmt.Sprintf("%s#%d", i.kind, i.id)
}

// MakeWithState numbers the stateful layers of model (every StateIndex
// package pytree reaches, in the order it walks them) and returns the
// model with its indices numbered and the State holding their initial
// values (eqx.nn.make_with_state). Call it once on a whole model, after
// composing it: the numbers are unique within the model it is given.
func MakeWithState[M any](model M) (M, State) {
	s := State{Values: map[string][]*tensor.Tensor{}}
	n := 0
	model = pytree.MapType(model, func(i StateIndex) StateIndex {
		n++
		i.id = n
		if i.init != nil {
			s.Values[i.Key()] = i.init()
		} else {
			s.Values[i.Key()] = nil
		}
		return i
	})
	return model, s
}

// Get returns the values of index i. It panics if i was not numbered by
// MakeWithState or s has no entry for it.
func (s State) Get(i StateIndex) []*tensor.Tensor {
	v, ok := s.Values[i.Key()]
	if !ok {
		if i.id == 0 && i.kind == "" {
			panic("nn.State.Get: a zero StateIndex (of a layer not built by its constructor, such as the zero BatchNorm) was never numbered: " +
				"build the layer with its constructor and the model's State with nn.MakeWithState")
		}
		if i.id == 0 {
			panic(fmt.Sprintf("nn.State.Get: a %s layer's index was never numbered: build the model's State with nn.MakeWithState", i.kind))
		}
		panic(fmt.Sprintf("nn.State.Get: no entry %q in a State of %d entries: was it made for another model?", i.Key(), len(s.Values)))
	}
	return v
}

// Set returns a copy of s in which index i holds v. s is not changed.
func (s State) Set(i StateIndex, v ...*tensor.Tensor) State {
	if _, ok := s.Values[i.Key()]; !ok {
		s.Get(i) // panics, naming the problem
	}
	out := State{Values: maps.Clone(s.Values)}
	out.Values[i.Key()] = v
	return out
}

// StatefulModule is a layer that reads and updates a State
// (eqx.nn.StatefulLayer): Sequential.ForwardState threads the state
// through every layer that implements it.
type StatefulModule interface {
	CallState(x *tensor.Tensor, state State, key tensor.Key) (*tensor.Tensor, State)
}

// ForwardState applies the layers in order like Forward, passing state to
// the layers that are StatefulModules and the state each returns to the
// next one; it returns the output and the final state.
func (s Sequential) ForwardState(x *tensor.Tensor, state State, key tensor.Key) (*tensor.Tensor, State) {
	if len(s.Layers) == 0 {
		return x, state
	}
	keys := key.Split(len(s.Layers))
	for i, l := range s.Layers {
		if sl, ok := l.(StatefulModule); ok {
			x, state = sl.CallState(x, state, keys[i])
			continue
		}
		x = l.Call(x, keys[i])
	}
	return x, state
}
