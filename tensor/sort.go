package tensor

import (
	"fmt"
	"math"
	"math/bits"
	"runtime"
	"slices"
)

// Sorting: ArgSort, Sort, TopK and LexSort.
//
// All of them order elements the way jnp.sort does: numbers ascending,
// -0 equal to +0, and every NaN (whatever its sign or payload) after +Inf.
// Equal elements keep their original order (the sorts are stable), also
// when sorting in descending order, where NaNs therefore come first.
//
// Internally each element becomes a uint32 key whose unsigned order is that
// order (inverted for descending sorts). Lanes of 64 elements or more are
// radix sorted, which is stable by construction and linear in the lane
// length; shorter lanes pack key and position into one uint64, so that a
// plain (unstable, fast) sort of the packed words is a stable sort.

// srtKeyF32 maps v to a uint32 whose unsigned order is the sort order:
// the sign bit flipped for positive numbers, all bits for negative ones,
// after mapping -0 to +0 and every NaN above +Inf. Branch-free on ordinary
// numbers, whose signs are unpredictable.
func srtKeyF32(v float32) uint32 {
	b := math.Float32bits(v)
	if e := b &^ (1 << 31); e == 0 || e > 0x7f800000 {
		if e == 0 {
			return 1 << 31 // ±0
		}
		return math.MaxUint32 // NaN, above +Inf (0xff800000)
	}
	return b ^ (uint32(int32(b)>>31) | 1<<31)
}

func srtKeyI32(v int32) uint32 { return uint32(v) ^ (1 << 31) }

func srtKeyBool(v bool) uint32 {
	if v {
		return 1
	}
	return 0
}

// srtFillKeys writes the sort keys of the elements base, base+stride, ...
// of x into keys (inverted when descending, so that ascending order of the
// keys is the wanted order).
func srtFillKeys(x *Tensor, base, stride int, keys []uint32, descending bool) {
	var inv uint32
	if descending {
		inv = math.MaxUint32
	}
	switch x.dtype {
	case Float32:
		xs := x.f32()
		for j := range keys {
			keys[j] = srtKeyF32(xs[base+j*stride]) ^ inv
		}
	case Int32:
		xs := x.i32()
		for j := range keys {
			keys[j] = srtKeyI32(xs[base+j*stride]) ^ inv
		}
	case Float64, Int64, Uint8:
		srtWideKeys(x, base, stride, keys, inv)
	default:
		xs := x.b()
		for j := range keys {
			keys[j] = srtKeyBool(xs[base+j*stride]) ^ inv
		}
	}
}

// srtPack packs a key and a position so that ascending order of the packed
// words is key order with ties broken by lower position.
func srtPack(key uint32, pos int) uint64 { return uint64(key)<<32 | uint64(uint32(pos)) }

// srtRadixMin is the lane length from which lanes are radix sorted rather
// than compared.
const srtRadixMin = 64

// srtSorter sorts lanes of keys stably, reusing its buffers.
type srtSorter struct {
	radix       bool
	keys, keys2 []uint32
	pos, pos2   []int32
	packed      []uint64
}

func newSrtSorter(n int) *srtSorter { return newSrtSorterMode(n, n >= srtRadixMin) }

func newSrtSorterMode(n int, radix bool) *srtSorter {
	s := &srtSorter{radix: radix, keys: make([]uint32, n)}
	if radix {
		s.keys2 = make([]uint32, n)
		s.pos = make([]int32, n)
		s.pos2 = make([]int32, n)
	} else {
		s.packed = make([]uint64, n)
	}
	return s
}

// sort orders s.keys (filled by the caller) stably and calls emit(j, src)
// for each sorted position j with the original position src.
func (s *srtSorter) sort(emit func(j, src int)) {
	n := len(s.keys)
	if n == 0 {
		return
	}
	if !s.radix {
		for j, k := range s.keys {
			s.packed[j] = srtPack(k, j)
		}
		slices.Sort(s.packed)
		for j, w := range s.packed {
			emit(j, int(uint32(w)))
		}
		return
	}
	// LSD radix sort on bytes; passes whose byte is the same for every key
	// (all of them but one for small integer ids) are skipped.
	var cnt [4][256]int
	for _, k := range s.keys {
		cnt[0][k&255]++
		cnt[1][k>>8&255]++
		cnt[2][k>>16&255]++
		cnt[3][k>>24]++
	}
	keys, keys2, pos, pos2 := s.keys, s.keys2, s.pos, s.pos2
	for j := range pos {
		pos[j] = int32(j)
	}
	for pass := range 4 {
		c := &cnt[pass]
		shift := 8 * pass
		if c[keys[0]>>shift&255] == n {
			continue
		}
		sum := 0
		for b, v := range c {
			c[b] = sum
			sum += v
		}
		for i, k := range keys {
			b := k >> shift & 255
			d := c[b]
			c[b]++
			keys2[d] = k
			pos2[d] = pos[i]
		}
		keys, keys2 = keys2, keys
		pos, pos2 = pos2, pos
	}
	for j, src := range pos {
		emit(j, int(src))
	}
}

// srtLanes splits shape around axis: outer lanes before it, n elements
// along it and inner lanes after it. Element j of lane (o, i) is at
// (o*n+j)*inner + i.
func srtLanes(shape []int, axis int) (outer, n, inner int) {
	return numel(shape[:axis]), shape[axis], numel(shape[axis+1:])
}

// srtParallel calls fn on contiguous chunks of [0, n), on several
// goroutines when the work (a rough count of element operations) is large
// and the computation is not one device's block inside shard.Map.
func srtParallel(n, work int, local *Local, fn func(lo, hi int)) {
	p := runtime.GOMAXPROCS(0)
	if local != nil || p < 2 || n < 2 || work < 1<<15 {
		fn(0, n)
		return
	}
	p = min(p, n, max(1, work>>15))
	spread(p, func(c int) int { return n * c / p }, fn)
}

// srtLocal returns the block mark of the first operand that has one: a
// kernel computing on a block inside shard.Map stays on its goroutine.
func srtLocal(xs ...*Tensor) *Local {
	for _, x := range xs {
		if x.local() != nil {
			return x.local()
		}
	}
	return nil
}

// srtScatterAddLanes writes into out, [outer, n, inner], the sums of g,
// [outer, k, inner], element (o, j, i) added to (o, is[o, j, i], i) in
// order of j after a zero; out's rows are computed in chunks of outer
// over the cores, each row by one goroutine.
func srtScatterAddLanes[E float32 | int32 | float64 | int64](out, g []E, is []int32, outer, k, inner, n int, local *Local) {
	srtParallel(outer, outer*(n+2*k)*inner+outer*shortRowWork, local, func(lo, hi int) {
		srtScatterAddRows(out[lo*n*inner:hi*n*inner], g[lo*k*inner:hi*k*inner], is[lo*k*inner:hi*k*inner], hi-lo, k, inner, n)
	})
}

// srtScatterAddRows is srtScatterAddLanes on one goroutine.
func srtScatterAddRows[E float32 | int32 | float64 | int64](out, g []E, is []int32, outer, k, inner, n int) {
	clear(out)
	if inner == 1 {
		// Along the last axis (TopK's gradient into the MoE router's
		// rows of 8): each row's k elements into its n.
		for o := range outer {
			ro, rg, ri := out[o*n:(o+1)*n:(o+1)*n], g[o*k:(o+1)*k], is[o*k:(o+1)*k]
			for j, v := range rg {
				ro[ri[j]] += v
			}
		}
		return
	}
	for o := range outer {
		for j := range k {
			gb := (o*k + j) * inner
			for i := range inner {
				out[(o*n+int(is[gb+i]))*inner+i] += g[gb+i]
			}
		}
	}
}

// srtCopyElem copies flat element j of src to flat element i of dst (same dtype).
func srtCopyElem(dst *Tensor, i int, src *Tensor, j int) {
	switch src.dtype {
	case Float32:
		dst.f32()[i] = src.f32()[j]
	case Int32:
		dst.i32()[i] = src.i32()[j]
	case Float64:
		dst.f64()[i] = src.f64()[j]
	case Int64:
		dst.i64()[i] = src.i64()[j]
	case Uint8:
		dst.u8()[i] = src.u8()[j]
	default:
		dst.b()[i] = src.b()[j]
	}
}

type srtSortParams struct {
	axis       int
	descending bool
}

// srtSortImpl sorts x along axis, writing the permutation into idx (int32,
// x's shape) and, if vals is non-nil, the sorted values.
func srtSortImpl(x *Tensor, p srtSortParams, idx, vals *Tensor) {
	outer, n, inner := srtLanes(x.shape, p.axis)
	lanes := outer * inner
	if n == 0 || lanes == 0 {
		return
	}
	work := lanes * n * max(1, bits.Len(uint(n)))
	is := idx.i32()
	srtParallel(lanes, work, x.local(), func(lo, hi int) {
		st := newSrtSorter(n)
		for l := lo; l < hi; l++ {
			o, i := l/inner, l%inner
			base := o*n*inner + i
			srtFillKeys(x, base, inner, st.keys, p.descending)
			st.sort(func(j, src int) {
				dst := base + j*inner
				is[dst] = int32(src)
				if vals != nil {
					srtCopyElem(vals, dst, x, base+src*inner)
				}
			})
		}
	})
}

func srtCheckSortable(name string, x *Tensor, axis int) int {
	if !x.dtype.valid() {
		panic(fmt.Sprintf("%s: %v: invalid dtype", name, x))
	}
	a := normAxis(name, x, axis)
	if x.shape[a] > math.MaxInt32 {
		panic(fmt.Sprintf("%s: %v: axis %d has more than 2³¹-1 elements", name, x, axis))
	}
	return a
}

var argSortOp, sortOp, topKOp *Op

func init() {
	argSortOp = &Op{
		Name:     "argsort",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: sortAxisParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			x := in[0]
			idx := newTensor(Int32, x.shape)
			srtSortImpl(x, pp.(srtSortParams), idx, nil)
			return idx
		},
		Batch:  srtSortBatch(&argSortOp),
		Traits: Traits{Types: TypesAll},
	}
	sortOp = &Op{
		Name:     "sort",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: sortAxisParams},
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			x := in[0]
			idx := newTensor(Int32, x.shape)
			vals := newTensor(x.dtype, x.shape)
			srtSortImpl(x, pp.(srtSortParams), idx, vals)
			return []*Tensor{vals, idx}, nil
		},
		VJPN: func(gs []*Tensor, in []*Tensor, outs []*Tensor, pp any, _ any) []*Tensor {
			// values[j] = x[perm[j]]: the cotangent of x[perm[j]] is g[j].
			p := pp.(srtSortParams)
			if gs[0] == nil {
				return []*Tensor{ZerosLike(in[0])}
			}
			return []*Tensor{srtScatterAdd(gs[0], outs[1], p.axis, in[0].shape[p.axis])}
		},
		Save: SaveOutput,
		// The values move with the elements: their tangents too.
		JVP: func(_, t, outs []*Tensor, pp any) []*Tensor {
			return []*Tensor{srtGather(t[0], outs[1], pp.(srtSortParams).axis), nil}
		},
		Batch:  srtSortBatch(&sortOp),
		Traits: Traits{Types: TypesAll},
	}
	topKOp = &Op{
		Name:     "top_k",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: func(p any) OpParams { return OpParams{Axes: []int{-1}, N: p.(int)} }},
		ImplN: func(in []*Tensor, pp any) ([]*Tensor, any) {
			x, k := in[0], pp.(int)
			shape := slices.Clone(x.shape)
			shape[len(shape)-1] = k
			vals := newTensor(x.dtype, shape)
			idx := newTensor(Int32, shape)
			srtTopKImpl(x, k, vals, idx)
			return []*Tensor{vals, idx}, nil
		},
		VJPN: func(gs []*Tensor, in []*Tensor, outs []*Tensor, _ any, _ any) []*Tensor {
			x := in[0]
			if gs[0] == nil {
				return []*Tensor{ZerosLike(x)}
			}
			axis := len(x.shape) - 1
			return []*Tensor{srtScatterAdd(gs[0], outs[1], axis, x.shape[axis])}
		},
		Save: SaveOutput,
		JVP: func(x, t, outs []*Tensor, _ any) []*Tensor {
			return []*Tensor{srtGather(t[0], outs[1], len(x[0].shape)-1), nil}
		},
		// The last axis stays the last.
		Batch:  sameOpBatch(&topKOp),
		Traits: Traits{Types: TypesAll},
	}
}

// srtSortBatch is the batching rule of the sorts along an axis.
func srtSortBatch(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, _ []bool, pp any) []*Tensor {
		p := pp.(srtSortParams)
		p.axis++
		return applyAll(*op, p, in)
	}
}

// ArgSort returns the int32 indices that sort x along axis (negative counts
// from the end), like jnp.argsort(x, axis, stable=True, descending=...).
// The sort is stable: equal elements keep their order, in both directions.
// Floats are ordered with -0 == +0 and NaN after every number, so NaNs come
// last in ascending order and first in descending order. Any dtype can be
// sorted (false < true). ArgSort is not differentiable.
func ArgSort(x *Tensor, axis int, descending bool) *Tensor {
	checkNil("tensor.ArgSort", "x", x)
	a := srtCheckSortable("tensor.ArgSort", x, axis)
	return Apply(argSortOp, srtSortParams{a, descending}, x)
}

// Sort returns x sorted along axis (negative counts from the end), ordered
// as ArgSort orders it, like jnp.sort (with descending=True reversed, ties
// and NaNs as in ArgSort). The result is a permutation of x along the axis,
// so -0 and NaN payloads are kept. Sort is differentiable: the cotangent of
// each sorted element goes back to the position it came from.
func Sort(x *Tensor, axis int, descending bool) *Tensor {
	checkNil("tensor.Sort", "x", x)
	a := srtCheckSortable("tensor.Sort", x, axis)
	return ApplyN(sortOp, srtSortParams{a, descending}, x)[0]
}

// TopK returns the k largest elements along the last axis of x, in
// descending order, and their int32 indices, like jax.lax.top_k: both
// results have x's shape with the last dimension k. Equal elements are
// taken lowest index first, and NaN counts as larger than every number.
// The values are differentiable (the cotangent is scattered back to the
// chosen positions; other positions get 0); the indices carry no gradient.
// It panics unless 0 <= k <= x.Dim(-1); x needs at least one dimension.
func TopK(x *Tensor, k int) (values, indices *Tensor) {
	checkNil("tensor.TopK", "x", x)
	if len(x.shape) == 0 {
		panic(fmt.Sprintf("tensor.TopK: %v: needs at least 1 dimension", x))
	}
	srtCheckSortable("tensor.TopK", x, -1)
	n := x.shape[len(x.shape)-1]
	switch {
	case k < 0:
		panic(fmt.Sprintf("tensor.TopK: %v: k=%d < 0", x, k))
	case k > n:
		panic(fmt.Sprintf("tensor.TopK: %v: k=%d > %d", x, k, n))
	}
	outs := ApplyN(topKOp, k, x)
	return outs[0], StopGradient(outs[1])
}

// srtTopKSmall is the largest k that TopK finds by insertion into a
// sorted buffer of k candidates (O(n) for random data, O(n·k) at worst).
const srtTopKSmall = 16

func srtTopKImpl(x *Tensor, k int, vals, idx *Tensor) {
	n := x.shape[len(x.shape)-1]
	rows := numel(x.shape[:len(x.shape)-1])
	if k == 0 || rows == 0 {
		return
	}
	// A unit of this work costs top_k ~2.4 ns (2048 rows of 8, k=2: 59 µs
	// on one Zen 5 core), about 3 of srtParallel's units: weighted so, the
	// MoE router's top 2 of 8 experts for 2048 tokens splits in two.
	work := 3 * rows * (n + k*max(1, bits.Len(uint(k))))
	is := idx.i32()
	if x.dtype == Float32 && k <= srtTopKSmall {
		// The MoE router's top 2 of 8 experts: keys computed as the row
		// is read, the values copied without a call an element (the
		// generic loop below spent more on its calls than on the rows).
		xs, vs := x.f32(), vals.f32()
		srtParallel(rows, work, x.local(), func(lo, hi int) {
			buf := make([]uint64, 0, k)
			for r := lo; r < hi; r++ {
				row := xs[r*n : (r+1)*n]
				buf = buf[:0]
				for j, v := range row {
					buf = srtTopKInsert(buf, k, srtPack(srtKeyF32(v)^math.MaxUint32, j))
				}
				for j, w := range buf {
					src := int32(uint32(w))
					is[r*k+j], vs[r*k+j] = src, row[src]
				}
			}
		})
		return
	}
	srtParallel(rows, work, x.local(), func(lo, hi int) {
		var st *srtSorter
		var buf []uint64
		keys := make([]uint32, n)
		switch {
		case k <= srtTopKSmall:
			buf = make([]uint64, 0, k)
		case n >= srtRadixMin:
			st = newSrtSorter(n)
			keys = st.keys
		default:
			buf = make([]uint64, n)
		}
		for r := lo; r < hi; r++ {
			base := r * n
			emit := func(j, src int) {
				is[r*k+j] = int32(src)
				srtCopyElem(vals, r*k+j, x, base+src)
			}
			srtFillKeys(x, base, 1, keys, true)
			switch {
			case k <= srtTopKSmall:
				// buf holds the best candidates so far, best first.
				buf = buf[:0]
				for j, key := range keys {
					buf = srtTopKInsert(buf, k, srtPack(key, j))
				}
				for j, w := range buf {
					emit(j, int(uint32(w)))
				}
			case st != nil:
				st.sort(func(j, src int) {
					if j < k {
						emit(j, src)
					}
				})
			default: // short rows: sort them whole
				for j, key := range keys {
					buf[j] = srtPack(key, j)
				}
				slices.Sort(buf)
				for j, w := range buf[:k] {
					emit(j, int(uint32(w)))
				}
			}
		}
	})
}

// srtTopKInsert inserts the packed candidate w into buf, the best (least)
// candidates so far in ascending order, at most k of them: the worst
// drops out when buf is full.
func srtTopKInsert(buf []uint64, k int, w uint64) []uint64 {
	m := len(buf)
	if m < k {
		buf = buf[:m+1]
	} else if w >= buf[m-1] {
		return buf
	} else {
		m-- // the worst candidate drops out
	}
	for m > 0 && buf[m-1] > w {
		buf[m] = buf[m-1]
		m--
	}
	buf[m] = w
	return buf
}

var lexSortOp *Op

// srtLexRuns writes into perm the stable order by primary, then by
// secondary (jnp.lexsort of two keys): one stable sort by the primary key,
// then each run of equal primary keys, whose positions are increasing,
// sorted stably by the secondary key. That is the order the sort per key
// gives (a stable lexicographic order is unique), but the runs (the MoE
// routing's experts) sort on the workers.
func srtLexRuns(perm []int32, primary, secondary []uint32, local *Local) {
	n := len(perm)
	st := newSrtSorter(n)
	copy(st.keys, primary)
	st.sort(func(j, src int) { perm[j] = int32(src) })
	var starts []int // the first index of each run, then n
	for j := range n {
		if j == 0 || primary[perm[j]] != primary[perm[j-1]] {
			starts = append(starts, j)
		}
	}
	runs := len(starts)
	starts = append(starts, n)
	// ~16 units of srtParallel's work an element: four radix passes.
	srtParallel(runs, 16*n, local, func(lo, hi int) {
		longest := 0
		for r := lo; r < hi; r++ {
			longest = max(longest, starts[r+1]-starts[r])
		}
		// Buffers for the longest run, each run sorting in a prefix.
		buf := newSrtSorterMode(longest, true)
		buf.packed = make([]uint64, longest)
		prev := make([]int32, longest)
		for r := lo; r < hi; r++ {
			a, b := starts[r], starts[r+1]
			m := b - a
			if m < 2 {
				continue
			}
			rs := srtSorter{radix: m >= srtRadixMin, keys: buf.keys[:m], keys2: buf.keys2[:m],
				pos: buf.pos[:m], pos2: buf.pos2[:m], packed: buf.packed[:m]}
			copy(prev, perm[a:b])
			for j, src := range prev[:m] {
				rs.keys[j] = secondary[src]
			}
			rs.sort(func(j, src int) { perm[a+j] = prev[src] })
		}
	})
}

func init() {
	lexSortOp = &Op{
		Name: "lexsort",
		Impl: func(in []*Tensor, _ any) *Tensor {
			n := in[0].shape[0]
			out := newTensor(Int32, []int{n})
			keys := make([][]uint32, len(in))
			for i := range in {
				// Last key first: it is the primary one.
				x := in[len(in)-1-i]
				ks := make([]uint32, n)
				srtFillKeys(x, 0, 1, ks, false)
				keys[i] = ks
			}
			if len(keys) == 2 {
				srtLexRuns(out.i32(), keys[0], keys[1], srtLocal(in...))
				return out
			}
			// One stable sort per key, the least significant first: each
			// pass keeps the order of the previous one among its ties,
			// and the first keeps the positions'.
			d := out.i32()
			for j := range d {
				d[j] = int32(j)
			}
			st := newSrtSorter(n)
			prev := make([]int32, n)
			for i := len(keys) - 1; i >= 0; i-- {
				copy(prev, d)
				for j, src := range prev {
					st.keys[j] = keys[i][src]
				}
				st.sort(func(j, src int) { d[j] = prev[src] })
			}
			return out
		},
		// The examples' keys end to end, the example number as the most
		// significant key: one stable sort orders every example apart,
		// as a loop would.
		Batch: func(in []*Tensor, batched []bool, _ any) []*Tensor {
			keys := materializeAll(in, batched)
			b, n := keys[0].shape[0], keys[0].shape[1]
			for i, k := range keys {
				keys[i] = Reshape(k, -1)
			}
			ex := Reshape(BroadcastTo(Reshape(Arange(b), b, 1), b, n), -1)
			perm := Reshape(LexSort(append(keys, ex)...), b, n)
			return one1(Sub(perm, Reshape(Mul(Arange(b), ScalarInt(int32(n))), b, 1)))
		},
		Traits: Traits{Types: TypesAll},
	}
}

// LexSort returns the int32 permutation that sorts by several keys, like
// jnp.lexsort: the LAST key is the primary one, the one before it breaks
// its ties, and so on; remaining ties keep their original order (stable).
// Keys are 1-D, of one length, and may be float32, int32 or bool (each is
// ordered as in ArgSort, so NaNs sort last). LexSort is not
// differentiable. It panics with no keys.
func LexSort(keys ...*Tensor) *Tensor {
	checkNotNil("tensor.LexSort", "keys", keys)
	if len(keys) == 0 {
		panic("tensor.LexSort: no keys")
	}
	for i, k := range keys {
		if !k.dtype.valid() {
			panic(fmt.Sprintf("tensor.LexSort: %s: key %d has an invalid dtype", operands("", keys...), i))
		}
		if len(k.shape) != 1 {
			panic(fmt.Sprintf("tensor.LexSort: %s: key %d is %v, want 1-D", operands("", keys...), i, k))
		}
		if k.shape[0] != keys[0].shape[0] {
			panic(fmt.Sprintf("tensor.LexSort: %s: keys have different lengths (%d and %d)",
				operands("", keys...), keys[0].shape[0], k.shape[0]))
		}
	}
	if keys[0].shape[0] > math.MaxInt32 {
		panic(fmt.Sprintf("tensor.LexSort: %v: more than 2³¹-1 elements", keys[0]))
	}
	return Apply(lexSortOp, nil, keys...)
}

// Gather and scatter-add along an axis, the two halves of the VJPs of Sort
// and TopK. Each is the other's VJP, so derivatives of any order work.
// They are private stand-ins written while TakeAlongAxis and ScatterAdd
// were being written elsewhere; the public ops can replace them.

type srtAlongParams struct {
	axis int
	n    int // scatter: the length of the result along axis
}

var srtGatherOp, srtScatterAddOp *Op

func init() {
	srtGatherOp = &Op{
		Name:     "srt_take_along_axis",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: srtAlongAxisParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			x, idx := in[0], in[1]
			p := pp.(srtAlongParams)
			out := newTensor(x.dtype, idx.shape)
			outer, n, inner := srtLanes(x.shape, p.axis)
			k := idx.shape[p.axis]
			is := idx.i32()
			for o := 0; o < outer; o++ {
				for j := 0; j < k; j++ {
					ob := (o*k + j) * inner
					for i := 0; i < inner; i++ {
						src := int(is[ob+i])
						srtCopyElem(out, ob+i, x, (o*n+src)*inner+i)
					}
				}
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(srtAlongParams)
			return []*Tensor{srtScatterAdd(g, in[1], p.axis, in[0].shape[p.axis]), nil}
		},
		Save:   SaveInputs(1),
		JVP:    linearJVP(&srtGatherOp),
		Batch:  srtAlongBatch(&srtGatherOp),
		Traits: Traits{Types: TypesAll},
	}
	srtScatterAddOp = &Op{
		Name:     "srt_scatter_add_along_axis",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: srtAlongAxisParams},
		Impl: func(in []*Tensor, pp any) *Tensor {
			g, idx := in[0], in[1]
			p := pp.(srtAlongParams)
			shape := slices.Clone(g.shape)
			shape[p.axis] = p.n
			out := newOutUninit(g.dtype, shape) // every row cleared, then summed into
			outer, k, inner := srtLanes(g.shape, p.axis)
			is, local := idx.i32(), srtLocal(g, idx)
			switch g.dtype {
			case Float32:
				srtScatterAddLanes(out.f32(), g.f32(), is, outer, k, inner, p.n, local)
			case Int32:
				srtScatterAddLanes(out.i32(), g.i32(), is, outer, k, inner, p.n, local)
			case Float64:
				srtScatterAddLanes(out.f64(), g.f64(), is, outer, k, inner, p.n, local)
			case Int64:
				srtScatterAddLanes(out.i64(), g.i64(), is, outer, k, inner, p.n, local)
			}
			return out
		},
		VJP: func(g *Tensor, in []*Tensor, _ *Tensor, pp any) []*Tensor {
			p := pp.(srtAlongParams)
			return []*Tensor{srtGather(g, in[1], p.axis), nil}
		},
		Save:   SaveInputs(1),
		JVP:    linearJVP(&srtScatterAddOp),
		Batch:  srtAlongBatch(&srtScatterAddOp),
		Traits: Traits{Types: TypesFloat64 | TypesInt64},
	}
}

// srtAlongBatch is the batching rule of srtGather and srtScatterAdd: both
// operands given the batch, the axis past it.
func srtAlongBatch(op **Op) func([]*Tensor, []bool, any) []*Tensor {
	return func(in []*Tensor, batched []bool, pp any) []*Tensor {
		p := pp.(srtAlongParams)
		p.axis++
		return applyAll(*op, p, materializeAll(in, batched))
	}
}

// srtGather returns out with out[..., j, ...] = x[..., idx[..., j, ...], ...]
// along axis; idx has x's shape except along axis.
func srtGather(x, idx *Tensor, axis int) *Tensor {
	return Apply(srtGatherOp, srtAlongParams{axis: axis}, x, idx)
}

// srtScatterAdd is the transpose of srtGather: a tensor of g's shape with
// n along axis, holding at [..., idx[..., j, ...], ...] the sum of the
// g[..., j, ...] sent there.
func srtScatterAdd(g, idx *Tensor, axis, n int) *Tensor {
	return Apply(srtScatterAddOp, srtAlongParams{axis: axis, n: n}, g, idx)
}

// sortAxisParams describes the axis of sort and argsort.
func sortAxisParams(p any) OpParams { return OpParams{Axes: []int{p.(srtSortParams).axis}} }

// srtAlongAxisParams describes the axis of the take and scatter-add along
// an axis of sort's VJPs.
func srtAlongAxisParams(p any) OpParams { return OpParams{Axes: []int{p.(srtAlongParams).axis}} }
