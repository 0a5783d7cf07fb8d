package tensor

import (
	"fmt"
	"runtime"
	"slices"

	"github.com/gonox/gonox/tensor/internal/gemm"
)

// raggedParams are the static parameters of the grouped products.
type raggedParams struct {
	transW bool // ragged_dot: multiply by w[g]ᵀ instead of w[g]
	// compute is the dtype the products are computed in (RaggedDotAs):
	// 0 or Float32 for float32, else a half dtype that the float32
	// operands are rounded to as the gemm reads them.
	compute DType
}

// raggedOuterParams are ragged_outer's: the number of groups and the
// dtype of the products (see raggedParams).
type raggedOuterParams struct {
	groups  int
	compute DType
}

var raggedDotOp, raggedOuterOp *Op

func init() {
	// ragged_dot: y[rows of group g] = x[rows of g] @ op(w[g]); rows past
	// the last group are 0.
	raggedDotOp = &Op{
		Name: "ragged_dot",
		Impl: func(in []*Tensor, pp any) *Tensor {
			return raggedDotImpl(in[0], in[1], in[2], pp.(*raggedParams))
		},
		VJPNeed: func(gy *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*raggedParams)
			x, w, gs := in[0], in[1], in[2]
			res := make([]*Tensor, 3)
			if gr := roundOnce(gy, p.compute, need, x, w, gs); gr != nil {
				// Both products read gy rounded once, with the bits they
				// would have rounded it to.
				res[0] = raggedDotImpl(gr, w, gs, &raggedParams{transW: !p.transW, compute: p.compute})
				q := &raggedOuterParams{groups: w.shape[0], compute: p.compute}
				if p.transW {
					res[1] = raggedOuterImpl(gr, x, gs, q)
				} else {
					res[1] = raggedOuterImpl(x, gr, gs, q)
				}
				gr.release()
				return res
			}
			if Wants(need, 0) {
				// dx_g = gy_g @ op(w_g)ᵀ
				res[0] = raggedDotIn(gy, w, gs, !p.transW, p.compute)
			}
			if Wants(need, 1) {
				// dW_g = x_gᵀ gy_g, or its transpose when w was used transposed.
				q := &raggedOuterParams{groups: w.shape[0], compute: p.compute}
				if p.transW {
					res[1] = Apply(raggedOuterOp, q, gy, x, gs)
				} else {
					res[1] = Apply(raggedOuterOp, q, x, gy, gs)
				}
			}
			return res
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			p := pp.(*raggedParams)
			var dx, dw *Tensor
			if t[0] != nil {
				dx = raggedDotIn(t[0], x[1], x[2], p.transW, p.compute)
			}
			if t[1] != nil {
				dw = raggedDotIn(x[0], t[1], x[2], p.transW, p.compute)
			}
			return one1(addTangents(dx, dw))
		},
		// The examples' rows end to end, each example's groups followed by
		// a group of zero weights over its rows past the groups (which
		// are then set to 0, as RaggedDot leaves them).
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			xs := materializeAll(in, batched)
			x, w, gs := xs[0], xs[1], xs[2]
			b, m, k := x.shape[0], x.shape[1], x.shape[2]
			gs2, covered := raggedFill(gs, m)
			w2 := Concat(1, w, Zeros(w.dtype, b, 1, w.shape[2], w.shape[3]))
			w2 = Reshape(w2, -1, w.shape[2], w.shape[3])
			p := pp.(*raggedParams)
			out := raggedDotIn(Reshape(x, b*m, k), w2, gs2, p.transW, p.compute)
			out = Reshape(out, b, m, -1)
			return one1(Where(covered, out, Scalar(0)))
		},
		Traits: Traits{Reuse: FreshVJP}, // products computed by gemm
	}
	// ragged_outer: out[g] = a[rows of g]ᵀ @ b[rows of g], f32[G, ka, kb];
	// the weight gradient of ragged_dot (rows past the last group ignored).
	raggedOuterOp = &Op{
		Name: "ragged_outer",
		Impl: func(in []*Tensor, pp any) *Tensor {
			return raggedOuterImpl(in[0], in[1], in[2], pp.(*raggedOuterParams))
		},
		VJPNeed: func(gout *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			a, b, gs := in[0], in[1], in[2]
			compute := pp.(*raggedOuterParams).compute
			res := make([]*Tensor, 3)
			if Wants(need, 0) {
				// da_g = b_g @ gout_gᵀ
				res[0] = raggedDotIn(b, gout, gs, true, compute)
			}
			if Wants(need, 1) {
				// db_g = a_g @ gout_g
				res[1] = raggedDotIn(a, gout, gs, false, compute)
			}
			return res
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			q := pp.(*raggedOuterParams)
			var da, db *Tensor
			if t[0] != nil {
				da = Apply(raggedOuterOp, q, t[0], x[1], x[2])
			}
			if t[1] != nil {
				db = Apply(raggedOuterOp, q, x[0], t[1], x[2])
			}
			return one1(addTangents(da, db))
		},
		// The examples' rows end to end, each example's groups followed by
		// one over its rows past them, whose product is dropped.
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			xs := materializeAll(in, batched)
			a, bb, gs := xs[0], xs[1], xs[2]
			b, m := a.shape[0], a.shape[1]
			q := pp.(*raggedOuterParams)
			groups := q.groups
			gs2, _ := raggedFill(gs, m)
			out := Apply(raggedOuterOp, &raggedOuterParams{groups: b * (groups + 1), compute: q.compute},
				Reshape(a, b*m, -1), Reshape(bb, b*m, -1), gs2)
			out = Reshape(out, b, groups+1, a.shape[2], bb.shape[2])
			return one1(SliceAxis(out, 1, 0, groups))
		},
		Traits: Traits{Reuse: FreshVJP}, // products computed by gemm
	}
}

// gemmThreads is the thread bound of gemm calls on these operands: a
// device inside shard.Map computes on its own goroutine.
func gemmThreads(a, b *Tensor) int {
	if a.local() != nil || b.local() != nil {
		return 1
	}
	return 0
}

// raggedDotImpl is ragged_dot's Impl. Under a bfloat16 compute dtype
// with the AVX-512 BF16 or AMX kernels, x may be bfloat16 too (a
// cotangent rounded once, see roundOnce).
func raggedDotImpl(x, w, gs *Tensor, p *raggedParams) *Tensor {
	m, k := x.shape[0], x.shape[1]
	g := w.shape[0]
	n := w.shape[2]
	if p.transW {
		n = w.shape[1]
	}
	out := newOutUninit(Float32, []int{m, n}) // the gemms write the groups' rows, beta 0
	sizes := checkGroupSizes("tensor.RaggedDot", gs, m)
	local := isLocal(x, w)
	x, w, compute := productOperands(x, w, p.compute)
	ldw := n
	if p.transW {
		ldw = k
	}
	wsz := w.shape[1] * w.shape[2]
	starts := make([]int, g+1)
	for e, s := range sizes {
		starts[e+1] = starts[e] + s
	}
	clear(out.f32()[starts[g]*n:]) // rows past the groups
	// group computes group e's rows [lo, hi) on one goroutine.
	group := func(e, lo, hi int) {
		raggedGemm(compute, false, p.transW, hi-lo, n, k, operandRows(x, lo*k, hi*k), k, operandRows(w, e*wsz, (e+1)*wsz), ldw,
			out.f32()[lo*n:hi*n], n, 1)
	}
	if compute != Float32 && raggedWholeGroups {
		// bfloat16: whole groups a goroutine when they are enough to
		// share (see outerGroupOrder). The bf16 kernels multiply so fast
		// (AMX) that packing w[g] (rounded and interleaved into pairs)
		// weighs as much as a few hundred rows of its product: the split
		// of the rows below packed each w[g] once per chunk it met, up to
		// 2-3 times a group at two threads. Same bits: each row is
		// computed as it is serially.
		if order := outerGroupOrder(sizes, k*n, local); order != nil {
			spreadOn(runtime.GOMAXPROCS(0), len(order), func(c int) int { return c }, func(c, _ int) {
				if e := order[c]; sizes[e] > 0 {
					group(e, starts[e], starts[e+1])
				}
			})
			return out
		}
	}
	// Split the rows (not the groups) evenly over the cores, each
	// chunk computing its share of every group it meets on one
	// goroutine: balanced whatever the routing, and each group is
	// one packed product per chunk, never per row.
	// 2·k·n flops per row; gemm goes parallel from about 16M flops,
	// parallelFor from parallelMinWork (256K) units: 1 unit per 64 flops.
	parallelFor(starts[g], max(1, k*n/32), 8, local, func(lo, hi int) {
		for e := range g {
			a, b := max(lo, starts[e]), min(hi, starts[e+1])
			if a >= b {
				continue
			}
			group(e, a, b)
		}
	})
	return out
}

// raggedOuterImpl is ragged_outer's Impl; a or b may be bfloat16 as x
// may in raggedDotImpl.
func raggedOuterImpl(a, b, gs *Tensor, q *raggedOuterParams) *Tensor {
	G := q.groups
	m, ka, kb := a.shape[0], a.shape[1], b.shape[1]
	out := newOutUninit(Float32, []int{G, ka, kb}) // the gemms write nonempty groups, beta 0
	threads := gemmThreads(a, b)
	sizes := checkGroupSizes("tensor.RaggedDot", gs, m)
	a, b, compute := productOperands(a, b, q.compute)
	starts := make([]int, G+1)
	for e, r := range sizes {
		starts[e+1] = starts[e] + r
	}
	// group computes group e's product with the given thread bound.
	group := func(e, threads int) {
		lo, hi := starts[e], starts[e+1]
		c := out.f32()[e*ka*kb : (e+1)*ka*kb]
		if lo == hi {
			clear(c)
			return
		}
		groupGemm(compute, true, false, ka, kb, hi-lo, operandRows(a, lo*ka, hi*ka), ka, operandRows(b, lo*kb, hi*kb), kb, c, kb, threads)
	}
	if order := outerGroupOrder(sizes, ka*kb, threads == 1); order != nil {
		spreadOn(runtime.GOMAXPROCS(0), len(order), func(c int) int { return c }, func(c, _ int) { group(order[c], 1) })
		return out
	}
	for e := range G {
		group(e, threads)
	}
	return out
}

// outerGroupOrder returns the order in which ragged_outer's goroutines
// (and ragged_dot's, in bfloat16) compute its groups when they are enough to share whole between the
// cores (two at least per goroutine, the work worth a split), or nil, when
// each group's product is split over the goroutines instead (gemm's
// split, one parallel region per group). Whole groups cost one region for
// all of them instead of one per group (a MoE layer's two weight
// gradients: 16 regions a step), no group below gemm's split threshold
// runs on one core while the other waits, and group g's product is
// computed as the serial gemm computes it: the same bits, whatever the
// split. workers.Chunks hands the order out from the front to the first
// goroutine and from the back to the others; the order puts the largest
// groups at both ends and the smallest in the middle (the nonempty groups
// by decreasing rows, alternately at the front and at the back), so both
// start with large groups and finish with small ones, as a
// longest-first schedule does; empty groups are cleared at the front.
func outerGroupOrder(sizes []int, outer int, local bool) []int {
	p := runtime.GOMAXPROCS(0)
	var rows, nonempty int
	for _, r := range sizes {
		rows += r
		if r > 0 {
			nonempty++
		}
	}
	if local || p < 2 || nonempty < 2*p || 2*rows*outer < parallelMinWork*64 {
		return nil
	}
	byRows := make([]int, 0, len(sizes))
	for e, r := range sizes {
		if r > 0 {
			byRows = append(byRows, e)
		}
	}
	slices.SortStableFunc(byRows, func(x, y int) int { return sizes[y] - sizes[x] })
	order := make([]int, len(sizes))
	front, back := len(sizes)-nonempty, len(sizes)-1
	empty := 0
	for e, r := range sizes {
		if r == 0 {
			order[empty] = e
			empty++
		}
	}
	for i, e := range byRows {
		if i%2 == 0 {
			order[front] = e
			front++
		} else {
			order[back] = e
			back--
		}
	}
	return order
}

// checkGroupSizes reads the group sizes and checks them against the rows.
func checkGroupSizes(op string, gs *Tensor, rows int) []int {
	sizes := gs.Ints()
	total := 0
	for e, s := range sizes {
		if s < 0 {
			panic(fmt.Sprintf("%s: group %d has negative size %d", op, e, s))
		}
		total += s
	}
	if total > rows {
		panic(fmt.Sprintf("%s: group sizes %v sum to %d > %d rows", op, sizes, total, rows))
	}
	return sizes
}

func raggedDot(x, w, gs *Tensor, transW bool) *Tensor {
	return raggedDotIn(x, w, gs, transW, 0)
}

// raggedDotIn is ragged_dot with its products computed in compute (0:
// float32).
func raggedDotIn(x, w, gs *Tensor, transW bool, compute DType) *Tensor {
	return Apply(raggedDotOp, &raggedParams{transW: transW, compute: compute}, x, w, gs)
}

func raggedOuter(a, b, gs *Tensor, groups int) *Tensor {
	return Apply(raggedOuterOp, &raggedOuterParams{groups: groups}, a, b, gs)
}

// productOperands prepares float32 operands a and b for groupGemm in
// dtype compute (0 or Float32, or a half dtype): it returns the dtype
// groupGemm computes in, and operands rounded to compute and widened back
// where no kernel rounds them as it reads them (float16, or bfloat16
// without AVX-512 BF16 or AMX), so that the result is the same product
// whichever kernel computes it.
func productOperands(a, b *Tensor, compute DType) (*Tensor, *Tensor, DType) {
	if compute == 0 || compute == Float32 {
		return a, b, Float32
	}
	if compute == BFloat16 && gemm.BF16Kernel() != "widen" {
		return a, b, compute
	}
	return widen(narrow(a, compute)), widen(narrow(b, compute)), Float32
}

// groupGemm computes C = op(A)·op(B) on float32 operands in dtype compute
// (Float32: Sgemm; BFloat16: Bgemm with each operand rounded as the
// kernel reads it, or already bfloat16, accumulated in float32),
// overwriting C.
func groupGemm(compute DType, ta, tb bool, m, n, k int, a gemm.BF16Operand, lda int, b gemm.BF16Operand, ldb int, c []float32, ldc, threads int) {
	if compute == Float32 {
		gemm.Sgemm(ta, tb, m, n, k, 1, a.F32, lda, b.F32, ldb, 0, c, ldc, threads)
		return
	}
	gemm.BgemmMixed(ta, tb, m, n, k, a, lda, b, ldb, c, ldc, threads)
}

// raggedWholeGroups lets raggedDotImpl compute bfloat16 groups whole on
// one goroutine each; benchmarks turn it off to time the split rows.
var raggedWholeGroups = true

// raggedGemm is the gemm of ragged_dot's groups: groupGemm, which tests
// wrap to see how raggedDotImpl cuts the groups.
var raggedGemm = groupGemm

// operandRows returns elements [lo, hi) of the float32 or bfloat16 host
// tensor x as a product's operand.
func operandRows(x *Tensor, lo, hi int) gemm.BF16Operand {
	if x.dtype == Float32 {
		return gemm.BF16Operand{F32: x.f32()[lo:hi]}
	}
	return gemm.BF16Operand{Bits: x.u16()[lo:hi]}
}

// roundOnce returns the float32 cotangent g rounded to bfloat16, for a
// first-order backward pass whose two products (need asks for both
// cotangents) would each round g as they read it, on the AVX-512 BF16 or
// AMX kernels: one rounding pass instead of two, and the product that
// reads g's rows reads the rounded copy in place. The bits are those the
// kernels would round g to (vec.BF16FromF32), so the cotangents are the
// same bit for bit. It returns nil, and the products round g themselves,
// for any other compute dtype or kernel, traced, batched or placed
// operands. The caller releases the result once the products are done.
func roundOnce(g *Tensor, compute DType, need uint64, others ...*Tensor) *Tensor {
	if compute != BFloat16 || gemm.BF16Kernel() == "widen" || !Wants(need, 0) || !Wants(need, 1) ||
		g.dtype != Float32 || higherOrder(g) || higherOrder(others...) {
		return nil
	}
	for _, x := range append(others, g) {
		if x.layout() != nil || x.xv() != nil {
			return nil
		}
	}
	return narrow(g, BFloat16)
}

// RaggedDot is a grouped matrix product, JAX's lax.ragged_dot: the rows of
// x f32[m,k] are split into consecutive groups of groupSizes i32[g] rows,
// and the rows of group i are multiplied by w[i] (w is f32[g,k,n]). The
// result is f32[m,n]; rows past the sum of the group sizes (which may be
// less than m) are 0. Each group is one packed matrix product, so a
// mixture of experts computes its experts without padding or per-token
// work. It is differentiable in x and w; groupSizes is read when the op
// runs, so it may depend on data (token routing).
//
// It panics unless x and w are floats of one dtype, of ranks 2 and 3 with matching
// inner dimensions, groupSizes is i32[g], and the sizes are nonnegative
// and sum to at most m.
func RaggedDot(x, w, groupSizes *Tensor) *Tensor {
	checkNil("tensor.RaggedDot", "x w groupSizes", x, w, groupSizes)
	if checkRaggedDot(x, w, groupSizes) && x.dtype == Float64 { // composed: the grouped gemm is float32
		return raggedDot64(x, w, groupSizes)
	}
	return raggedDot(x, w, groupSizes, false)
}

// RaggedDotAs is RaggedDot with its products computed in dtype compute
// (float32, bfloat16 or float16) from float32 x and w, each rounded to
// compute (to nearest even) as the product reads it, with a float32
// accumulator: the result is f32[m,n], as JAX's ragged_dot with
// preferred_element_type float32 on operands converted to compute, but
// without the converted copies. The cotangents of x and w are float32,
// computed by products in compute too (the accumulators, not rounded to
// compute). It is the experts' product of a mixture of experts under
// automatic mixed precision (nn.MoE with a bfloat16 Policy). bfloat16
// uses the AVX-512 BF16 kernels where the CPU has them; elsewhere, and
// for float16, the operands are rounded, widened and multiplied in
// float32, which gives the same values.
func RaggedDotAs(x, w, groupSizes *Tensor, compute DType) *Tensor {
	checkNil("tensor.RaggedDotAs", "x w groupSizes", x, w, groupSizes)
	checkProductAs("tensor.RaggedDotAs", x, w, compute)
	checkRaggedDot(x, w, groupSizes)
	return raggedDotIn(x, w, groupSizes, false, compute)
}

// checkProductAs panics unless x and w are float32 and compute is a
// dtype products can be computed in (float32 or a half dtype).
func checkProductAs(op string, x, w *Tensor, compute DType) {
	if x.dtype != Float32 || w.dtype != Float32 || compute != Float32 && !compute.isHalf() {
		panic(fmt.Sprintf("%s: %s in %v: want float32 operands and a compute dtype float32, bfloat16 or float16", op, operands("@", x, w), compute))
	}
}

// checkRaggedDot panics unless RaggedDot takes its operands, and reports
// whether it read and checked the group sizes (a host tensor).
func checkRaggedDot(x, w, groupSizes *Tensor) bool {
	desc := func() string { return fmt.Sprintf("%v @ %v, group sizes %v", x, w, groupSizes) }
	if !x.dtype.IsFloat() || w.dtype != x.dtype || len(x.shape) != 2 || len(w.shape) != 3 {
		panic(fmt.Sprintf("tensor.RaggedDot: %s: want f32[m,k] and f32[g,k,n] (or both bf16 or f16)", desc()))
	}
	if x.shape[1] != w.shape[1] {
		panic(fmt.Sprintf("tensor.RaggedDot: %s: inner dims %d != %d", desc(), x.shape[1], w.shape[1]))
	}
	if groupSizes.dtype != Int32 || len(groupSizes.shape) != 1 || groupSizes.shape[0] != w.shape[0] {
		panic(fmt.Sprintf("tensor.RaggedDot: %s: group sizes must be i32[%d]", desc(), w.shape[0]))
	}
	if groupSizes.layout() == nil && groupSizes.xv() == nil {
		checkGroupSizes("tensor.RaggedDot", groupSizes, x.shape[0]) // fail here, naming the public op
		return true
	}
	return false
}

// raggedFill returns the group sizes of a batch of ragged products laid
// end to end (gs: [B, g] for examples of m rows each): each example's
// groups and a last one over its rows past them, flattened to
// [B·(g+1)]; and the mask [B, m, 1] of the rows the examples' groups
// cover.
func raggedFill(gs *Tensor, m int) (sizes, covered *Tensor) {
	b := gs.shape[0]
	used := SumKeep(gs, 1) // [B, 1]
	rest := Sub(ScalarInt(int32(m)), used)
	sizes = Reshape(Concat(1, gs, rest), -1)
	covered = Less(Reshape(Arange(m), 1, m, 1), Reshape(used, b, 1, 1))
	return sizes, covered
}
