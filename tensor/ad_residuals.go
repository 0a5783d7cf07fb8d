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
	// Device is the ID of the shard.Map device whose backward pass keeps
	// the tensor, or -1 for the calling goroutine's own graph.
	Device int
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
	// ByDevice breaks down what shard.Map devices keep (by device ID);
	// the graph of the calling goroutine is under -1.
	ByDevice map[int]ResidualStat
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
	rep := ResidualReport{ByLabel: map[string]ResidualStat{}, ByDevice: map[int]ResidualStat{}}
	type key struct {
		p      unsafe.Pointer
		dt     DType
		device int
	}
	kept := map[key]Residual{} // per storage: the largest view seen
	var all []Residual
	for _, r := range ResidualTensors(outs...) {
		// A placed residual is kept by the devices holding its blocks.
		if bl, ok := r.Tensor.layout.(BlockLayout); ok && !shapeOnly(r.Tensor.layout) {
			blocks, devs := bl.DeviceBlocks()
			for i, b := range blocks {
				if b == nil {
					continue // a device of another process (a mesh over several)
				}
				all = append(all, Residual{Tensor: b, Label: r.Label, Device: devs[i]})
			}
			continue
		}
		all = append(all, r)
	}
	for _, r := range all {
		t := r.Tensor
		var p unsafe.Pointer
		switch t.dtype {
		case Float32:
			p = unsafe.Pointer(unsafe.SliceData(t.f32))
		case Int32:
			p = unsafe.Pointer(unsafe.SliceData(t.i32))
		case Bool:
			p = unsafe.Pointer(unsafe.SliceData(t.b))
		case BFloat16, Float16:
			p = unsafe.Pointer(unsafe.SliceData(t.u16))
		case Float64:
			p = unsafe.Pointer(unsafe.SliceData(t.f64))
		case Int64:
			p = unsafe.Pointer(unsafe.SliceData(t.i64))
		case Uint8:
			p = unsafe.Pointer(unsafe.SliceData(t.u8))
		}
		if p == nil || t.Size() == 0 {
			continue
		}
		k := key{p, t.dtype, r.Device}
		if e, ok := kept[k]; !ok || t.Bytes() > e.Tensor.Bytes() {
			kept[k] = r
		}
	}
	for _, r := range kept {
		b := r.Tensor.Bytes()
		add := func(s ResidualStat) ResidualStat { return ResidualStat{s.Count + 1, s.Bytes + b} }
		rep.ByLabel[r.Label] = add(rep.ByLabel[r.Label])
		rep.ByDevice[r.Device] = add(rep.ByDevice[r.Device])
		rep.ResidualStat = add(rep.ResidualStat)
	}
	return rep
}

// ResidualTensors lists the tensors behind Residuals, unaggregated: each
// with the label of its producer and the device whose graph keeps it.
func ResidualTensors(outs ...*Tensor) []Residual {
	var tr *Trace
	for _, o := range outs {
		if o.node != nil && (tr == nil || o.node.trace.id > tr.id) {
			tr = o.node.trace
		}
	}
	if tr == nil {
		return nil
	}
	var res []Residual
	add := func(t *Tensor, label string) {
		res = append(res, Residual{Tensor: t, Label: label, Device: -1})
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
			add(x, label)
		}
		if save&SaveOutput != 0 {
			for _, o := range n.outs {
				add(o, n.info().Label)
			}
		}
		if h, ok := n.state.(ResidualHolder); ok {
			res = append(res, h.Residuals()...)
		}
	}
	return res
}
