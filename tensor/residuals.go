package tensor

import (
	"fmt"
	"slices"
	"strings"
	"unsafe"
)

// Residual is a tensor that a backward pass keeps alive, with the label of
// the op that produced it ("input" for values from outside the trace:
// leaves, parameters and constants).
type Residual struct {
	Tensor *Tensor
	Label  string
}

// ResidualHolder is implemented by op states (see Op.ImplN) that keep
// tensors for backward, so that Residuals can count them.
type ResidualHolder interface {
	Residuals() []Residual
}

// ResidualStat counts residuals.
type ResidualStat struct {
	Count int
	Bytes int
}

// ResidualReport says what the backward pass of a graph will keep alive:
// totals and a break-down by producing op (or by the name given with
// Named). Tensors that share storage are counted once.
type ResidualReport struct {
	ResidualStat
	ByLabel map[string]ResidualStat
}

// Activations returns the totals without the "input" label: the memory a
// backward pass holds beyond the parameters and inputs that exist anyway.
func (r ResidualReport) Activations() ResidualStat {
	in := r.ByLabel["input"]
	return ResidualStat{Count: r.Count - in.Count, Bytes: r.Bytes - in.Bytes}
}

// String prints the report as a small table, largest first.
func (r ResidualReport) String() string {
	labels := make([]string, 0, len(r.ByLabel))
	for l := range r.ByLabel {
		labels = append(labels, l)
	}
	slices.SortFunc(labels, func(a, b string) int {
		if d := r.ByLabel[b].Bytes - r.ByLabel[a].Bytes; d != 0 {
			return d
		}
		return strings.Compare(a, b)
	})
	var b strings.Builder
	fmt.Fprintf(&b, "residuals: %d tensors, %d bytes\n", r.Count, r.Bytes)
	for _, l := range labels {
		s := r.ByLabel[l]
		fmt.Fprintf(&b, "  %-16s %4d tensors %12d bytes\n", l, s.Count, s.Bytes)
	}
	return b.String()
}

// Residuals reports what the backward pass from outs will keep alive: the
// tensors saved by the VJPs of the nodes of the innermost trace among outs
// (and, inside checkpoints and shard.Map calls, what those keep). Call it
// before Backward, which frees residuals as it goes.
func Residuals(outs ...*Tensor) ResidualReport {
	var tr *Trace
	for _, o := range outs {
		if o.node != nil && (tr == nil || o.node.trace.id > tr.id) {
			tr = o.node.trace
		}
	}
	rep := ResidualReport{ByLabel: map[string]ResidualStat{}}
	if tr == nil {
		return rep
	}
	type key struct {
		p  unsafe.Pointer
		dt DType
	}
	type entry struct {
		bytes int
		label string
	}
	kept := map[key]entry{} // per storage: the largest view seen
	count := func(t *Tensor, label string) {
		var p unsafe.Pointer
		switch t.dtype {
		case Float32:
			p = unsafe.Pointer(unsafe.SliceData(t.f32))
		case Int32:
			p = unsafe.Pointer(unsafe.SliceData(t.i32))
		case Bool:
			p = unsafe.Pointer(unsafe.SliceData(t.b))
		}
		if p == nil || t.Size() == 0 {
			return
		}
		k := key{p, t.dtype}
		if e, ok := kept[k]; !ok || t.Bytes() > e.bytes {
			kept[k] = entry{t.Bytes(), label}
		}
	}
	seen := map[*node]bool{}
	var stack []*node
	for _, o := range outs {
		if o.node != nil && o.node.trace == tr && !seen[o.node] {
			seen[o.node] = true
			stack = append(stack, o.node)
		}
	}
	for len(stack) > 0 {
		n := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range n.inputs {
			if e.n != nil && !seen[e.n] {
				seen[e.n] = true
				stack = append(stack, e.n)
			}
		}
		if n.freed || n.op == leafOp {
			continue
		}
		save := n.op.saveMask(n.params)
		for k, x := range n.ins {
			if !save.input(k) || x == nil {
				continue
			}
			label := "input"
			if e := n.inputs[k]; e.n != nil && e.n.op != leafOp {
				label = e.n.info().Label
			}
			count(x, label)
		}
		if save&SaveOutput != 0 {
			for _, o := range n.outs {
				count(o, n.info().Label)
			}
		}
		if h, ok := n.state.(ResidualHolder); ok {
			for _, r := range h.Residuals() {
				count(r.Tensor, r.Label)
			}
		}
	}
	for _, e := range kept {
		s := rep.ByLabel[e.label]
		s.Count++
		s.Bytes += e.bytes
		rep.ByLabel[e.label] = s
		rep.Count++
		rep.Bytes += e.bytes
	}
	return rep
}
