package tensor

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// String returns the type of t in the short notation used by error messages
// and pytree.Format: "f32[3,4]", "i32[]", and for sharded arrays and
// shard.Map blocks the JAX forms "f32[1024@dp,4096]", "f32[8@(dp,tp)]" and
// "f32[256,4096]{dp}". Use Type for JAX's long dtype names and Values (or a
// numeric fmt verb) for the elements.
func (t *Tensor) String() string {
	if t == nil {
		return "<nil>"
	}
	return t.typeString(t.dtype.Abbrev())
}

// Type returns the type of t in JAX's notation, as printed by jax.typeof:
// "float32[1024@dp,4096]", "int32[8@(tp,dp)]", "float32[256,128]{dp,tp}".
func (t *Tensor) Type() string { return t.typeString(t.dtype.String()) }

func (t *Tensor) typeString(dt string) string {
	var b strings.Builder
	b.WriteString(dt)
	b.WriteByte('[')
	for i, d := range t.shape {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(d))
		if t.layout() != nil {
			if s := t.layout().DimAxes(i); s != "" {
				b.WriteByte('@')
				b.WriteString(s)
			}
		}
	}
	b.WriteByte(']')
	if t.local() != nil && t.local().Mask != 0 {
		b.WriteByte('{')
		b.WriteString(strings.Join(t.local().AxisNames(), ","))
		b.WriteByte('}')
	}
	return b.String()
}

// Values returns the elements of t printed like NumPy does, for example
//
//	[[0 1 2 3]
//	 [4 5 6 7]]
//
// Tensors with more than 1000 elements are summarised with "...". Floats
// are printed as by strconv (shortest representation for %g), except that
// NaN and infinities print as NumPy's nan, inf and -inf; empty tensors
// print as [].
func (t *Tensor) Values() string { return t.formatValues('g', -1) }

// Format implements fmt.Formatter. The verbs %v and %s print the type (as
// String does); numeric verbs print the values: %d for integers, %g, %e
// and %f (with optional precision; %G, %E and %F too) for every dtype.
func (t *Tensor) Format(f fmt.State, verb rune) {
	switch verb {
	case 'd', 'g', 'e', 'f', 'G', 'E', 'F':
		prec, ok := f.Precision()
		if !ok {
			prec = -1
		}
		switch verb {
		case 'd':
			verb = 'g'
		case 'F': // a synonym of %f in fmt; strconv has no 'F'
			verb = 'f'
		}
		fmt.Fprint(f, t.formatValues(byte(verb), prec))
	case 'q':
		fmt.Fprintf(f, "%q", t.String())
	default:
		fmt.Fprint(f, t.String())
	}
}

const (
	summaryThreshold = 1000
	edgeItems        = 3
)

func (t *Tensor) formatValues(verb byte, prec int) string {
	h := t.host("Tensor.Format")
	elem := func(i int) string {
		switch h.dtype {
		case Float32:
			v := float64(h.f32()[i])
			switch {
			case math.IsNaN(v):
				return "nan"
			case math.IsInf(v, 1):
				return "inf"
			case math.IsInf(v, -1):
				return "-inf"
			}
			return strconv.FormatFloat(v, verb, prec, 32)
		case Int32:
			return strconv.Itoa(int(h.i32()[i]))
		case Bool:
			if h.b()[i] {
				return "true"
			}
			return "false"
		case BFloat16, Float16:
			return formatHalf(h, i, verb, prec)
		case Float64:
			v := h.f64()[i]
			switch {
			case math.IsNaN(v):
				return "nan"
			case math.IsInf(v, 1):
				return "inf"
			case math.IsInf(v, -1):
				return "-inf"
			}
			return strconv.FormatFloat(v, verb, prec, 64)
		case Int64:
			return strconv.FormatInt(h.i64()[i], 10)
		case Uint8:
			return strconv.Itoa(int(h.u8()[i]))
		}
		return "?"
	}
	if len(h.shape) == 0 {
		return elem(0)
	}
	if h.Size() == 0 {
		return "[]" // NumPy prints every empty array so
	}
	summarize := h.Size() > summaryThreshold
	// First pass: the width of the widest element that will be printed.
	width := 0
	strides := contiguousStrides(h.shape)
	var visit func(dim, off int, fn func(off int))
	visit = func(dim, off int, fn func(off int)) {
		if dim == len(h.shape) {
			fn(off)
			return
		}
		n := h.shape[dim]
		for i := 0; i < n; i++ {
			if summarize && n > 2*edgeItems && i == edgeItems {
				i = n - edgeItems
			}
			visit(dim+1, off+i*strides[dim], fn)
		}
	}
	visit(0, 0, func(off int) {
		if w := len(elem(off)); w > width {
			width = w
		}
	})
	var b strings.Builder
	var write func(dim, off int)
	write = func(dim, off int) {
		b.WriteByte('[')
		n := h.shape[dim]
		for i := 0; i < n; i++ {
			if i > 0 {
				if dim == len(h.shape)-1 {
					b.WriteByte(' ')
				} else {
					b.WriteString(strings.Repeat("\n", len(h.shape)-1-dim))
					b.WriteString(strings.Repeat(" ", dim+1))
				}
			}
			if summarize && n > 2*edgeItems && i == edgeItems {
				b.WriteString("...")
				if dim < len(h.shape)-1 {
					b.WriteString(strings.Repeat("\n", len(h.shape)-1-dim))
					b.WriteString(strings.Repeat(" ", dim+1))
				} else {
					b.WriteByte(' ')
				}
				i = n - edgeItems
			}
			if dim == len(h.shape)-1 {
				s := elem(off + i*strides[dim])
				b.WriteString(strings.Repeat(" ", width-len(s)))
				b.WriteString(s)
			} else {
				write(dim+1, off+i*strides[dim])
			}
		}
		b.WriteByte(']')
	}
	write(0, 0)
	return b.String()
}
