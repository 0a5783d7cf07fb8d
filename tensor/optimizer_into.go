package tensor

import (
	"cmp"
	"fmt"
	"slices"
	"unsafe"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// AdamStepsInto is AdamSteps writing each new parameter into dst[i]'s
// storage instead of fresh storage (destination first, as gonum's
// methods): a training step whose next parameters must end up in a
// buffer it does not own, such as the shared result of package shard's
// all-gather (shard.GatherTarget), saves copying them there. A nil dst
// (or a nil dst[i]) leaves parameter i to AdamSteps. The results are the
// bits of AdamSteps; p2[i] is a header of its own over dst[i]'s storage,
// with the logical axes of ps[i] and, inside shard.Map, the block mark of
// parameter i's operands (as AdamStep's result), and the moments are
// fresh.
//
// A non-nil dst[i] is a float32 tensor of ps[i]'s shape, untraced, not
// placed, and shares no storage with an operand or another destination,
// except that it may be ps[i] itself (each element is read before it is
// written). The operands of such a parameter are float32 tensors that
// are neither traced nor batched (Vmap) nor placed: blocks inside
// shard.Map are fine. The call panics otherwise. Those parameters are
// updated on the calling goroutine inside shard.Map and split over the
// cores together outside it, as AdamSteps does. It is not
// differentiable.
func AdamStepsInto(dst, ps, gs, mus, nus []*Tensor, cs []AdamCoeffs) (p2, mu2, nu2 []*Tensor) {
	return adamStepsInto("tensor.AdamStepsInto", dst, ps, gs, mus, nus, cs, false)
}

// AdamStepsIntoOverMoments is AdamStepsInto for a caller whose old
// moments are dead once it returns, as a training step that replaces its
// optimizer state: the new moments of each parameter with a destination
// are written over its old moments' storage (each element read before it
// is written) rather than into fresh storage, so the update streams no
// output buffer but dst's. The moments' storage then holds the new values
// whatever other headers hold it: the caller must not read mus[i] or
// nus[i] (nor another header over their storage) after the call, and
// remains their owner (donating them drops their holds only: mu2[i] and
// nu2[i] are headers of their own over the same storage). A moment whose
// storage overlaps another operand, but for being that moment itself, is
// written to fresh storage. The results are the bits of AdamSteps.
func AdamStepsIntoOverMoments(dst, ps, gs, mus, nus []*Tensor, cs []AdamCoeffs) (p2, mu2, nu2 []*Tensor) {
	return adamStepsInto("tensor.AdamStepsIntoOverMoments", dst, ps, gs, mus, nus, cs, true)
}

// adamStepsInto is AdamStepsInto, and AdamStepsIntoOverMoments if over.
func adamStepsInto(op string, dst, ps, gs, mus, nus []*Tensor, cs []AdamCoeffs, over bool) (p2, mu2, nu2 []*Tensor) {
	in, _ := adamStepsOperands(op, ps, gs, mus, nus, cs)
	k := len(ps)
	if dst != nil && len(dst) != k {
		panic(fmt.Sprintf("%s: %d destinations for %d parameters", op, len(dst), k))
	}
	var into, rest []int // the parameters with a destination, and the others
	for i := range k {
		if dst != nil && dst[i] != nil {
			into = append(into, i)
		} else {
			rest = append(rest, i)
		}
	}
	if len(into) == 0 {
		return AdamSteps(ps, gs, mus, nus, cs)
	}
	ops := make([][]*Tensor, k)
	for i := range k {
		ops[i] = in[4*i : 4*i+4]
	}
	checkInto(op, dst, ops, into)
	p2, mu2, nu2 = make([]*Tensor, k), make([]*Tensor, k), make([]*Tensor, k)
	if len(rest) > 0 {
		pick := func(xs []*Tensor) []*Tensor {
			out := make([]*Tensor, len(rest))
			for j, i := range rest {
				out[j] = xs[i]
			}
			return out
		}
		rc := make([]AdamCoeffs, len(rest))
		for j, i := range rest {
			rc[j] = cs[i]
		}
		rp, rm, rn := AdamSteps(pick(ps), pick(gs), pick(mus), pick(nus), rc)
		for j, i := range rest {
			p2[i], mu2[i], nu2[i] = rp[j], rm[j], rn[j]
		}
	}
	kin := make([]*Tensor, 0, 4*len(into))
	out := make([]*Tensor, 3*len(into))
	kc := make([]AdamCoeffs, len(into))
	for j, i := range into {
		x := in[4*i : 4*i+4]
		kin = append(kin, x...)
		kc[j] = cs[i]
		out[3*j] = intoHeader(op, dst[i], x[0], x)
		for m := 2; m <= 3; m++ {
			if over && alone(in, 4*i+m) {
				out[3*j+m-1] = intoHeader(op, x[m], x[m], x)
				continue
			}
			y := newOutUninit(Float32, x[m].shape)
			if loc := unionOf(op, x); loc != nil {
				y.setLocal(loc)
			}
			out[3*j+m-1] = namedLike(y, x[m])
		}
	}
	adamStepsKernel(kin, out, kc)
	for j, i := range into {
		p2[i], mu2[i], nu2[i] = out[3*j], out[3*j+1], out[3*j+2]
	}
	return p2, mu2, nu2
}

// checkInto panics unless the destinations dst[i] of the parameters into
// and their operands ops[i] (the parameter first) are as AdamStepsInto
// requires of them, naming op.
func checkInto(op string, dst []*Tensor, ops [][]*Tensor, into []int) {
	for _, i := range into {
		d, x := dst[i], ops[i]
		if d.dtype != Float32 || !sameShape(d.shape, x[0].shape) || d.node != nil || d.layout() != nil || d.xv() != nil || d.donated {
			panic(fmt.Sprintf("%s: destination %d %v for parameter %v: want an untraced float32 host tensor of its shape", op, i, d, x[0]))
		}
		for _, t := range x {
			if t.dtype != Float32 || t.node != nil || t.layout() != nil || t.xv() != nil {
				panic(fmt.Sprintf("%s: parameter %d: %s: want untraced, unbatched float32 host operands to write into a destination", op, i, operands(",", x...)))
			}
		}
	}
	// No destination overlaps another one or an operand, but its own
	// parameter's storage exactly. A device's update has many leaves:
	// rather than pair by pair, the destinations sorted by address
	// (disjoint, so their ends are sorted too), each operand's storage
	// looked up among them.
	spans := make([]intoSpan, 0, len(into))
	for _, i := range into {
		if d := dst[i].f32(); len(d) > 0 {
			spans = append(spans, spanOf(i, d))
		}
	}
	slices.SortStableFunc(spans, func(a, b intoSpan) int { return cmp.Compare(a.lo, b.lo) })
	for n := 1; n < len(spans); n++ {
		if a, b := spans[n-1], spans[n]; b.lo < a.hi {
			panic(fmt.Sprintf("%s: destinations %d and %d share storage", op, min(a.i, b.i), max(a.i, b.i)))
		}
	}
	for j, x := range ops {
		for k, t := range x {
			s := t.f32()
			if len(s) == 0 {
				continue
			}
			sp := spanOf(-1, s)
			n, _ := slices.BinarySearchFunc(spans, sp.lo, func(d intoSpan, lo uintptr) int { return cmp.Compare(d.hi, lo+1) })
			for ; n < len(spans) && spans[n].lo < sp.hi; n++ {
				if i := spans[n].i; j != i || k != 0 || !sameSpan(dst[i].f32(), s) {
					panic(fmt.Sprintf("%s: destination %d %v shares storage with operand %v", op, i, dst[i], t))
				}
			}
		}
	}
}

// intoSpan is the storage of destination i: the addresses from its
// first element's, lo, up to past its last, hi.
type intoSpan struct {
	i      int
	lo, hi uintptr
}

// spanOf returns the span of s, the storage of destination i.
func spanOf(i int, s []float32) intoSpan {
	lo := uintptr(unsafe.Pointer(unsafe.SliceData(s)))
	return intoSpan{i, lo, lo + uintptr(len(s))*unsafe.Sizeof(float32(0))}
}

// alone reports whether the storage of operand in[k] overlaps no other
// operand's (nor in[k] at another position), so that a result may be
// written over it.
func alone(in []*Tensor, k int) bool {
	d := in[k].f32()
	if len(d) == 0 {
		return false
	}
	for j, t := range in {
		if j != k && overlaps(d, t.f32()) {
			return false
		}
	}
	return true
}

// intoHeader returns a header of its own over d's storage, for the new
// value of parameter p written there by an op whose operands are in:
// with p's logical axes and the union of the operands' block marks.
func intoHeader(op string, d, p *Tensor, in []*Tensor) *Tensor {
	e := tensorExt{local: unionOf(op, in)}
	if a := p.axes(); len(a) == len(d.shape) {
		e.axes = a // names are never changed once set: shared
	}
	y := &Tensor{dtype: Float32, shape: d.shape, data: d.data, rec: d.rec}
	y.setExt(e) // the mark's record, shared, where e holds a mark and names alone
	y.hold()
	return y
}

// unionOf returns the union of the block marks of in (nil if none has
// one).
func unionOf(op string, in []*Tensor) *Local {
	var loc *Local
	for _, t := range in {
		if t.local() != nil {
			loc = unionLocal(op, loc, t.local())
		}
	}
	return loc
}

// overlaps reports whether slices a and b share an element.
func overlaps(a, b []float32) bool {
	if len(a) == 0 || len(b) == 0 {
		return false
	}
	a0, b0 := uintptr(unsafe.Pointer(unsafe.SliceData(a))), uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	const sz = unsafe.Sizeof(float32(0))
	return a0 < b0+uintptr(len(b))*sz && b0 < a0+uintptr(len(a))*sz
}

// sameSpan reports whether a and b are the same elements.
func sameSpan(a, b []float32) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// SGDStepInto is SGDStep writing the new parameter into dst's storage
// (see AdamStepsInto, whose rules dst and the operands follow; a nil dst
// is SGDStep): p2 is a header of its own over dst's storage, t2 fresh,
// the bits of SGDStep. It is not differentiable.
func SGDStepInto(dst, p, g, t *Tensor, mu, s float32, nesterov bool) (p2, t2 *Tensor) {
	const op = "tensor.SGDStepInto"
	checkNil(op, "p g", p, g)
	if dst == nil {
		return SGDStep(p, g, t, mu, s, nesterov)
	}
	in := []*Tensor{p, g}
	if t != nil {
		in = append(in, t)
	}
	for _, x := range in {
		if !sameShape(x.shape, p.shape) {
			panic(fmt.Sprintf("%s: %s: want tensors of one shape", op, operands(",", in...)))
		}
	}
	checkInto(op, []*Tensor{dst}, [][]*Tensor{in}, []int{0})
	p2 = intoHeader(op, dst, p, in)
	var tr, tr2 []float32
	if t != nil {
		t2 = newOutUninit(Float32, t.shape)
		if loc := unionOf(op, in); loc != nil {
			t2.setLocal(loc)
		}
		t2 = namedLike(t2, t)
		tr, tr2 = t.f32(), t2.f32()
	}
	kernel := func(lo, hi int) {
		var a, b []float32
		if tr != nil {
			a, b = tr2[lo:hi], tr[lo:hi]
		}
		vec.SGDStep(p2.f32()[lo:hi], a, p.f32()[lo:hi], g.f32()[lo:hi], b, mu, s, nesterov)
	}
	n := len(g.f32())
	if serial(n*costCheap, isLocal(in...)) {
		kernel(0, n)
	} else {
		parallelFor(n, costCheap, 8, false, kernel)
	}
	return p2, t2
}
