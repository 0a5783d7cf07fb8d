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
	gx := sharedResult(s, g.key, func() *tensor.Tensor { return tensor.Empty(tensor.Float32, g.size*m, k) })
	gy := sharedResult(s, ^g.key, func() *tensor.Tensor { return tensor.Empty(tensor.Float32, g.size*m, n) })
	placeRuns(gx.BorrowFloat32(), x.BorrowFloat32(), x.Shape(), 0, g.rank, g.size)
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
	out := tensor.Empty(tensor.Float32, m, n)
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
		copy(out.BorrowFloat32(), gy.BorrowFloat32()[g.rank*m*n:(g.rank+1)*m*n])
	} else {
		// The devices' w differ in storage (they may differ in value):
		// each computes its own rows, as it would have alone.
		tensor.ProductColumnsInto(out, x, w, transW, 0, n)
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
