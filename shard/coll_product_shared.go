package shard

import (
	"fmt"
	"sync/atomic"
	"unsafe"

	"github.com/gonox/gonox/tensor"
)

// This file holds the forward products a fold shares
// (FoldedGradient.ShareForward): the devices of a process compute their
// products x·w of few rows together, each a block of w's columns for
// every device's rows, so that w is read once rather than once a device.

// sharedProductColl names the shared forward product in Comm and in the
// rendezvous (in one process only: it is never exchanged between
// processes, so it has no ops and no cross-process exchange).
var sharedProductColl = &collective{kind: "shared_product"}

// sharedProductMinCols is the fewest columns of w a device computes in a
// shared product: the AVX-512 gemm's kernel width. A narrower w (a
// classifier's 10 outputs) is computed by each device alone.
const sharedProductMinCols = 32

// ShareForward makes the devices compute the products x·w of the forward
// computations run on them until Wait (MatMul, MatMulBiasAct: x [m, k]
// times f's value w, neither transposed) together, where the devices
// have few rows each: every device copies its rows of x into one operand
// of the group's rows, and computes the block of w's columns of its rank
// (n/g of them, for g devices) for every row, so that the devices read w
// once between them instead of once each; then each takes its own rows
// of the product. A data-parallel step of 8 devices with 32 rows each
// (a batch of 256) otherwise streams its 784×1024 and 1024×1024 weights 8
// times for products that run at 60% of the gemm's speed on 256 rows.
//
// The value folded must be the same on every device of f's axes (a
// replicated parameter's varying copy, as a data-parallel step
// differentiates): each device computes its block of columns from its own
// w. A product is shared only where every device of the group holds w in
// the same storage (checked when they meet; otherwise each computes its
// own rows), in one process, with fewer than foldGatherRows rows of x a
// device, as many on every device, and at least sharedProductMinCols
// columns of w a device. Each shared product is one meeting of the
// devices and a barrier, counted in Comm as "shared_product" with the
// bytes of the rows gathered. The product has the bits each device would
// have computed alone (tensor.ProductColumnsInto), so sharing changes no
// value.
func (f *FoldedGradient) ShareForward() {
	if f.taken {
		panic("shard.FoldedGradient.ShareForward: called after Wait or WaitThen")
	}
	f.share = true
}

// TakeProduct implements tensor.ProductTaker: the forward product x·w,
// and the input gradient x·wᵀ of a backward pass, of a value whose fold
// shares its products (FoldedGradient.ShareForward) is computed with the
// other devices of the fold's group.
func (e *devEnv) TakeProduct(x, w *tensor.Tensor, transW bool) *tensor.Tensor {
	if len(e.folds) == 0 || x.Rank() != 2 || w.Rank() != 2 || x.DType() != tensor.Float32 || w.DType() != tensor.Float32 {
		return nil
	}
	f := e.folds[foldKeyOf(w)]
	if f == nil || !f.share || f.run != e.run || e.mesh.spans() {
		return nil
	}
	if l := x.Local(); l == nil || l.Env != e {
		return nil
	}
	if l := w.Local(); l == nil || l.Env != e {
		return nil // not this device's block: its products need not run on its goroutine
	}
	m, k, n := x.Dim(0), w.Dim(0), w.Dim(1)
	if transW {
		k, n = n, k
	}
	if m == 0 || m >= foldGatherRows || x.Dim(1) != k || k < sharedProductMinCols {
		return nil
	}
	g := e.group("shard.FoldedGradient.ShareForward", f.axes)
	if g.size == 1 || n%g.size != 0 || n/g.size < sharedProductMinCols {
		return nil
	}
	return sharedProduct(e, g, f.axes, x, w, transW)
}

// sharedProduct computes x·w (x·wᵀ with transW) for the device of rank g.rank in g with the
// other devices of g (see FoldedGradient.ShareForward) and returns the
// device's rows, fresh.
func sharedProduct(e *devEnv, g group, axes []string, x, w *tensor.Tensor, transW bool) *tensor.Tensor {
	m, k, n := x.Dim(0), x.Dim(1), w.Dim(1)
	if transW {
		n = w.Dim(0)
	}
	// Every device copies its rows into the shared operand before it
	// arrives: one meeting for the operand, a barrier for the product.
	s := e.run.next(e)
	gx := e.gatherInto(s, g, g.key, x)
	gy := sharedResult(s, ^g.key, func() *tensor.Tensor { return tensor.Empty(tensor.Float32, g.size*m, n) })
	ws := unsafe.Pointer(unsafe.SliceData(w.BorrowFloat32()))
	cl := &call{coll: sharedProductColl, axes: axes, x: x, data: ws,
		extra: fmt.Sprintf("product ·%v transposed %v", w, transW)}
	if got := e.run.meet(e, cl); got != s {
		panic("shard: internal error: the shared product met in another slot than its operand's")
	}
	defer e.run.leave(s)
	same := true
	for _, d := range g.members {
		if s.calls[d].data.(unsafe.Pointer) != ws {
			same = false
		}
	}
	var out *tensor.Tensor
	if same {
		// Blocks of columns for every device's rows, claimed by the
		// devices as they reach them: with more devices than cores the
		// devices running compute them all, and the last block leaves a
		// core idle for one block, not for a device's share.
		v, _ := s.shared.LoadOrStore(sharedColumnsKey{g.key}, new(atomic.Int32))
		next := v.(*atomic.Int32)
		blocks := sharedProductBlocks(n)
		for b := int(next.Add(1)) - 1; b < blocks; b = int(next.Add(1)) - 1 {
			j0, j1 := sharedProductBlock(n, blocks, b)
			tensor.ProductColumnsInto(gy, gx, w, transW, j0, j1) // w's mark: on this goroutine
		}
		e.run.barrier(e, s)
		if transW || !viewRows {
			out = tensor.Empty(tensor.Float32, m, n)
			copy(out.BorrowFloat32(), gy.BorrowFloat32()[g.rank*m*n:(g.rank+1)*m*n])
		} else {
			// The device's rows of the forward product where they are
			// (the caller writes the bias and activation over them),
			// and so the next product's rows in place: the next layer's
			// gather finds them there (gatherInto).
			out = tensor.RowsView(gy, g.rank*m, (g.rank+1)*m)
			e.keepGathered(g, out, gy)
		}
	} else {
		// The devices' w differ in storage (they may differ in value):
		// each computes its own rows, as it would have alone.
		out = tensor.Empty(tensor.Float32, m, n)
		tensor.ProductColumnsInto(out, x, w, transW, 0, n)
	}
	if same && !transW {
		// The gathered rows of the forward product: a fold's gathered p
		// (the layer's input, gatherRows) is the same rows.
		e.keepGathered(g, x, gx)
	}
	e.doneWithSharedKey(s, g, g.key, gx)
	e.doneWithSharedKey(s, g, ^g.key, gy)
	e.account(sharedProductColl, int64(g.size-1)*int64(m*k)*4)
	return out
}

// sharedColumnsKey keys, in a slot's shared results, the counter of the
// blocks of columns a shared product's group has claimed.
type sharedColumnsKey struct{ group int }

// sharedProductCols is the width of the blocks of columns the devices of
// a shared product claim: two of the AVX-512 gemm's strips.
const sharedProductCols = 64

// sharedProductBlocks returns the number of blocks of columns of a shared
// product of n columns: blocks of sharedProductCols, the last at least
// half as wide (a narrower one joins the block before it).
func sharedProductBlocks(n int) int {
	return max(1, (n+sharedProductCols/2)/sharedProductCols)
}

// sharedProductBlock returns the columns [j0, j1) of block b of the
// blocks blocks of n columns (sharedProductBlocks).
func sharedProductBlock(n, blocks, b int) (j0, j1 int) {
	j0 = b * sharedProductCols
	if b == blocks-1 {
		return j0, n
	}
	return j0, j0 + sharedProductCols
}

// doneWithSharedKey is doneWithShared for the result of group g stored
// under key (sharedResult): the last local member of g done reading it
// donates out's header.
func (e *devEnv) doneWithSharedKey(s *slot, g group, key int, out *tensor.Tensor) {
	local := int32(0)
	for _, m := range g.members {
		if e.mesh.isLocal(m) {
			local++
		}
	}
	if v, ok := s.shared.Load(key); ok && v.(*lazyResult).marks.Add(1) == local {
		tensor.Donate(out)
	}
}

// gatheredRows records a device's rows x gathered, at the device's rank
// in group key of size devices, into all, an operand of the group's rows
// in rank order, during run. Both are headers of the record's own: x's
// storage can be neither recycled nor written in place while recorded
// (its holder is not alone), so a later x over the same storage has the
// same values, and the device's rows of all are the device's to write
// (every device of the group writes its own rows alone). A forward
// product's rows taken as a view of the group's result (viewRows) are
// recorded as gathered there: they are all's rows themselves, whatever
// the caller writes over them. A later gather
// of the same rows into an operand of the same group (a fold's p, the
// layer input a shared forward product gathered; an input gradient's
// cotangent, which a fold gathered as its q) takes all as it is.
type gatheredRows struct {
	run             *run
	key, size, rank int
	x, all          *tensor.Tensor
}

// viewRows makes a device take its rows of a shared forward product as a
// view of the group's result (tensor.RowsView) rather than a copy. A
// variable for the tests and the benchmark.
var viewRows = true

// reuseGathered makes the devices take rows gathered before as they are
// (gatheredRows) rather than copy them again. A variable for the tests
// and the benchmark.
var reuseGathered = true

// keepGathered records that x's rows are gathered into all for group g
// (gatheredRows), dropping records of earlier runs.
func (e *devEnv) keepGathered(g group, x, all *tensor.Tensor) {
	if !reuseGathered || x.Size() == 0 {
		return
	}
	e.dropGathered(func(r *gatheredRows) bool { return r.run != e.run })
	e.gathered = append(e.gathered, gatheredRows{run: e.run, key: g.key, size: g.size, rank: g.rank,
		x: tensor.WithLocal(x, x.Local()), all: tensor.WithLocal(all, all.Local())})
}

// dropGathered forgets the records for which drop reports true, donating
// their headers.
func (e *devEnv) dropGathered(drop func(r *gatheredRows) bool) {
	kept := e.gathered[:0]
	for i := range e.gathered {
		r := &e.gathered[i]
		if drop(r) {
			tensor.Donate(r.x, r.all)
			continue
		}
		kept = append(kept, *r)
	}
	clear(e.gathered[len(kept):])
	e.gathered = kept
}

// gatherInto returns the operand of the rows of every device of g that
// the devices share under key in slot s, with x's rows (float32 [m, k])
// in this device's: the rows this device recorded as gathered for the
// same group (gatheredRows) if the first device of g to get here had
// such an operand, or fresh storage. The device copies its rows in unless
// the operand is the one it recorded for x (they are there already);
// once copied over, its records of that operand are dropped. Every
// device's rows are in place once all have met in s.
func (e *devEnv) gatherInto(s *slot, g group, key int, x *tensor.Tensor) *tensor.Tensor {
	m, k := x.Dim(0), x.Dim(1)
	xs := x.BorrowFloat32()
	var rec *gatheredRows
	for i := range e.gathered {
		r := &e.gathered[i]
		if r.run == e.run && r.key == g.key && r.size == g.size && r.rank == g.rank && r.x.Dim(0) == m && r.x.Dim(1) == k &&
			len(xs) > 0 && &r.x.BorrowFloat32()[0] == &xs[0] {
			rec = r
			break
		}
	}
	all := sharedResult(s, key, func() *tensor.Tensor {
		if rec != nil {
			return tensor.WithLocal(rec.all, nil) // the slot's own header
		}
		return tensor.Empty(tensor.Float32, g.size*m, k)
	})
	at := all.BorrowFloat32()
	if rec != nil && &at[0] == &rec.all.BorrowFloat32()[0] { // (a record's rows are not empty)
		gatheredInPlace.Add(1)
		return all // this device's rows are there already
	}
	placeRuns(at, xs, x.Shape(), 0, g.rank, g.size)
	if len(at) > 0 {
		// Rows of another value now: no record of this operand holds.
		e.dropGathered(func(r *gatheredRows) bool { return r.all.Size() > 0 && &r.all.BorrowFloat32()[0] == &at[0] })
	}
	return all
}

// gatheredInPlace counts the gathers whose rows were in place already
// (gatherInto), for the tests.
var gatheredInPlace atomic.Int64
