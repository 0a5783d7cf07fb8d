package shard

import (
	"fmt"
	"slices"

	"github.com/gonox/gonox/tensor"
)

// raggedColl is the ragged all-to-all (see collective):
// Ctx.RaggedAllToAll, whose transpose is itself with the offsets swapped.
// The devices' operands differ in rows; each call carries its offsets
// and sizes (a raggedCall), which travel with the block between
// processes, where the remote blocks are brought whole.
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

var raggedOp *tensor.Op

func init() {
	raggedOp = &tensor.Op{
		Name: "ragged_all_to_all",
		// Moves rows of any dtype; its VJP is a synchronous ragged
		// all-to-all.
		Traits: tensor.Traits{Half: tensor.NativeHalf, Types: tensor.TypesAll, Placement: tensor.SyncVJP},
		Impl: func(in []*tensor.Tensor, pp any) *tensor.Tensor {
			return raggedImpl(in, pp.(*collParams))
		},
		VJPNeed: func(g *tensor.Tensor, in []*tensor.Tensor, _ *tensor.Tensor, pp any, need uint64) []*tensor.Tensor {
			p := pp.(*collParams)
			e := p.env
			operand := in[0]
			io, ss, oo, rs := in[2], in[3], in[4], in[5]
			// Where my rows went on each peer, and where they came from.
			ooX := allToAll(e, oo, p.axes, 0, 0, true)
			ioX := allToAll(e, io, p.axes, 0, 0, true)
			zeros := e.markedFresh(tensor.Zeros(operand.DType(), operand.Shape()...), maskOf(g))
			gOperand := raggedAllToAll(e, g, zeros, ooX, rs, ioX, ss, p.axes)
			if !gOperand.IsTraced() {
				tensor.Donate(zeros) // the output buffer, read by the call alone
			}
			if !tensor.Wants(need, 1) {
				// The output buffer is a constant (zeros, usually).
				return []*tensor.Tensor{remarkFresh(gOperand, operand), nil, nil, nil, nil, nil}
			}
			// The output buffer's cotangent: g where nothing was written.
			written := make([]bool, g.Dim(0))
			offs, sizes := tensor.StopGradient(ooX).Ints(), rs.Ints()
			for j := range offs {
				for k := offs[j]; k < offs[j]+sizes[j]; k++ {
					written[k] = true
				}
			}
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
	register(raggedColl, raggedOp)
}

// raggedCall is what a device brings to a ragged all-to-all.
type raggedCall struct {
	operand        *tensor.Tensor
	io, ss, oo, rs []int
}

func raggedAllToAll(e *devEnv, operand, output, io, ss, oo, rs *tensor.Tensor, axes []string) *tensor.Tensor {
	const op = "shard.Ctx.RaggedAllToAll"
	m := e.maskOf(op, axes)
	g := e.group(op, axes)
	if operand.Rank() == 0 || output.Rank() == 0 || operand.DType() != output.DType() ||
		!slices.Equal(operand.Shape()[1:], output.Shape()[1:]) {
		panic(fmt.Sprintf("%s: operand %v and output %v must have the same dtype and trailing dimensions", op, operand, output))
	}
	for _, v := range []*tensor.Tensor{io, ss, oo, rs} {
		if v.DType() != tensor.Int32 || !slices.Equal(v.Shape(), []int{g.size}) {
			panic(fmt.Sprintf("%s: offsets and sizes must be i32[%d] (one per device along %s), got %v", op, g.size, axesLabel(axes), v))
		}
	}
	vo := tensor.Vary(operand, e.Local(maskOf(operand)|m))
	vb := tensor.Vary(output, e.Local(maskOf(output)|m))
	y := tensor.Apply(raggedOp, &collParams{env: e, axes: slices.Clone(axes), mask: m}, vo, vb, io, ss, oo, rs)
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

func raggedImpl(in []*tensor.Tensor, p *collParams) *tensor.Tensor {
	e := p.env
	g := e.group("shard.RaggedAllToAll", p.axes)
	operand, output := tensor.WithLocal(in[0], nil), tensor.WithLocal(in[1], nil)
	rc := &raggedCall{operand: operand, io: in[2].Ints(), ss: in[3].Ints(), oo: in[4].Ints(), rs: in[5].Ints()}
	shapeTail := fmt.Sprint(operand.Shape()[1:])
	s := e.run.meet(e, &call{coll: raggedColl, axes: p.axes, x: in[0], extra: shapeTail, data: rc})
	defer e.run.leave(s)
	out := tensor.Empty(output.DType(), output.Shape()...) // the copy below fills it
	rows := output.Dim(0)
	rowSize := 1
	for _, d := range output.Shape()[1:] {
		rowSize *= d
	}
	copyRows(out, 0, output, 0, rows, rowSize)
	var sent int64
	for j, m := range g.members {
		src := s.calls[m].data.(*raggedCall)
		n, at, from := src.ss[g.rank], src.oo[g.rank], src.io[g.rank]
		if n != rc.rs[j] {
			panic(fmt.Sprintf("shard.Ctx.RaggedAllToAll: device rank %d expects %d rows from rank %d, which sends %d", g.rank, rc.rs[j], j, n))
		}
		if n < 0 || from < 0 || from+n > src.operand.Dim(0) {
			panic(fmt.Sprintf("shard.Ctx.RaggedAllToAll: rank %d sends rows [%d,%d) of its operand %v", j, from, from+n, src.operand))
		}
		if at < 0 || at+n > rows {
			panic(fmt.Sprintf("shard.Ctx.RaggedAllToAll: rank %d writes rows [%d,%d) of the output %v of rank %d", j, at, at+n, output, g.rank))
		}
		copyRows(out, at, src.operand, from, n, rowSize)
		if j != g.rank {
			sent += int64(rc.ss[j] * rowSize * operand.DType().Size())
		}
	}
	// The operands are borrowed, not pinned: every device must be done
	// reading them before any returns and may donate its own.
	e.run.barrier(s)
	tensor.Donate(operand, output) // this call's own unmarked headers
	e.account(raggedColl, sent)
	return e.markedFresh(out, maskOf(in[0])|maskOf(in[1])|p.mask)
}

// copyRows copies n rows from src starting at row from into dst at row at.
func copyRows(dst *tensor.Tensor, at int, src *tensor.Tensor, from, n, rowSize int) {
	a, b, c := at*rowSize, from*rowSize, n*rowSize
	switch dst.DType() {
	case tensor.Float32:
		// Borrowed, not pinned: both may be donated (recycled) later.
		copy(dst.BorrowFloat32()[a:a+c], src.BorrowFloat32()[b:b+c])
	case tensor.Int32:
		copy(dst.BorrowInt32()[a:a+c], src.BorrowInt32()[b:b+c])
	case tensor.Bool:
		copy(dst.RawBool()[a:a+c], src.RawBool()[b:b+c])
	case tensor.BFloat16, tensor.Float16:
		copy(dst.RawUint16()[a:a+c], src.RawUint16()[b:b+c])
	case tensor.Float64:
		copy(dst.BorrowFloat64()[a:a+c], src.BorrowFloat64()[b:b+c])
	case tensor.Int64:
		copy(dst.BorrowInt64()[a:a+c], src.BorrowInt64()[b:b+c])
	case tensor.Uint8:
		copy(dst.RawUint8()[a:a+c], src.RawUint8()[b:b+c])
	}
}

// RaggedAllToAll exchanges variable-sized groups of rows between the
// devices along axes, as jax.lax.ragged_all_to_all: this device sends rows
// [inputOffsets[j], inputOffsets[j]+sendSizes[j]) of operand to device j,
// which writes them at outputOffsets[j] of its own output; recvSizes[j] is
// how many rows this device receives from device j. The result is output
// with the received rows written in. Offsets and sizes are int32 vectors
// with one entry per device along the axes. It is differentiable in
// operand and output.
func (c *Ctx) RaggedAllToAll(operand, output, inputOffsets, sendSizes, outputOffsets, recvSizes *tensor.Tensor, axes Axes) *tensor.Tensor {
	for _, x := range []*tensor.Tensor{operand, output, inputOffsets, sendSizes, outputOffsets, recvSizes} {
		checkLocal("shard.Ctx.RaggedAllToAll", c, x)
	}
	return raggedAllToAll(c.env, operand, output, inputOffsets, sendSizes, outputOffsets, recvSizes, axes)
}
