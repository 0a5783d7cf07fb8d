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
	// Graph counts what the graph keeps besides the residuals' data, on
	// the calling goroutine: its nodes (Count), and their bytes with the
	// headers of the values they save. On small tensors (a recurrence's
	// steps, say) it may exceed the residuals.
	Graph   ResidualStat
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
	fmt.Fprintf(&b, "residuals: %d tensors, %d bytes (graph: %d nodes, %d bytes)\n", r.Count, r.Bytes, r.Graph.Count, r.Graph.Bytes)
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
		if bl, ok := r.Tensor.layout().(BlockLayout); ok && !shapeOnly(r.Tensor.layout()) {
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
			p = unsafe.Pointer(unsafe.SliceData(t.f32()))
		case Int32:
			p = unsafe.Pointer(unsafe.SliceData(t.i32()))
		case Bool:
			p = unsafe.Pointer(unsafe.SliceData(t.b()))
		case BFloat16, Float16:
			p = unsafe.Pointer(unsafe.SliceData(t.u16()))
		case Float64:
			p = unsafe.Pointer(unsafe.SliceData(t.f64()))
		case Int64:
			p = unsafe.Pointer(unsafe.SliceData(t.i64()))
		case Uint8:
			p = unsafe.Pointer(unsafe.SliceData(t.u8()))
		}
		if p == nil || t.Size() == 0 {
			continue
		}
		k := key{p, t.dtype, r.Device}
		if e, ok := kept[k]; !ok || t.Bytes() > e.Tensor.Bytes() {
			kept[k] = r
		}
	}
	for _, n := range graphNodes(outs) {
		rep.Graph.Count++
		rep.Graph.Bytes += n.bytes()
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
	var res []Residual
	add := func(t *Tensor, label string) {
		res = append(res, Residual{Tensor: t, Label: label, Device: -1})
	}
	for _, n := range graphNodes(outs) {
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

// graphNodes returns the nodes of the innermost trace among outs that
// outs depend on, leaves included.
func graphNodes(outs []*Tensor) []*node {
	var tr *Trace
	for _, o := range outs {
		if o.node != nil && (tr == nil || o.node.trace.id > tr.id) {
			tr = o.node.trace
		}
	}
	if tr == nil {
		return nil
	}
	return reachable(tr, outs)
}

// reachable returns the nodes of trace tr that ys depend on (their own
// included), in no particular order.
func reachable(tr *Trace, ys []*Tensor) []*node {
	// The nodes seen, a bit by sequence number: every node of tr has a
	// number of its own, at most tr's count once ys exist.
	var small [8]uint64
	seen := small[:]
	if k := int(tr.seq.Load()/64) + 1; k > len(small) {
		seen = make([]uint64, k)
	}
	nodes := make([]*node, 0, 16)
	for _, y := range ys {
		if y.node != nil && y.node.trace == tr && !markSeen(seen, y.node) {
			nodes = append(nodes, y.node)
		}
	}
	for i := 0; i < len(nodes); i++ {
		for _, e := range nodes[i].inputs {
			if e.n != nil && !markSeen(seen, e.n) {
				nodes = append(nodes, e.n)
			}
		}
	}
	return nodes
}

// markSeen sets n's bit in seen and reports whether it was set.
func markSeen(seen []uint64, n *node) bool {
	w, bit := n.seq/64, uint64(1)<<(n.seq%64)
	was := seen[w]&bit != 0
	seen[w] |= bit
	return was
}

// bytes returns what node n keeps besides its residuals' data: the node,
// the slices and shapes that did not fit in it, and the headers of the
// values it saves.
func (n *node) bytes() int {
	b := int(unsafe.Sizeof(*n))
	if n.op != leafOp {
		b += int(unsafe.Sizeof(nodeBuf{}))
	} else {
		b += int(unsafe.Sizeof(leafRec{}.aval))
	}
	ptr, hdr := int(unsafe.Sizeof((*Tensor)(nil))), int(unsafe.Sizeof(Tensor{}))
	if len(n.inputs) > nodeInline {
		b += len(n.inputs) * (int(unsafe.Sizeof(edge{})) + ptr)
	}
	if len(n.avals) > nodeInline+1 {
		b += len(n.avals) * int(unsafe.Sizeof(avalRec{}))
	}
	if len(n.outs) > 1 {
		b += len(n.outs) * ptr
	}
	for i := range n.avals {
		if a := n.avals[i].shape; len(a) > 0 && !n.ownsDims(a) {
			b += len(a) * int(unsafe.Sizeof(0))
		}
	}
	for _, x := range n.ins {
		if x != nil {
			b += hdr
		}
	}
	for _, x := range n.outs {
		if x != nil {
			b += hdr
		}
	}
	return b
}

// ownsDims reports whether shape lies in n's inline storage.
func (n *node) ownsDims(shape []int) bool {
	b := n.buf()
	if b == nil {
		return true // a leaf's: its value's, which the leaf keeps anyway
	}
	p := uintptr(unsafe.Pointer(unsafe.SliceData(shape)))
	lo := uintptr(unsafe.Pointer(&b.dims[0]))
	return p >= lo && p < lo+unsafe.Sizeof(b.dims)
}
