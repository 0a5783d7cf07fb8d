package nn

import (
	"fmt"
	"reflect"

	"github.com/gonox/gonox/tensor"
)

// Module is the interface Sequential composes: a layer applied to a batch,
// with a key for the layers that draw random numbers (Dropout) and that the
// others ignore. It is Equinox's __call__(x, *, key=None) in Go form.
//
// Every module of this package that maps one tensor to one tensor implements
// it next to its own Forward method, and so does Activation. Implement it on
// your own modules to put them in a Sequential. (MoE does not: its Forward
// returns an auxiliary loss a Sequential would silently drop.)
type Module interface {
	Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor
}

// Sequential applies its layers in order (eqx.nn.Sequential). Layers is an
// ordinary slice of interfaces: package pytree walks into the dynamic values,
// so the parameters of every layer are leaves of the Sequential.
type Sequential struct {
	Layers []Module
}

// NewSequential returns a Sequential of the given layers.
func NewSequential(layers ...Module) Sequential {
	for i, l := range layers {
		if l == nil {
			panic(fmt.Sprintf("nn.NewSequential: layer %d is nil", i))
		}
	}
	return Sequential{Layers: layers}
}

// Forward applies the layers in order. As in Equinox, key is split into one
// key per layer (key.Split(len(Layers))), so a Dropout gets fresh randomness
// wherever it sits; layers that need none ignore theirs.
func (s Sequential) Forward(x *tensor.Tensor, key tensor.Key) *tensor.Tensor {
	if len(s.Layers) == 0 {
		return x
	}
	keys := key.Split(len(s.Layers))
	for i, l := range s.Layers {
		x = l.Call(x, keys[i])
	}
	return x
}

// Call is Forward; it makes a Sequential a Module, so Sequentials nest.
func (s Sequential) Call(x *tensor.Tensor, key tensor.Key) *tensor.Tensor { return s.Forward(x, key) }

var (
	dropoutType = reflect.TypeFor[Dropout]()
	tensorType  = reflect.TypeFor[*tensor.Tensor]()
)

// InferenceMode returns a copy of model in which every Dropout has its
// Inference field set to inference (eqx.nn.inference_mode): with true,
// dropout becomes the identity for evaluation; with false, it is back on for
// training. The copy shares every tensor with model, which is not changed.
//
// It finds Dropout values anywhere package pytree would look: exported struct
// fields, pointers, slices, arrays, maps and interfaces (the layers of a
// Sequential). Only the containers on the way to a Dropout are copied.
func InferenceMode[M any](model M, inference bool) M {
	w := inferenceWalker{on: inference, path: map[uintptr]bool{}}
	v, changed := w.walk(reflect.ValueOf(&model).Elem())
	if !changed {
		return model
	}
	return v.Interface().(M)
}

type inferenceWalker struct {
	on   bool
	path map[uintptr]bool // pointers on the current path, to catch cycles
}

// walk returns v with its Dropouts set, and whether it differs from v. The
// result is a fresh value only when something changed.
func (w *inferenceWalker) walk(v reflect.Value) (reflect.Value, bool) {
	t := v.Type()
	if t == tensorType {
		return v, false
	}
	switch v.Kind() {
	case reflect.Struct:
		if t == dropoutType {
			d := v.Interface().(Dropout)
			d.Inference = w.on
			return reflect.ValueOf(d), true
		}
		var out reflect.Value
		for i := range t.NumField() {
			if !t.Field(i).IsExported() {
				continue
			}
			f, ch := w.walk(v.Field(i))
			if !ch {
				continue
			}
			if !out.IsValid() {
				out = reflect.New(t).Elem()
				out.Set(v)
			}
			out.Field(i).Set(f)
		}
		if out.IsValid() {
			return out, true
		}
	case reflect.Pointer:
		if v.IsNil() {
			break
		}
		p := v.Pointer()
		if w.path[p] {
			panic(fmt.Sprintf("nn.InferenceMode: cycle through a %v", t))
		}
		w.path[p] = true
		e, ch := w.walk(v.Elem())
		delete(w.path, p)
		if ch {
			np := reflect.New(t.Elem())
			np.Elem().Set(e)
			return np, true
		}
	case reflect.Interface:
		if v.IsNil() {
			break
		}
		e, ch := w.walk(v.Elem())
		if ch {
			out := reflect.New(t).Elem()
			out.Set(e)
			return out, true
		}
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			break
		}
		var out reflect.Value
		for i := range v.Len() {
			e, ch := w.walk(v.Index(i))
			if !ch {
				continue
			}
			if !out.IsValid() {
				if v.Kind() == reflect.Slice {
					out = reflect.MakeSlice(t, v.Len(), v.Len())
					reflect.Copy(out, v)
				} else {
					out = reflect.New(t).Elem()
					out.Set(v)
				}
			}
			out.Index(i).Set(e)
		}
		if out.IsValid() {
			return out, true
		}
	case reflect.Map:
		if v.IsNil() {
			break
		}
		var changed []reflect.Value // key, value pairs
		it := v.MapRange()
		for it.Next() {
			if e, ch := w.walk(it.Value()); ch {
				changed = append(changed, it.Key(), e)
			}
		}
		if len(changed) > 0 {
			out := reflect.MakeMapWithSize(t, v.Len())
			it := v.MapRange()
			for it.Next() {
				out.SetMapIndex(it.Key(), it.Value())
			}
			for i := 0; i < len(changed); i += 2 {
				out.SetMapIndex(changed[i], changed[i+1])
			}
			return out, true
		}
	}
	return v, false
}
