package tensor

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor/internal/gemm"
	"github.com/gonox/gonox/tensor/internal/vec"
)

type matmulParams struct {
	ta, tb   bool
	m, n, k  int
	batch    []int // broadcast batch shape
	outShape []int
	shapeBuf [4]int // outShape's storage up to rank 4: one allocation per product
}

// leading returns the leading dimensions of A and B as stored (row-major,
// before any transpose), the lda and ldb of a gemm call.
func (p *matmulParams) leading() (lda, ldb int) { return leadingDims(p.ta, p.tb, p.m, p.n, p.k) }

// leadingDims returns the leading dimensions of the operands of
// op(A)·op(B) for an m×k op(A) and a k×n op(B) (see leading).
func leadingDims(ta, tb bool, m, n, k int) (lda, ldb int) {
	lda, ldb = k, n
	if ta {
		lda = m
	}
	if tb {
		ldb = k
	}
	return lda, ldb
}

var matmulOp *Op

func init() {
	matmulOp = &Op{
		Name: "matmul",
		Sharding: ShardingRule{Family: ShardMatMul, Params: func(pp any) OpParams {
			p := pp.(*matmulParams)
			return OpParams{TransA: p.ta, TransB: p.tb}
		}},
		Impl: matmulImpl,
		VJPNeed: func(g *Tensor, in []*Tensor, _ *Tensor, pp any, need uint64) []*Tensor {
			p := pp.(*matmulParams)
			return matmulCotangents(g, in[0], in[1], p, foldWeightCotangent(g, in[0], in[1], p, need), matmulT)
		},
		Save: SaveAllInputs,
		// d(op(A)·op(B)) = op(dA)·op(B) + op(A)·op(dB).
		JVP: func(x, t, _ []*Tensor, pp any) []*Tensor {
			p := pp.(*matmulParams)
			var ta, tb *Tensor
			if t[0] != nil {
				ta = MatMulT(t[0], x[1], p.ta, p.tb)
			}
			if t[1] != nil {
				tb = MatMulT(x[0], t[1], p.ta, p.tb)
			}
			return one1(addTangents(ta, tb))
		},
		Batch: matmulBatchRule,
		Traits: Traits{
			Half:  NativeHalf,   // bfloat16 gemm, or float16 widened once (matmul_bf16.go)
			Reuse: FreshVJP,     // products computed by gemm (ad_backward.go)
			Types: TypesFloat64, // gemm.Dgemm (dtype_wide.go)
		},
	}
}

// matmulBatchRule is matmul's batching rule (dense's calls it too).
func matmulBatchRule(in []*Tensor, batched []bool, pp any) []*Tensor {
	p := pp.(*matmulParams)
	if !batched[0] && !batched[1] {
		// dense's rule with only the bias batched.
		return one1(MatMulT(in[0], in[1], p.ta, p.tb))
	}
	if c := matmulStacked(in, batched, p, MatMulT); c != nil {
		return one1(c)
	}
	// The operands' batch dimensions lead: the product with the
	// examples' params widened (matmulBatch would check them again).
	x := alignBatch(in, batched, len(p.batch)+2)
	q, rc := p.batched(batchSize(in, batched))
	rc.args[0], rc.args[1] = x[0], x[1]
	return rc.call(matmulOp, q, 2)
}

// matmulT is MatMulT as matmulCotangents calls it. On plain matrices (a
// VJP's cotangents and saved values outside any trace, level, shard.Map
// or placement) it calls the gemm Apply would, with the same arguments,
// without the dispatch and its allocations (the params, the operand
// slice): a training step computes most of its products here.
func matmulT(x, y *Tensor, tx, ty bool, _ DType) *Tensor {
	if len(x.shape) != 2 || len(y.shape) != 2 || !markedOperand(x) || !markedOperand(y) {
		return MatMulT(x, y, tx, ty)
	}
	m, k := x.shape[0], x.shape[1]
	if tx {
		m, k = k, m
	}
	kb, n := y.shape[0], y.shape[1]
	if ty {
		kb, n = n, kb
	}
	if k != kb || k == 1 { // a mismatch (MatMulT panics) or an outer product
		return MatMulT(x, y, tx, ty)
	}
	out := newHeader(Float32, []int{m, n})
	if markResult(matmulOp, out, x, y) != nil {
		if r := takeProductOfT(x, y, tx, ty); r != nil {
			markResult(matmulOp, r, x, y)
			return r // computed with the other devices (ProductTaker)
		}
		// A device's blocks inside shard.Map: one goroutine, as
		// matmulF32 computes them.
		return gemmOutThreads(out, x, y, tx, ty, m, n, k, 1)
	}
	return gemmOut(out, x, y, tx, ty, m, n, k)
}

// gemmOut gives out, a float32 header of shape [m, n] without data,
// storage and computes op(x)·op(y) into it (the inner dimension k) on
// gemm's threads: matmulT's product.
func gemmOut(out, x, y *Tensor, tx, ty bool, m, n, k int) *Tensor {
	return gemmOutThreads(out, x, y, tx, ty, m, n, k, 0)
}

// gemmOutThreads is gemmOut on the given number of gemm threads (0:
// gemm's choice).
func gemmOutThreads(out, x, y *Tensor, tx, ty bool, m, n, k, threads int) *Tensor {
	out.allocData("tensor", m*n, false) // beta = 0: Sgemm writes all of C
	lda, ldb := leadingDims(tx, ty, m, n, k)
	gemm.Sgemm(tx, ty, m, n, k, 1, x.f32(), lda, y.f32(), ldb, 0, out.f32(), n, threads)
	return out
}

// plainOperand reports whether x is a float32 host tensor with data that
// no trace, Vmap or forward-mode level, shard.Map mark or placement
// concerns: what Apply hands to an op's Impl unchanged.
func plainOperand(x *Tensor) bool {
	return x.dtype == Float32 && x.node == nil && x.ext == nil && !x.donated && len(x.f32()) > 0
}

// markedOperand is plainOperand for a value that may also carry a
// shard.Map mark and logical axis names (which ops do not propagate): a
// device's block inside shard.Map, whose ops would otherwise all take
// Apply's dispatch. A path that takes it marks its result (markResult).
func markedOperand(x *Tensor) bool {
	return x.dtype == Float32 && x.node == nil && (x.ext == nil || x.ext.layout == nil && x.ext.xv == nil) &&
		!x.donated && len(x.f32()) > 0
}

// markedOver reports whether the result of an elementwise op on x and y
// (markedOperand) has x's own mark (the union Apply gives it): a path
// writing the result over x keeps x's header.
func markedOver(x, y *Tensor) bool {
	return unionLocal("tensor.Mul", x.local(), y.local()) == x.local()
}

// markResult gives out, a fresh result of op on a and b (markedOperand)
// without a mark, the mark Apply would give it: the union of theirs
// (nil, and none given, outside shard.Map). It returns the mark.
func markResult(op *Op, out, a, b *Tensor) *Local {
	loc := unionLocal(op.Name, a.local(), b.local())
	if loc != nil {
		out.ext = loc.rec()
	}
	return loc
}

// matmulCotangents returns the cotangents of a and b (those need asks
// for) of C = op(a)·op(b) given G = dL/dC, with the products computed by
// mm(x, y, tx, ty, dt), dt the dtype of the operand whose cotangent it is:
// d op(A) = G·op(B)ᵀ and d op(B) = op(A)ᵀ·G; an operand stored transposed
// gets the transpose of that, which the transposed-operand kernel
// computes without copies. An operand that wants no cotangent (an input
// batch) costs nothing.
func matmulCotangents(g, a, b *Tensor, p *matmulParams, need uint64, mm func(x, y *Tensor, tx, ty bool, dt DType) *Tensor) []*Tensor {
	if p.stacked(a, b) {
		// Those of the product of a's rows: the sums of the unbatched
		// product, the operand's cotangent shaped back.
		rg, ra := rowsOf(g), rowsOf(a)
		res := matmulCotangents(rg, ra, b, p, need, mm)
		if untracedValue(g) && untracedValue(a) && untracedValue(b) {
			// Nothing recorded the views (a trace of a higher order
			// would have, to read them later).
			dropView(rg, g)
			dropView(ra, a)
		}
		if ga := res[0]; ga != nil {
			if ga.node == nil && ga.xv() == nil && ga.layout() == nil && ga != rg && ga != b {
				// A product just computed, which nothing else holds: its
				// rows are a's cotangent as they are.
				ga.shape = slices.Clone(a.shape)
			} else {
				res[0] = reshapeTo(ga, a.shape)
			}
		}
		return res
	}
	res := make([]*Tensor, 2, 3) // room for a bias's cotangent (dense)
	if Wants(need, 0) {
		var ga *Tensor
		switch {
		case !p.ta && !p.tb:
			ga = mm(g, b, false, true, a.dtype)
		case !p.ta && p.tb:
			ga = mm(g, b, false, false, a.dtype)
		case p.ta && !p.tb:
			ga = mm(b, g, false, true, a.dtype)
		default:
			ga = mm(b, g, true, true, a.dtype)
		}
		res[0] = unbroadcast(ga, a.shape)
	}
	if Wants(need, 1) {
		var gb *Tensor
		switch {
		case !p.ta && !p.tb:
			gb = mm(a, g, true, false, b.dtype)
		case !p.ta && p.tb:
			gb = mm(g, a, true, false, b.dtype)
		case p.ta && !p.tb:
			gb = mm(a, g, false, false, b.dtype)
		default:
			gb = mm(g, a, true, true, b.dtype)
		}
		res[1] = unbroadcast(gb, b.shape)
	}
	return res
}

// matmulBatch computes a batch of products op(a)·op(b) with mm (MatMulT or
// a MatMulTo): a batch of a times one b as a single product with the
// examples' rows stacked (one gemm with B·m rows, the same sums per
// element), anything else as a batched product whose batch dimensions
// lead (alignBatch), the examples' batch dimensions broadcasting as they
// did.
func matmulBatch(in []*Tensor, batched []bool, p *matmulParams, mm func(a, b *Tensor, ta, tb bool) *Tensor) *Tensor {
	if c := matmulStacked(in, batched, p, mm); c != nil {
		return c
	}
	x := alignBatch(in, batched, len(p.batch)+2)
	return mm(x[0], x[1], p.ta, p.tb)
}

// matmulStacked is matmulBatch's first case (a batch of a times one b as
// one product), or nil.
func matmulStacked(in []*Tensor, batched []bool, p *matmulParams, mm func(a, b *Tensor, ta, tb bool) *Tensor) *Tensor {
	a, b := in[0], in[1]
	if !batched[0] || batched[1] || len(b.shape) != 2 || p.ta {
		return nil
	}
	k := a.shape[len(a.shape)-1]
	c := mm(Reshape(a, -1, k), b, false, p.tb)
	return Reshape(c, append(slices.Clone(a.shape[:len(a.shape)-1]), p.n)...)
}

// batched returns the params of the product p of one example for a batch
// of nb examples in front, as checkMatMul would compute them for the
// operands alignBatch gives (their batch dimensions broadcast to nb
// followed by the examples' batch), in one allocation and without its
// checks, which the examples passed; with them the memory of the rule's
// call (ruleCall).
func (p *matmulParams) batched(nb int) (*matmulParams, *ruleCall) {
	buf := &struct {
		q  matmulParams
		rc ruleCall
	}{}
	p.batchedInto(&buf.q, nb)
	return &buf.q, &buf.rc
}

// batchedInto sets q to p.batched(nb)'s params.
func (p *matmulParams) batchedInto(q *matmulParams, nb int) {
	q.ta, q.tb, q.m, q.n, q.k = p.ta, p.tb, p.m, p.n, p.k
	q.outShape = append(append(append(q.shapeBuf[:0], nb), p.batch...), p.m, p.n)
	q.batch = q.outShape[: 1+len(p.batch) : 1+len(p.batch)]
}

// matmulImpl computes op(a) @ op(b): float32 operands with Sgemm, half
// ones with matmulHalfImpl.
func matmulImpl(in []*Tensor, pp any) *Tensor {
	if in[0].dtype.isHalf() || in[1].dtype.isHalf() {
		return matmulHalfImpl(in, pp)
	}
	if in[0].dtype == Float64 {
		return matmulF64(in[0], in[1], pp.(*matmulParams))
	}
	return matmulF32(in[0], in[1], pp.(*matmulParams))
}

// matmulF32 computes op(a) @ op(b) for float32 operands.
func matmulF32(a, b *Tensor, p *matmulParams) *Tensor {
	if out := takeProduct(a, b, p); out != nil {
		return out // computed with the other devices (ProductTaker)
	}
	out := newOutUninit(Float32, p.outShape) // beta = 0: Sgemm writes all of C
	threads := 0
	if a.local() != nil || b.local() != nil {
		threads = 1 // a device inside shard.Map computes on one goroutine
	}
	lda, ldb := p.leading()
	sizeA, sizeB, sizeC := p.m*p.k, p.k*p.n, p.m*p.n
	nb := numel(p.batch)
	if p.k == 1 {
		outerF32(a, b, p, out, threads == 1)
		return out
	}
	if nb == 1 || p.stacked(a, b) {
		// A batch of a times one matrix b is one product of nb·m rows.
		gemm.Sgemm(p.ta, p.tb, nb*p.m, p.n, p.k, 1, a.f32(), lda, b.f32(), ldb, 0, out.f32(), p.n, threads)
		return out
	}
	if 2*p.m*p.n*p.k < batchSplitFlops {
		matmulSmallBatchF32(a, b, out, p, threads)
		return out
	}
	sa := broadcastStrides(a.shape[:len(a.shape)-2], p.batch)
	sb := broadcastStrides(b.shape[:len(b.shape)-2], p.batch)
	broadcastLoop(p.batch, sa, sb, func(o, ia, ib, n, da, db int) {
		for j := 0; j < n; j++ {
			oa, ob, oc := (ia+j*da)*sizeA, (ib+j*db)*sizeB, (o+j)*sizeC
			gemm.Sgemm(p.ta, p.tb, p.m, p.n, p.k, 1, a.f32()[oa:oa+sizeA], lda, b.f32()[ob:ob+sizeB], ldb,
				0, out.f32()[oc:oc+sizeC], p.n, threads)
		}
	})
	return out
}

// stacked reports whether the product is a batch of a's matrices times
// one matrix b, not transposed a (a Linear layer on [B,T,in]): the batch's
// rows stacked are one product of numel(batch)·m rows, which matmulF32
// computes with one gemm, and whose cotangents matmulCotangents computes
// as those of that product (the sums of a product of [B·T,in] rows).
func (p *matmulParams) stacked(a, b *Tensor) bool {
	return len(a.shape) > 2 && len(b.shape) == 2 && !p.ta
}

// rowsOf returns x, of rank 2 or more, as the matrix of its rows (a view
// of its leading dimensions flattened).
func rowsOf(x *Tensor) *Tensor {
	if len(x.shape) == 2 {
		return x
	}
	k := x.shape[len(x.shape)-1]
	return reshapeTo(x, []int{x.Size() / k, k})
}

// untracedValue reports whether x is a value of no trace or level.
func untracedValue(x *Tensor) bool { return x.node == nil && x.xv() == nil }

// dropView donates v, a view rowsOf made of x that no one reads any
// more: x's storage then goes back to the allocator cache when x is
// donated, not to the collector. A traced or placed view is left to its
// trace or placement.
func dropView(v, x *Tensor) {
	if v != x && v.node == nil && v.layout() == nil {
		Donate(v)
	}
}

// batchSplitFlops is the size of a product from which gemm splits it over
// the cores itself (gemm's parMinFlops, 16 MFLOP); a batch of smaller
// products is split over the cores by product from an eighth of that.
const batchSplitFlops = 16 << 20

// outerF32 computes products of inner dimension 1, outer products: with
// k = 1 either layout of each operand is one contiguous vector (of m and
// of n elements), and C[i, j] = a[i]·b[j], the bits gemm computes (one
// product each, no sum). A batch of outer products (per-example gradients
// of a layer) is memory-bound: written row by row, rows split over the
// cores when large.
func outerF32(a, b *Tensor, p *matmulParams, out *Tensor, local bool) {
	m, n := p.m, p.n
	nb := numel(p.batch)
	sa := broadcastStrides(a.shape[:len(a.shape)-2], p.batch)
	sb := broadcastStrides(b.shape[:len(b.shape)-2], p.batch)
	// The batch offsets of a and b for each output matrix.
	offA, offB := make([]int, nb), make([]int, nb)
	if nb == 1 {
		offA[0], offB[0] = 0, 0
	} else {
		broadcastLoop(p.batch, sa, sb, func(o, ia, ib, cnt, da, db int) {
			for j := range cnt {
				offA[o+j], offB[o+j] = (ia+j*da)*m, (ib+j*db)*n
			}
		})
	}
	rows := func(lo, hi int) {
		for r := lo; r < hi; r++ {
			t, i := r/m, r%m
			vec.MulVS(out.f32()[r*n:(r+1)*n], b.f32()[offB[t]:offB[t]+n], a.f32()[offA[t]+i])
		}
	}
	parallelFor(nb*m, n*costCheap, 1, local, rows)
}

// MatMul returns the matrix product a @ b with NumPy semantics: the last
// two dimensions are multiplied and leading (batch) dimensions broadcast;
// a 1-D a is a row vector and a 1-D b a column vector, and the added
// dimension is removed from the result.
func MatMul(a, b *Tensor) *Tensor {
	checkNil("tensor.MatMul", "a b", a, b)
	if len(a.shape) == 0 || len(b.shape) == 0 {
		panic(fmt.Sprintf("tensor.MatMul: %s: operands must have at least 1 dimension", operands("@", a, b)))
	}
	va, vb := len(a.shape) == 1, len(b.shape) == 1
	ea, eb := a, b
	if va {
		ea = ExpandDims(a, 0)
	}
	if vb {
		eb = ExpandDims(b, -1)
	}
	// Validate the promoted operands, naming the ones the caller passed.
	p := checkMatMulAs("tensor.MatMul", ea, eb, false, false, a, b)
	c := Apply(matmulOp, p, ea, eb)
	switch {
	case va && vb:
		return Reshape(c, c.shape[:len(c.shape)-2]...)
	case va:
		return Squeeze(c, -2)
	case vb:
		return Squeeze(c, -1)
	}
	return c
}

// MatMulT returns op(a) @ op(b), where op transposes the last two
// dimensions of its operand when the corresponding flag is set. The
// transposes are folded into the kernel; nothing is copied. Both operands
// need at least 2 dimensions; batch dimensions broadcast.
func MatMulT(a, b *Tensor, transA, transB bool) *Tensor {
	checkNil("tensor.MatMulT", "a b", a, b)
	p := checkMatMul("tensor.MatMulT", a, b, transA, transB)
	return Apply(matmulOp, p, a, b)
}

func checkMatMul(op string, a, b *Tensor, ta, tb bool) *matmulParams {
	return checkMatMulAs(op, a, b, ta, tb, a, b)
}

// checkMatMulAs validates op(a) @ op(b) and names ma and mb (the operands
// as the caller passed them, before any 1-D promotion) in panics.
func checkMatMulAs(op string, a, b *Tensor, ta, tb bool, ma, mb *Tensor) *matmulParams {
	p := new(matmulParams)
	p.check(op, a, b, ta, tb, ma, mb)
	return p
}

// check is checkMatMulAs filling in p.
func (p *matmulParams) check(op string, a, b *Tensor, ta, tb bool, ma, mb *Tensor) {
	desc := func() string {
		s := operands("@", ma, mb)
		if ta || tb {
			s += fmt.Sprintf(" (transA=%v, transB=%v)", ta, tb)
		}
		return s
	}
	if !sameFloat(a, b) {
		panic(floatMismatch(op+": "+desc(), "operands must be float32", a, b))
	}
	if len(a.shape) < 2 || len(b.shape) < 2 {
		panic(fmt.Sprintf("%s: %s: operands need at least 2 dimensions", op, desc()))
	}
	ra, rb := len(a.shape), len(b.shape)
	m, ka := a.shape[ra-2], a.shape[ra-1]
	if ta {
		m, ka = ka, m
	}
	kb, n := b.shape[rb-2], b.shape[rb-1]
	if tb {
		kb, n = n, kb
	}
	if ka != kb {
		panic(fmt.Sprintf("%s: %s: inner dims %d != %d", op, desc(), ka, kb))
	}
	batch := []int{}
	if ra > 2 || rb > 2 {
		p.broadcastBatch(op, desc, a.shape[:ra-2], b.shape[:rb-2])
		batch = p.batch
	}
	*p = matmulParams{ta: ta, tb: tb, m: m, n: n, k: ka, batch: batch}
	p.outShape = append(append(p.shapeBuf[:0], batch...), m, n)
}

// broadcastBatch sets p.batch to the broadcast of the batch dimensions
// sa and sb, or panics naming op and the operands (desc).
func (p *matmulParams) broadcastBatch(op string, desc func() string, sa, sb []int) {
	ba, bb := &Tensor{shape: sa}, &Tensor{shape: sb}
	var batch []int
	func() {
		defer func() {
			if r := recover(); r != nil {
				panic(fmt.Sprintf("%s: %s: batch dims %v and %v do not broadcast", op, desc(), ba.shape, bb.shape))
			}
		}()
		batch = broadcastShapes(op, "@", ba, bb)
	}()
	p.batch = batch
}
