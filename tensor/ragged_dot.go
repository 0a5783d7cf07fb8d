package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/gemm"
)

// raggedParams are the static parameters of the grouped products.
type raggedParams struct {
	transW bool // ragged_dot: multiply by w[g]ᵀ instead of w[g]
}

var raggedDotOp, raggedOuterOp *Op

func init() {
	// ragged_dot: y[rows of group g] = x[rows of g] @ op(w[g]); rows past
	// the last group are 0.
	raggedDotOp = &Op{
		Name: "ragged_dot",
		Impl: func(in []*Tensor, pp any) *Tensor {
			p := pp.(*raggedParams)
			x, w, gs := in[0], in[1], in[2]
			m, k := x.shape[0], x.shape[1]
			g := w.shape[0]
			n := w.shape[2]
			if p.transW {
				n = w.shape[1]
			}
			out := newOut(Float32, []int{m, n})
			sizes := checkGroupSizes("tensor.RaggedDot", gs, m)
			ldw := n
			if p.transW {
				ldw = k
			}
			wsz := w.shape[1] * w.shape[2]
			starts := make([]int, g+1)
			for e, s := range sizes {
				starts[e+1] = starts[e] + s
			}
			// Split the rows (not the groups) evenly over the cores, each
			// chunk computing its share of every group it meets on one
			// goroutine: balanced whatever the routing, and each group is
			// one packed product per chunk, never per row.
			// 2·k·n flops per row; gemm goes parallel from about 16M flops,
			// parallelFor from parallelMinWork (256K) units: 1 unit per 64 flops.
			parallelFor(starts[g], max(1, k*n/32), 8, isLocal(x, w), func(lo, hi int) {
				for e := range g {
					a, b := max(lo, starts[e]), min(hi, starts[e+1])
					if a >= b {
						continue
					}
					gemm.Sgemm(false, p.transW, b-a, n, k, 1, x.f32[a*k:b*k], k, w.f32[e*wsz:(e+1)*wsz], ldw,
						0, out.f32[a*n:b*n], n, 1)
				}
			})
			return out
		},
		VJPNeed: func(gy *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*raggedParams)
			x, w, gs := in[0], in[1], in[2]
			res := make([]*Tensor, 3)
			if Wants(need, 0) {
				// dx_g = gy_g @ op(w_g)ᵀ
				res[0] = raggedDot(gy, w, gs, !p.transW)
			}
			if Wants(need, 1) {
				// dW_g = x_gᵀ gy_g, or its transpose when w was used transposed.
				if p.transW {
					res[1] = raggedOuter(gy, x, gs, w.shape[0])
				} else {
					res[1] = raggedOuter(x, gy, gs, w.shape[0])
				}
			}
			return res
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			p := pp.(*raggedParams)
			var dx, dw *Tensor
			if t[0] != nil {
				dx = raggedDot(t[0], x[1], x[2], p.transW)
			}
			if t[1] != nil {
				dw = raggedDot(x[0], t[1], x[2], p.transW)
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
			out := raggedDot(Reshape(x, b*m, k), w2, gs2, pp.(*raggedParams).transW)
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
			G := pp.(int)
			a, b, gs := in[0], in[1], in[2]
			m, ka, kb := a.shape[0], a.shape[1], b.shape[1]
			out := newOut(Float32, []int{G, ka, kb})
			threads := gemmThreads(a, b)
			sizes := checkGroupSizes("tensor.RaggedDot", gs, m)
			off := 0
			for e := range G {
				r := sizes[e]
				if r > 0 {
					gemm.Sgemm(true, false, ka, kb, r, 1, a.f32[off*ka:(off+r)*ka], ka, b.f32[off*kb:(off+r)*kb], kb,
						0, out.f32[e*ka*kb:(e+1)*ka*kb], kb, threads)
				}
				off += r
			}
			return out
		},
		VJPNeed: func(gout *Tensor, in []*Tensor, _ *Tensor, _ any, need uint64) []*Tensor {
			a, b, gs := in[0], in[1], in[2]
			res := make([]*Tensor, 3)
			if Wants(need, 0) {
				// da_g = b_g @ gout_gᵀ
				res[0] = raggedDot(b, gout, gs, true)
			}
			if Wants(need, 1) {
				// db_g = a_g @ gout_g
				res[1] = raggedDot(a, gout, gs, false)
			}
			return res
		},
		Save: SaveAllInputs,
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			var da, db *Tensor
			if t[0] != nil {
				da = raggedOuter(t[0], x[1], x[2], pp.(int))
			}
			if t[1] != nil {
				db = raggedOuter(x[0], t[1], x[2], pp.(int))
			}
			return one1(addTangents(da, db))
		},
		// The examples' rows end to end, each example's groups followed by
		// one over its rows past them, whose product is dropped.
		Batch: func(in []*Tensor, batched []bool, pp any) []*Tensor {
			xs := materializeAll(in, batched)
			a, bb, gs := xs[0], xs[1], xs[2]
			b, m := a.shape[0], a.shape[1]
			groups := pp.(int)
			gs2, _ := raggedFill(gs, m)
			out := raggedOuter(Reshape(a, b*m, -1), Reshape(bb, b*m, -1), gs2, b*(groups+1))
			out = Reshape(out, b, groups+1, a.shape[2], bb.shape[2])
			return one1(SliceAxis(out, 1, 0, groups))
		},
		Traits: Traits{Reuse: FreshVJP}, // products computed by gemm
	}
}

// gemmThreads is the thread bound of gemm calls on these operands: a
// device inside shard.Map computes on its own goroutine.
func gemmThreads(a, b *Tensor) int {
	if a.local != nil || b.local != nil {
		return 1
	}
	return 0
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
	return Apply(raggedDotOp, &raggedParams{transW: transW}, x, w, gs)
}

func raggedOuter(a, b, gs *Tensor, groups int) *Tensor {
	return Apply(raggedOuterOp, groups, a, b, gs)
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
	if groupSizes.layout == nil && groupSizes.xv == nil {
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
