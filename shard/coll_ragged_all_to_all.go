package shard

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/gonox/gonox/tensor"
)

// raggedColl is the ragged all-to-all (see collective):
// Ctx.RaggedAllToAll and Ctx.RaggedAllToAllRows, whose transpose is the
// latter with the offsets swapped. The devices' operands differ in rows;
// each call carries its offsets and sizes (a raggedCall), which travel
// with the block between processes, where the remote blocks are brought
// whole.
var raggedColl = &collective{
	kind:       "ragged_all_to_all",
	cross:      eachGroup((*crossGroup).blocks),
	rowsDiffer: true,
	wire: func(c *call) []int {
		rc := c.data.(*raggedCall)
		return slices.Concat(rc.io, rc.ss, rc.oo, rc.rs)
	},
	unwire: func(x *tensor.Tensor, v []int) any {
		k := len(v) / 4
		return &raggedCall{operand: x, io: v[:k], ss: v[k : 2*k], oo: v[2*k : 3*k], rs: v[3*k:]}
	},
}

// raggedOp writes the received rows into the caller's output buffer
// (RaggedAllToAll); raggedRowsOp into zeros of its own (RaggedAllToAllRows),
// and keeps what the meeting told it about the peers' offsets for its VJP,
// which then needs no meeting besides the transposed exchange;
// raggedTakeOp is raggedRowsOp whose senders' rows are read through an
// index (RaggedAllToAllTake).
var raggedOp, raggedRowsOp, raggedTakeOp *tensor.Op

func init() {
	raggedOp = &tensor.Op{
		Name: "ragged_all_to_all",
		// Moves rows of any dtype; its VJP is a synchronous ragged
		// all-to-all.
		Traits: tensor.Traits{Half: tensor.NativeHalf, Types: tensor.TypesAll, Placement: tensor.SyncVJP},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			out, _ := raggedImpl(in[0], in[1], nil, in[2:], pp.(*raggedParams), nil)
			return out
		},
		VJPNeed: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, pp any, need uint64) []*tensor.Tensor {
			p := pp.(*raggedParams)
			e := p.env
			operand := in[0]
			io, oo := in[2], in[4]
			ss, rs := in[3].Ints(), in[5].Ints()
			// Where my rows went on each peer, and where they came from.
			ooX := allToAll(e, oo, p.axes, 0, 0, true).Ints()
			ioX := allToAll(e, io, p.axes, 0, 0, true).Ints()
			gOperand := raggedRows(e, g, operand.Dim(0), &raggedCall{io: ooX, ss: rs, oo: ioX, rs: ss}, p.axes)
			if !tensor.Wants(need, 1) {
				// The output buffer is a constant (zeros, usually).
				return []*tensor.Tensor{remarkFresh(gOperand, operand), nil, nil, nil, nil, nil}
			}
			// The output buffer's cotangent: g where nothing was written.
			written := writtenRows(g.Dim(0), ooX, rs)
			shape := make([]int, g.Rank())
			for i := range shape {
				shape[i] = 1
			}
			shape[0] = len(written)
			mask := tensor.Reshape(tensor.FromBool(written), shape...)
			gOutput := tensor.Where(mask, tensor.Zeros(g.DType()), g)
			return []*tensor.Tensor{remarkFresh(gOperand, operand), remarkFresh(gOutput, in[1]), nil, nil, nil, nil}
		},
		Save: tensor.SaveInputs(2, 3, 4, 5),
	}
	raggedRowsOp = &tensor.Op{
		Name:   "ragged_all_to_all",
		Traits: raggedOp.Traits,
		ImplN: func(in []*tensor.Tensor, pp any) ([]*tensor.Tensor, any) {
			out, back := raggedImpl(in[0], nil, nil, in[1:], pp.(*raggedParams), nil)
			return []*tensor.Tensor{out}, back
		},
		VJPN: func(gs, in, _ []*tensor.Tensor, pp, state any) []*tensor.Tensor {
			p := pp.(*raggedParams)
			g := raggedRows(p.env, gs[0], in[0].Dim(0), state.(*raggedCall), p.axes)
			return []*tensor.Tensor{remarkFresh(g, in[0]), nil, nil, nil, nil}
		},
		// The VJP reads the operand's shape and the state alone.
		Save: 0,
	}
	raggedTakeOp = &tensor.Op{
		Name:   "ragged_all_to_all_take",
		Traits: raggedOp.Traits,
		ImplN: func(in []*tensor.Tensor, pp any) ([]*tensor.Tensor, any) {
			out, back := raggedImpl(in[0], nil, in[1], in[2:], pp.(*raggedParams), nil)
			return []*tensor.Tensor{out}, back
		},
		// The transposed exchange brings the cotangents of the sent rows
		// back, which Take's VJP sums into the operand's rows: as the
		// separate Take and RaggedAllToAllRows did, in the same order.
		// Untraced float32 cotangents are summed where the senders'
		// blocks hold them, without the received rows' buffer
		// (raggedRowsSum): the same sums, row for row.
		VJPN: func(gs, in, _ []*tensor.Tensor, pp, state any) []*tensor.Tensor {
			p := pp.(*raggedParams)
			index := in[1]
			if fusedRaggedSum(gs[0]) {
				sum := raggedRowsSum(p.env, gs[0], index, in[0].Dim(0), state.(*raggedCall), p.axes)
				return []*tensor.Tensor{remarkFresh(sum, in[0]), nil, nil, nil, nil, nil}
			}
			g := raggedRows(p.env, gs[0], index.Dim(0), state.(*raggedCall), p.axes)
			sum := tensor.SegmentSum(g, index, in[0].Dim(0))
			if !g.IsTraced() {
				tensor.Donate(g)
			}
			return []*tensor.Tensor{remarkFresh(sum, in[0]), nil, nil, nil, nil, nil}
		},
		Save: tensor.SaveInputs(1),
	}
	register(raggedColl, raggedOp, raggedRowsOp, raggedTakeOp)
}

// raggedParams are the parameters of a ragged all-to-all: the
// collective's, and for RaggedAllToAllRows the rows of the output.
type raggedParams struct {
	collParams
	rows int
}

// raggedCall is what a device brings to a ragged all-to-all: its operand
// and its offsets and sizes, u entries per device of the group (see
// Ctx.RaggedAllToAllRows). The VJP of RaggedAllToAllRows keeps one as the
// transposed call's offsets and sizes (operand nil).
type raggedCall struct {
	operand        *tensor.Tensor
	io, ss, oo, rs []int
	index          []int // the rows sent are operand's rows index[i] (nil: operand's rows)
}

// raggedArgs checks a ragged all-to-all's operands (output is nil for
// RaggedAllToAllRows).
// checkRaggedOperands checks the operands xs of a ragged all-to-all op
// as checkLocal does, naming a nil one: the first by names (space
// separated), the four after them as the offsets and sizes.
func checkRaggedOperands(c *Ctx, op, names string, xs []*tensor.Tensor) {
	all := append(strings.Fields(names), "inputOffsets", "sendSizes", "outputOffsets", "recvSizes")
	for i, x := range xs {
		if x == nil {
			panic(fmt.Sprintf("%s: operand %s is nil", op, all[i]))
		}
		checkLocal(op, c, x)
	}
}

func raggedArgs(op string, g group, operand, output *tensor.Tensor, offs []*tensor.Tensor) {
	if operand.Rank() == 0 || (output != nil && (output.Rank() == 0 || operand.DType() != output.DType() ||
		!slices.Equal(operand.BorrowShape()[1:], output.BorrowShape()[1:]))) {
		panic(fmt.Sprintf("%s: operand %v and output %v must have the same dtype and trailing dimensions", op, operand, output))
	}
	n := offs[0].Size()
	for _, v := range offs {
		if v.DType() != tensor.Int32 || v.Rank() != 1 || v.Dim(0) != n || n == 0 || n%g.size != 0 {
			panic(fmt.Sprintf("%s: offsets and sizes must be i32[%d·u] (u entries per device along %d devices), all of one length, got %v", op, g.size, g.size, v))
		}
	}
}

func raggedAllToAll(e *devEnv, operand, output, io, ss, oo, rs *tensor.Tensor, axes []string) *tensor.Tensor {
	const op = "shard.Ctx.RaggedAllToAll"
	m := e.maskOf(op, axes)
	raggedArgs(op, e.group(op, axes), operand, output, []*tensor.Tensor{io, ss, oo, rs})
	vo := tensor.Vary(operand, e.Local(maskOf(operand)|m))
	vb := tensor.Vary(output, e.Local(maskOf(output)|m))
	y := tensor.Apply(raggedOp, &raggedParams{collParams: collParams{env: e, axes: slices.Clone(axes), mask: m}, rows: -1}, vo, vb, io, ss, oo, rs)
	// Marked copies made here are dead once every device has read them
	// (when the op returns), unless a trace recorded the op: a checkpoint
	// may replay it with them.
	if !y.IsTraced() {
		for _, v := range [][2]*tensor.Tensor{{vo, operand}, {vb, output}} {
			if v[0] != v[1] {
				tensor.Donate(v[0])
			}
		}
	}
	return y
}

// raggedRows is RaggedAllToAllRows with the offsets and sizes of rc.
func raggedRows(e *devEnv, operand *tensor.Tensor, rows int, rc *raggedCall, axes []string) *tensor.Tensor {
	offs := []*tensor.Tensor{tensor.FromInts(rc.io), tensor.FromInts(rc.ss), tensor.FromInts(rc.oo), tensor.FromInts(rc.rs)}
	return raggedRowsApply(e, operand, rows, offs, axes)
}

// fusedRaggedSum reports whether RaggedAllToAllTake's VJP takes
// raggedRowsSum for the cotangent g: float32 and untraced (a traced one
// needs the exchange and the sum as ops, for the next derivative). Every
// device of the exchange decides alike: the cotangents of one op share
// dtype and tracing.
func fusedRaggedSum(g *tensor.Tensor) bool {
	return g.DType() == tensor.Float32 && !g.IsTraced()
}

// raggedRowsSum is tensor.SegmentSum(raggedRows(e, operand, len(ids),
// rc, axes), ids, segments) without the exchange's output: this device
// sums the rows the devices send it where their blocks hold them
// (tensor.SegmentSumRows), in the order of the output's rows, so the
// result has the bits of the exchange followed by the sum. It meets the
// other devices as raggedRows does, and operand must not be traced. The
// result is a host tensor, for the caller to mark.
func raggedRowsSum(e *devEnv, operand, ids *tensor.Tensor, segments int, rc *raggedCall, axes []string) *tensor.Tensor {
	const op = "shard.Ctx.RaggedAllToAllTake"
	offs := []*tensor.Tensor{tensor.FromInts(rc.io), tensor.FromInts(rc.ss), tensor.FromInts(rc.oo), tensor.FromInts(rc.rs)}
	m := e.maskOf(op, axes)
	raggedArgs(op, e.group(op, axes), operand, nil, offs)
	vo := tensor.Vary(operand, e.Local(maskOf(operand)|m))
	p := &raggedParams{collParams: collParams{env: e, axes: slices.Clone(axes), mask: m}, rows: ids.Dim(0)}
	sum, _ := raggedImpl(vo, nil, nil, offs, p, &raggedSink{ids: ids, segments: segments})
	if vo != operand {
		tensor.Donate(vo)
	}
	return sum
}

// raggedSink, given to raggedImpl, sums the rows received into segments
// at ids (one per row of the output) instead of writing them out.
type raggedSink struct {
	ids      *tensor.Tensor
	segments int
}

func raggedRowsApply(e *devEnv, operand *tensor.Tensor, rows int, offs []*tensor.Tensor, axes []string) *tensor.Tensor {
	return raggedRowsTake(e, operand, nil, rows, offs, axes)
}

// raggedRowsTake is RaggedAllToAllRows, of operand's rows through index
// unless index is nil (RaggedAllToAllTake).
func raggedRowsTake(e *devEnv, operand, index *tensor.Tensor, rows int, offs []*tensor.Tensor, axes []string) *tensor.Tensor {
	op := "shard.Ctx.RaggedAllToAllRows"
	if index != nil {
		op = "shard.Ctx.RaggedAllToAllTake"
	}
	m := e.maskOf(op, axes)
	raggedArgs(op, e.group(op, axes), operand, nil, offs)
	if rows < 0 {
		panic(fmt.Sprintf("%s: negative output rows %d", op, rows))
	}
	vo := tensor.Vary(operand, e.Local(maskOf(operand)|m))
	p := &raggedParams{collParams: collParams{env: e, axes: slices.Clone(axes), mask: m}, rows: rows}
	var y *tensor.Tensor
	if index == nil {
		y = tensor.ApplyN(raggedRowsOp, p, vo, offs[0], offs[1], offs[2], offs[3])[0]
	} else {
		y = tensor.ApplyN(raggedTakeOp, p, vo, index, offs[0], offs[1], offs[2], offs[3])[0]
	}
	if vo != operand && !y.IsTraced() {
		tensor.Donate(vo) // as in raggedAllToAll
	}
	return y
}

// raggedImpl is the exchange: this device's output (a copy of the buffer
// output, or zeros of p.rows rows where nothing is written) with the rows
// the devices send it, and the transposed call's offsets and sizes (what
// RaggedAllToAllRows's VJP sends back where). With an index, the rows a
// device sends are its operand's rows index[i], which the receivers copy
// from the operand itself. With a sink, the result is instead the
// segment sum of the output's rows (sink), read where the senders hold
// them: a host tensor, unmarked, and not a result of the exchange's op.
func raggedImpl(operand, output, index *tensor.Tensor, offs []*tensor.Tensor, p *raggedParams, sink *raggedSink) (*tensor.Tensor, *raggedCall) {
	e := p.env
	g := e.group("shard.RaggedAllToAll", p.axes)
	x := operand
	operand = tensor.WithLocal(operand, nil)
	// The four offsets and sizes, then the transposed call's io and oo
	// (below), in one allocation.
	k := offs[0].Dim(0)
	ints := make([]int, 6*k)
	for i, v := range offs {
		for j, x := range v.BorrowInt32() {
			ints[i*k+j] = int(x)
		}
	}
	rc := &raggedCall{operand: operand, io: ints[:k:k], ss: ints[k : 2*k : 2*k], oo: ints[2*k : 3*k : 3*k], rs: ints[3*k : 4*k : 4*k]}
	if index != nil {
		rc.index = index.Ints()
	}
	u := len(rc.io) / g.size
	s := e.run.meet(e, &call{coll: raggedColl, axes: p.axes, x: x, extra: raggedKey(operand, u), data: rc, members: g.members})
	defer e.run.leave(s)
	rows := p.rows
	if output != nil {
		rows = output.Dim(0)
	}
	shape := append([]int{rows}, operand.BorrowShape()[1:]...)
	var out *tensor.Tensor
	if sink == nil {
		out = tensor.Empty(operand.DType(), shape...) // filled below
	}
	rowSize := 1
	for _, d := range shape[1:] {
		rowSize *= d
	}
	back := &raggedCall{io: ints[4*k : 5*k : 5*k], ss: rc.rs, oo: ints[5*k:], rs: rc.ss}
	if output != nil {
		copyRows(out, 0, output, 0, rows, rowSize, nil)
	}
	var sent int64
	for j, m := range g.members {
		src := s.calls[m].data.(*raggedCall)
		for q := range u {
			me, peer := g.rank*u+q, j*u+q
			n, at, from := src.ss[me], src.oo[me], src.io[me]
			if n != rc.rs[peer] {
				panic(fmt.Sprintf("shard.Ctx.RaggedAllToAll: device rank %d expects %d rows from rank %d, which sends %d", g.rank, rc.rs[peer], j, n))
			}
			if n < 0 || from < 0 || from+n > src.sentRows() {
				panic(fmt.Sprintf("shard.Ctx.RaggedAllToAll: rank %d sends rows [%d,%d) of its %s", j, from, from+n, src.sent()))
			}
			if at < 0 || at+n > rows {
				panic(fmt.Sprintf("shard.Ctx.RaggedAllToAll: rank %d writes rows [%d,%d) of the output of rank %d, which has %d", j, at, at+n, g.rank, rows))
			}
			back.io[peer], back.oo[peer] = at, from
			if j != g.rank {
				sent += int64(rc.ss[peer] * rowSize * operand.DType().Size())
			}
		}
	}
	switch {
	case sink != nil:
		out = sumRows(s, g, u, back, rows, rowSize, shape[1:], sink)
	default:
		if output == nil {
			zeroUnwritten(out, writtenRows(rows, back.io, back.ss), rowSize)
		}
		for j, m := range g.members {
			src := s.calls[m].data.(*raggedCall)
			for q := range u {
				peer := j*u + q
				copyRows(out, back.io[peer], src.operand, back.oo[peer], back.ss[peer], rowSize, src.index)
			}
		}
	}
	// The other devices read each call's operand through the header of
	// its own the call made (operand), which holds the storage whatever
	// its device does with the caller's header meanwhile: the last device
	// done reading donates them all, and no device waits for the others
	// to finish reading, as a barrier would make it. When the groups
	// meet on their own (call.group), the last of each group donates its
	// group's.
	if e.run.lastOutOf(e, s) {
		donate := func(m int) {
			if cl := s.calls[m]; cl != nil && e.mesh.isLocal(m) {
				tensor.Donate(cl.data.(*raggedCall).operand)
			}
		}
		if s.calls[e.dev].gm != nil {
			for _, m := range g.members {
				donate(m)
			}
		} else {
			for m := range s.calls {
				donate(m)
			}
		}
	}
	e.account(raggedColl, sent)
	if sink != nil {
		return out, back
	}
	mask := maskOf(x) | p.mask
	if output != nil {
		mask |= maskOf(output)
	}
	return e.markedFresh(out, mask), back
}

// sumRows is raggedImpl's segment sum into sink of the rows the meeting
// s brings (rows of rowSize float32 elements, trailing dimensions
// trailing): row r of the output the exchange would write is the
// sender's row where back says, or zeros where no device writes.
func sumRows(s *slot, g group, u int, back *raggedCall, rows, rowSize int, trailing []int, sink *raggedSink) *tensor.Tensor {
	at := make([][]float32, rows)
	for j, m := range g.members {
		src := s.calls[m].data.(*raggedCall)
		f := src.operand.BorrowFloat32()
		for q := range u {
			peer := j*u + q
			from := back.oo[peer]
			for r := range back.ss[peer] {
				i := from + r
				if src.index != nil {
					i = src.index[i]
				}
				at[back.io[peer]+r] = f[i*rowSize : (i+1)*rowSize]
			}
		}
	}
	var zero []float32
	for r, v := range at {
		if v == nil {
			if zero == nil {
				zero = make([]float32, rowSize)
			}
			at[r] = zero
		}
	}
	return tensor.SegmentSumRows(at, sink.ids, sink.segments, trailing...)
}

// raggedKey is what the devices' calls of a ragged all-to-all must agree
// on besides the dtype: the operand's trailing dimensions and the entries
// per device, as "[d1 d2 ...] u".
func raggedKey(operand *tensor.Tensor, u int) string {
	b := make([]byte, 0, 32)
	b = append(b, '[')
	for i := 1; i < operand.Rank(); i++ {
		if i > 1 {
			b = append(b, ' ')
		}
		b = strconv.AppendInt(b, int64(operand.Dim(i)), 10)
	}
	b = append(b, "] "...)
	return string(strconv.AppendInt(b, int64(u), 10))
}

// writtenRows marks the rows of an output of n rows that the groups at
// offsets offs of sizes sizes cover.
func writtenRows(n int, offs, sizes []int) []bool {
	written := make([]bool, n)
	for j, at := range offs {
		for k := at; k < at+sizes[j]; k++ {
			written[k] = true
		}
	}
	return written
}

// zeroUnwritten clears the rows of out that written does not mark.
func zeroUnwritten(out *tensor.Tensor, written []bool, rowSize int) {
	for k := 0; k < len(written); {
		if written[k] {
			k++
			continue
		}
		end := k
		for end < len(written) && !written[end] {
			end++
		}
		clearRows(out, k, end-k, rowSize)
		k = end
	}
}

// sent describes what the rows rc sends are counted in, for messages:
// its operand, or the index into it (RaggedAllToAllTake).
func (rc *raggedCall) sent() string {
	if rc.index != nil {
		return fmt.Sprintf("index of %d entries into operand %v", len(rc.index), rc.operand)
	}
	return fmt.Sprintf("operand %v", rc.operand)
}

// sentRows returns how many rows the call's operand sends from: its rows,
// or its index's entries.
func (rc *raggedCall) sentRows() int {
	if rc.index != nil {
		return len(rc.index)
	}
	return rc.operand.Dim(0)
}

// copyRows copies n rows from src starting at row from into dst at row at;
// with an index, the rows src's rows index[from], index[from+1], ....
func copyRows(dst *tensor.Tensor, at int, src *tensor.Tensor, from, n, rowSize int, index []int) {
	// Borrowed, not pinned: both may be donated (recycled) later.
	switch dst.DType() {
	case tensor.Float32:
		moveRows(dst.BorrowFloat32(), at, src.BorrowFloat32(), from, n, rowSize, index)
	case tensor.Int32:
		moveRows(dst.BorrowInt32(), at, src.BorrowInt32(), from, n, rowSize, index)
	case tensor.Bool:
		moveRows(dst.RawBool(), at, src.RawBool(), from, n, rowSize, index)
	case tensor.BFloat16, tensor.Float16:
		moveRows(dst.RawUint16(), at, src.RawUint16(), from, n, rowSize, index)
	case tensor.Float64:
		moveRows(dst.BorrowFloat64(), at, src.BorrowFloat64(), from, n, rowSize, index)
	case tensor.Int64:
		moveRows(dst.BorrowInt64(), at, src.BorrowInt64(), from, n, rowSize, index)
	case tensor.Uint8:
		moveRows(dst.RawUint8(), at, src.RawUint8(), from, n, rowSize, index)
	}
}

// moveRows is copyRows on the elements.
func moveRows[T any](dst []T, at int, src []T, from, n, rowSize int, index []int) {
	if index == nil {
		copy(dst[at*rowSize:(at+n)*rowSize], src[from*rowSize:(from+n)*rowSize])
		return
	}
	for r, i := range index[from : from+n] {
		copy(dst[(at+r)*rowSize:(at+r+1)*rowSize], src[i*rowSize:(i+1)*rowSize])
	}
}

// clearRows zeroes n rows of dst from row at.
func clearRows(dst *tensor.Tensor, at, n, rowSize int) {
	a, c := at*rowSize, n*rowSize
	switch dst.DType() {
	case tensor.Float32:
		clear(dst.BorrowFloat32()[a : a+c])
	case tensor.Int32:
		clear(dst.BorrowInt32()[a : a+c])
	case tensor.Bool:
		clear(dst.RawBool()[a : a+c])
	case tensor.BFloat16, tensor.Float16:
		clear(dst.RawUint16()[a : a+c])
	case tensor.Float64:
		clear(dst.BorrowFloat64()[a : a+c])
	case tensor.Int64:
		clear(dst.BorrowInt64()[a : a+c])
	case tensor.Uint8:
		clear(dst.RawUint8()[a : a+c])
	}
}

// RaggedAllToAll exchanges variable-sized groups of rows between the
// devices along axes, as jax.lax.ragged_all_to_all: this device sends rows
// [inputOffsets[j], inputOffsets[j]+sendSizes[j]) of operand to device j,
// which writes them at outputOffsets[j] of its own output; recvSizes[j] is
// how many rows this device receives from device j. The result is output
// with the received rows written in. Offsets and sizes are int32 vectors
// with one entry per device along the axes, or u entries per device (XLA's
// updates per device; see RaggedAllToAllRows). It is differentiable in
// operand and output.
func (c *Ctx) RaggedAllToAll(operand, output, inputOffsets, sendSizes, outputOffsets, recvSizes *tensor.Tensor, axes Axes) *tensor.Tensor {
	checkRaggedOperands(c, "shard.Ctx.RaggedAllToAll", "operand output", []*tensor.Tensor{operand, output, inputOffsets, sendSizes, outputOffsets, recvSizes})
	return raggedAllToAll(c.env, operand, output, inputOffsets, sendSizes, outputOffsets, recvSizes, axes)
}

// RaggedAllToAllRows is RaggedAllToAll into an output of rows rows (of
// operand's dtype and trailing dimensions) that it makes itself: the rows
// no device writes are zero, and there is no buffer for the caller to
// allocate and clear, nor for the call to copy.
//
// Offsets and sizes hold u ≥ 1 entries per device — i32[n·u] along axes
// of n devices, as XLA's ragged all-to-all with u updates per device:
// entry j·u+q describes the q-th group of rows this device sends to (or
// receives from) device j. So device j can receive a group from each
// sender for each of u destinations in its output (the rows of each of u
// experts, say, grouped by expert rather than by sender) in one exchange.
//
// It is differentiable in operand: the cotangent goes back by the
// transposed RaggedAllToAllRows, whose offsets the devices told each
// other in this one, so the backward pass meets them once.
func (c *Ctx) RaggedAllToAllRows(operand *tensor.Tensor, rows int, inputOffsets, sendSizes, outputOffsets, recvSizes *tensor.Tensor, axes Axes) *tensor.Tensor {
	offs := []*tensor.Tensor{inputOffsets, sendSizes, outputOffsets, recvSizes}
	checkRaggedOperands(c, "shard.Ctx.RaggedAllToAllRows", "operand", append([]*tensor.Tensor{operand}, offs...))
	return raggedRowsApply(c.env, operand, rows, offs, axes)
}

// RaggedAllToAllTake is RaggedAllToAllRows of tensor.Take(operand, index,
// 0) without forming it: the rows this device sends are operand's rows
// index[i] (inputOffsets and sendSizes count entries of index), and the
// devices receiving them copy them from operand directly, so a dispatch
// that gathers its tokens by destination (a MoE's, say) copies each row
// once instead of twice. index is i32[m] with entries in [0, rows of
// operand). It is differentiable in operand: the cotangent comes back by
// the transposed exchange and is summed into operand's rows as Take's is.
// Between processes the rows are gathered first (Take) and sent as
// RaggedAllToAllRows sends them.
func (c *Ctx) RaggedAllToAllTake(operand, index *tensor.Tensor, rows int, inputOffsets, sendSizes, outputOffsets, recvSizes *tensor.Tensor, axes Axes) *tensor.Tensor {
	const op = "shard.Ctx.RaggedAllToAllTake"
	offs := []*tensor.Tensor{inputOffsets, sendSizes, outputOffsets, recvSizes}
	checkRaggedOperands(c, op, "operand index", append([]*tensor.Tensor{operand, index}, offs...))
	if index.DType() != tensor.Int32 || index.Rank() != 1 || operand.Rank() == 0 {
		panic(fmt.Sprintf("%s: index %v must be i32[m] and operand %v have rows", op, index, operand))
	}
	for _, i := range index.BorrowInt32() {
		if i < 0 || int(i) >= operand.Dim(0) {
			panic(fmt.Sprintf("%s: index %d out of range for operand %v", op, i, operand))
		}
	}
	if c.env.mesh.spans() {
		return raggedRowsApply(c.env, tensor.Take(operand, index, 0), rows, offs, axes)
	}
	return raggedRowsTake(c.env, operand, index, rows, offs, axes)
}
