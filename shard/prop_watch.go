package shard

import (
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/gonox/gonox/tensor"
)

// A watcher observes the ops that propagation computes on a mesh's
// devices: it counts their communication (Record), refuses the gather
// fallback (Strict) or logs every op (Explain).
type watcher struct {
	comm   *Comm
	strict bool
	log    *explainLog
}

var watchMu sync.Mutex // serialises changes to the devices' watcher lists

// watch adds w to every device of m until the returned stop is called.
func watch(m *Mesh, w *watcher) (stop func()) {
	watchMu.Lock()
	defer watchMu.Unlock()
	for _, d := range m.devices {
		var cur []*watcher
		if p := d.watch.Load(); p != nil {
			cur = *p
		}
		next := append(slices.Clone(cur), w)
		d.watch.Store(&next)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			watchMu.Lock()
			defer watchMu.Unlock()
			for _, d := range m.devices {
				p := d.watch.Load()
				if p == nil {
					continue
				}
				next := slices.DeleteFunc(slices.Clone(*p), func(x *watcher) bool { return x == w })
				d.watch.Store(&next)
			}
		})
	}
}

func watchers(d *Device) []*watcher {
	if p := d.watch.Load(); p != nil {
		return *p
	}
	return nil
}

// Record makes c count the communication of every op computed by sharding
// propagation on mesh's devices — the collectives each op inserts, per
// device and kind (Comm.Bytes, Comm.Calls) and per op (Comm.OpBytes) —
// until stop is called. It nests: several Comms may record at once.
//
//	var comm shard.Comm
//	stop := shard.Record(mesh, &comm)
//	loss, grads := autodiff.ValueAndGrad(lossFn)(model)
//	stop()
//	fmt.Print(comm.String())
func Record(mesh *Mesh, c *Comm) (stop func()) {
	if c == nil {
		panic("shard.Record: nil *Comm")
	}
	return watch(mesh, &watcher{comm: c})
}

// Strict makes every op computed on mesh's devices without a sharding
// rule panic instead of gathering its operands (the fallback), until stop
// is called: use it to find where a model leaves the rules.
func Strict(mesh *Mesh) (stop func()) { return watch(mesh, &watcher{strict: true}) }

func strict(m *Mesh) bool {
	for _, w := range watchers(m.devices[0]) {
		if w.strict {
			return true
		}
	}
	return false
}

// charge records a collective c that propagation inserted for op (it
// counts under c's kind, as Map's collectives do): bytes(d) is what device
// index d sends.
func charge(m *Mesh, op string, c *collective, bytes func(d int) int64) {
	var total, most int64
	for d, dev := range m.devices {
		ws := watchers(dev)
		if len(ws) == 0 {
			continue
		}
		b := bytes(d)
		total += b
		most = max(most, b)
		for _, w := range ws {
			if w.comm != nil {
				w.comm.add(dev, c.kind, b)
				w.comm.addOp(dev, op, b)
			}
		}
	}
	for _, w := range watchers(m.devices[0]) {
		if w.comm != nil {
			w.comm.count(c.kind)
		}
		if w.log != nil {
			w.log.collective(op, c.kind, most)
		}
	}
}

// explainLog collects the lines Explain prints.
type explainLog struct {
	mu    sync.Mutex
	lines []string
	cur   *strings.Builder
}

func (l *explainLog) begin(op string, in []*tensor.Tensor, note string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%-22s", op)
	for i, x := range in {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(typeOf(x))
	}
	if note != "" {
		fmt.Fprintf(&b, "  [%s]", note)
	}
	l.cur = &b
}

func (l *explainLog) collective(op, kind string, bytes int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur != nil {
		fmt.Fprintf(l.cur, "\n    %s %d B/device", kind, bytes)
		return
	}
	// a move between ops: a cotangent laid out like its input, a constraint
	l.lines = append(l.lines, fmt.Sprintf("%-22s%s %d B/device", "  move for "+op, kind, bytes))
}

func (l *explainLog) end(outs []*tensor.Tensor) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.cur == nil {
		return
	}
	parts := make([]string, len(outs))
	for i, o := range outs {
		parts[i] = typeOf(o)
	}
	s := l.cur.String()
	head, rest, _ := strings.Cut(s, "\n")
	line := head + " -> " + strings.Join(parts, ", ")
	if rest != "" {
		line += "\n" + rest
	}
	l.lines = append(l.lines, line)
	l.cur = nil
}

// typeOf prints x in JAX's type notation, with pending-sum axes.
func typeOf(x *tensor.Tensor) string {
	s := x.Type()
	if l, ok := x.Layout().(*layout); ok && len(l.partial) > 0 {
		s += "{partial " + axesLabel(l.partial) + "}"
	}
	return s
}

func explainLogs(m *Mesh) []*explainLog {
	var out []*explainLog
	for _, w := range watchers(m.devices[0]) {
		if w.log != nil {
			out = append(out, w.log)
		}
	}
	return out
}

// Explain runs f and returns, for every op that propagation computed on
// mesh's devices during the call, a line with the op, its operand and
// result types in JAX's notation (float32[1024@dp,256@tp], with
// "{partial dp}" for a pending sum) and, indented below, the collectives
// it inserted with the bytes each device sends — what a user reads to
// see where communication comes from:
//
//	matmul                float32[1024@dp,4096], float32[4096,256@tp] -> float32[1024@dp,256@tp]
//	reduce_sum            float32[1024@dp,256@tp] -> float32[]{partial (dp,tp)}
//	mulScalar ...
//
// Ops without a rule are marked "[no rule: gather]". Moves between ops
// (a cotangent laid out like its input, a Constraint) get their own line.
func Explain(mesh *Mesh, f func()) string {
	l := &explainLog{}
	stop := watch(mesh, &watcher{log: l})
	defer stop()
	f()
	l.mu.Lock()
	defer l.mu.Unlock()
	return strings.Join(l.lines, "\n") + "\n"
}
