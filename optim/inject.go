package optim

import (
	"fmt"
	"maps"
	"reflect"

	"github.com/gonox/gonox/tensor"
)

// InjectHyperparamsState is the state of InjectHyperparams: the
// hyperparameters, as float32 scalars a checkpoint saves, and the inner
// optimizer's state.
type InjectHyperparamsState[H any] struct {
	// Count is the number of updates made so far (i32[]); the Schedule
	// fields of H are evaluated at it.
	Count *tensor.Tensor
	// Values holds one f32[] per float and Schedule field of H, by field
	// name: the values the last update used (at Init, those the first
	// will use, Schedules at step 0). Hyperparams reads them as an H.
	Values map[string]*tensor.Tensor
	// Inner is the inner optimizer's state.
	Inner State

	// base is the H given to InjectHyperparams, for its static fields
	// (static to pytree and checkpoints: Restore takes it from its like).
	base H
}

// InjectHyperparams returns an optimizer whose hyperparameters live in its
// state, where they can be read and changed between steps and are saved
// with it (optax.inject_hyperparams).
//
// H is a struct of hyperparameters and factory builds the optimizer from
// one; hp holds their starting values. Fields of H are of three kinds:
//
//   - float64 and float32 fields are numeric hyperparameters: kept in the
//     state, settable with WithHyperparams;
//   - Schedule fields are scheduled: evaluated at every update's step count
//     and handed to factory as Constant(value); the value used is kept in
//     the state for reading, and setting it has no effect;
//   - all other fields (ints, bools, masks) are static and passed on as
//     they are.
//
// Every update calls factory with the current values and runs the
// optimizer it returns on the kept inner state, so factory must build
// optimizers whose states agree (same optimizer, other numbers):
//
//	type adamHP struct {
//		LR     optim.Schedule
//		B1, B2 float64
//	}
//	opt := optim.InjectHyperparams(func(h adamHP) optim.Transform {
//		return optim.Adam(h.LR, optim.AdamOptions{B1: h.B1, B2: h.B2})
//	}, adamHP{LR: optim.CosineDecay(1e-3, 1000, 0), B1: 0.9, B2: 0.999})
//	state := opt.Init(model)
//	...
//	st := state.(optim.InjectHyperparamsState[adamHP])
//	st.Hyperparams().LR(0)                 // the learning rate of the last step
//	h := st.Hyperparams()
//	h.B2 = 0.99
//	state = st.WithHyperparams(h)          // from the next step on
//
// The values are stored as float32, as optax stores them in the params'
// dtype, so the factory sees them rounded to float32. The hyperparameters
// are read back to the host at every update.
func InjectHyperparams[H any](factory func(h H) Transform, hp H) Transform {
	const op = "optim.InjectHyperparams"
	if factory == nil {
		panic(op + ": nil factory")
	}
	fields := hyperFields[H](op)
	return &inject[H]{factory: factory, hp: hp, fields: fields}
}

// hyperField is a numeric or scheduled field of a hyperparameter struct.
type hyperField struct {
	index    int
	name     string
	schedule bool
}

var scheduleType = reflect.TypeFor[Schedule]()

// hyperFields lists the numeric and scheduled fields of H, panicking if H
// is not a struct.
func hyperFields[H any](op string) []hyperField {
	t := reflect.TypeFor[H]()
	if t.Kind() != reflect.Struct {
		panic(fmt.Sprintf("%s: hyperparameters are %v, want a struct", op, t))
	}
	var out []hyperField
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		switch {
		case f.Type.Kind() == reflect.Float64 || f.Type.Kind() == reflect.Float32:
			out = append(out, hyperField{index: i, name: f.Name})
		case f.Type == scheduleType || f.Type.ConvertibleTo(scheduleType) && f.Type.Kind() == reflect.Func:
			out = append(out, hyperField{index: i, name: f.Name, schedule: true})
		}
	}
	return out
}

type inject[H any] struct {
	factory func(H) Transform
	hp      H
	fields  []hyperField
}

// resolve returns the hyperparameters of update n: numeric fields from
// vals (nil: from i.hp), Schedule fields evaluated at n and made constant.
func (i *inject[H]) resolve(n int, vals map[string]float64) (H, map[string]float64) {
	h := i.hp
	v := reflect.ValueOf(&h).Elem()
	used := map[string]float64{}
	for _, f := range i.fields {
		fv := v.Field(f.index)
		var x float64
		switch {
		case f.schedule:
			s := fv.Convert(scheduleType).Interface().(Schedule)
			if s == nil {
				panic(fmt.Sprintf("optim.InjectHyperparams: Schedule field %s is nil", f.name))
			}
			if x = s(n); !finite(x) {
				panic(fmt.Sprintf("optim.InjectHyperparams: Schedule field %s gave %v at step %d, want a finite value", f.name, x, n))
			}
			x = float64(float32(x))
			fv.Set(reflect.ValueOf(Constant(x)).Convert(fv.Type()))
		case vals != nil:
			x = vals[f.name]
			fv.SetFloat(x)
		default:
			x = float64(float32(fv.Float()))
			fv.SetFloat(x)
		}
		used[f.name] = x
	}
	return h, used
}

func (i *inject[H]) Init(params any) State {
	h, used := i.resolve(0, nil)
	count := newCount()
	return InjectHyperparamsState[H]{Count: count, Values: scalars(used, count), Inner: i.factory(h).Init(params), base: i.hp}
}

func (i *inject[H]) Update(grads any, state State, params any) (any, State) {
	return i.UpdateExtra(grads, state, params, Extra{})
}

// UpdateExtra passes extra on to the inner optimizer.
func (i *inject[H]) UpdateExtra(grads any, state State, params any, extra Extra) (any, State) {
	const op = "optim.InjectHyperparams"
	st := stateAs[InjectHyperparamsState[H]](op, state)
	n := countValue(op, st.Count)
	vals := st.values(op, i.fields)
	h, used := i.resolve(n, vals)
	tx := i.factory(h)
	if tx == nil {
		panic(op + ": factory returned a nil transform")
	}
	u, inner := UpdateExtra(tx, grads, st.Inner, params, extra)
	return u, InjectHyperparamsState[H]{Count: incCount(st.Count, n), Values: scalars(used, st.Count), Inner: inner, base: i.hp}
}

// values reads the numeric hyperparameters of a state.
func (s InjectHyperparamsState[H]) values(op string, fields []hyperField) map[string]float64 {
	out := map[string]float64{}
	for _, f := range fields {
		x, ok := s.Values[f.name]
		if !ok || x == nil {
			panic(fmt.Sprintf("%s: state has no hyperparameter %s; create it with Init", op, f.name))
		}
		if x.Size() != 1 {
			panic(fmt.Sprintf("%s: hyperparameter %s is %v, want a scalar", op, f.name, x))
		}
		out[f.name] = x.Item()
	}
	return out
}

// Hyperparams returns the hyperparameters kept in the state: numeric fields
// as stored, Schedule fields as Constant of the value last used, static
// fields as InjectHyperparams got them.
func (s InjectHyperparamsState[H]) Hyperparams() H {
	const op = "optim.InjectHyperparamsState.Hyperparams"
	h := s.base
	v := reflect.ValueOf(&h).Elem()
	for _, f := range hyperFields[H](op) {
		x := s.values(op, []hyperField{f})[f.name]
		fv := v.Field(f.index)
		if f.schedule {
			fv.Set(reflect.ValueOf(Constant(x)).Convert(fv.Type()))
		} else {
			fv.SetFloat(x)
		}
	}
	return h
}

// WithHyperparams returns the state with the numeric hyperparameters of h:
// the next update uses them. Schedule and static fields of h are ignored.
func (s InjectHyperparamsState[H]) WithHyperparams(h H) InjectHyperparamsState[H] {
	const op = "optim.InjectHyperparamsState.WithHyperparams"
	v := reflect.ValueOf(h)
	hp := maps.Clone(s.Values)
	for _, f := range hyperFields[H](op) {
		if f.schedule {
			continue
		}
		old, ok := s.Values[f.name]
		if !ok {
			panic(fmt.Sprintf("%s: state has no hyperparameter %s; create it with Init", op, f.name))
		}
		hp[f.name] = scalarLike(v.Field(f.index).Float(), old)
	}
	s.Values = hp
	return s
}

// scalars returns vals as f32[] tensors marked like ref.
func scalars(vals map[string]float64, ref *tensor.Tensor) map[string]*tensor.Tensor {
	out := make(map[string]*tensor.Tensor, len(vals))
	for k, v := range vals {
		out[k] = scalarLike(v, ref)
	}
	return out
}
