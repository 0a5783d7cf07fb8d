package shard_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestHalfPlacement: bfloat16 and float16 arrays are placed, resharded
// and gathered bit for bit, and shard.Map computes on their blocks.
func TestHalfPlacement(t *testing.T) {
	mesh := guideMesh() // all 8 devices, so that it also runs under mpirun
	x32 := tensor.Normal(tensor.NewKey(3), 8, 8)
	w32 := tensor.Normal(tensor.NewKey(4), 8, 4)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		x, w := tensor.Convert(x32, dt), tensor.Convert(w32, dt)
		for _, spec := range []shard.Spec{shard.P("dp"), shard.P("dp", "tp"), shard.P(nil, "tp"), shard.P()} {
			p := shard.Put(x, shard.NewSharding(mesh, spec))
			require.Equal(t, dt, p.DType())
			require.Equal(t, x.Bits16(), shard.Gather(p).Bits16(), "%v %v", dt, spec)
			r := shard.Reshard(p, shard.NewSharding(mesh, shard.P("tp", "dp")))
			require.Equal(t, x.Bits16(), shard.Gather(r).Bits16(), "%v %v resharded", dt, spec)
		}
		xs := shard.Put(x, shard.NewSharding(mesh, shard.P("dp")))
		prod := shard.Map(mesh, shard.P("dp"), shard.P("dp"), func(_ *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return tensor.MatMul(b, w)
		})(xs)
		require.Equal(t, tensor.MatMul(x, w).Bits16(), shard.Gather(prod).Bits16(), "%v: blockwise matmul", dt)
		// A psum of half blocks is computed in float32 and rounded once
		// per device; the row sums each device contributes are rounded
		// too, so compare with a tolerance of a few units of roundoff.
		sum := shard.Map(mesh, shard.P("dp"), shard.P(), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
			return c.Psum(tensor.Sum(b, 0), "dp")
		})(xs)
		require.Equal(t, dt, sum.DType())
		want := tensor.Sum(tensor.Convert(x, tensor.Float32), 0).Float64s()
		got := shard.Gather(sum).Float64s()
		for i := range want {
			require.InDelta(t, want[i], got[i], 4*0x1p-8*(1+abs(want[i])), "%v psum[%d]", dt, i)
		}
	}
}

// halfCase is a collective run on bf16/f16 blocks and on their float32
// widening; block is the float32 bytes of one f32[2,4] input block.
type halfCase struct {
	name  string
	kind  string
	out   shard.Spec
	f     func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor
	bytes func(block int64) int64 // per device, by the ring formulas
}

var halfCases = []halfCase{
	{"psum over dp (4)", "psum", shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Psum(x, "dp")
	}, func(b int64) int64 { return 2 * 3 * b / 4 }},
	{"psum over dp,tp (8)", "psum", shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Psum(x, "dp", "tp")
	}, func(b int64) int64 { return 2 * 7 * b / 8 }},
	{"pmax over tp (2)", "pmax", shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.Pmax(c.Vary(tensor.Mul(x, tensor.Scalar(float32(1+c.AxisIndex("tp")))), "tp"), "tp")
	}, func(b int64) int64 { return 2 * 1 * b / 2 }},
	{"all_gather over dp", "all_gather", shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.AllGatherInvariant(x, shard.Axes{"dp"}, 0, true)
	}, func(b int64) int64 { return 3 * b }},
	{"all_gather stacked over dp,tp", "all_gather", shard.P(nil, "dp", "tp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.AllGather(x, shard.Axes{"dp", "tp"}, 0, false)
	}, func(b int64) int64 { return 7 * b }},
	{"psum_scatter over dp,tp", "psum_scatter", shard.P([]string{"dp", "tp"}), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.PsumScatter(tensor.Concat(0, x, x, x, x), shard.Axes{"dp", "tp"}, 0, true)
	}, func(b int64) int64 { return 7 * 4 * b / 8 }},
	{"ring shift over dp", "ppermute", shard.P("dp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.RingShift(x, shard.Axes{"dp"}, 1)
	}, func(b int64) int64 { return b }},
	{"all_to_all over tp", "all_to_all", shard.P("dp", "tp"), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
		return c.AllToAll(c.Vary(x, "tp"), shard.Axes{"tp"}, 1, 0, true)
	}, func(b int64) int64 { return 1 * b / 2 }},
}

// TestHalfCollectives runs each collective on bf16 and f16 blocks and on
// their exact float32 widening. Data movement (all_gather, ppermute,
// all_to_all, pmax) gives the same values bit for bit; psum and
// psum_scatter accumulate in float32 and round once, so their result is
// the float32 result rounded, bit for bit. Comm charges the 16-bit bytes:
// half the float32 run's bytes, the ring formulas with 16-byte blocks.
func TestHalfCollectives(t *testing.T) {
	m := guideMesh()
	x32 := tensor.Normal(tensor.NewKey(11), 8, 4)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		x16 := tensor.Convert(x32, dt)
		wide := tensor.Convert(x16, tensor.Float32)
		for _, tc := range halfCases {
			t.Run(dt.String()+"/"+tc.name, func(t *testing.T) {
				var c16, c32 shard.Comm
				y16 := shard.Map(m, shard.P("dp"), tc.out, tc.f, shard.WithComm(&c16))(x16)
				y32 := shard.Map(m, shard.P("dp"), tc.out, tc.f, shard.WithComm(&c32))(wide)
				require.Equal(t, dt, y16.DType())
				require.Equal(t, tensor.Convert(shard.Gather(y32), dt).Bits16(), shard.Gather(y16).Bits16())
				if shard.ProcessCount() > 1 {
					return // Comm counts this process's devices only
				}
				require.Equal(t, 1, c16.Calls(tc.kind))
				for _, d := range m.Devices() {
					require.Equal(t, tc.bytes(32), c32.Bytes(d, tc.kind), "float32, device %d", d.ID())
					require.Equal(t, tc.bytes(16), c16.Bytes(d, tc.kind), "%v, device %d", dt, d.ID())
				}
			})
		}
	}
}

// TestHalfCollectivesBits: data movement keeps every bit, signalling NaN
// payloads included (a float32 round trip would quiet them).
func TestHalfCollectivesBits(t *testing.T) {
	m := guideMesh()
	bits := make([]uint16, 32)
	for i := range bits {
		bits[i] = uint16(0x3f80 + i)
	}
	bits[3], bits[9], bits[20] = 0x7f81, 0xff81, 0x0001 // sNaN, -sNaN, subnormal
	x := tensor.FromBits16(tensor.BFloat16, bits, 8, 4)
	for _, tc := range halfCases {
		if tc.kind != "all_gather" && tc.kind != "ppermute" && tc.kind != "all_to_all" {
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			y := shard.Gather(shard.Map(m, shard.P("dp"), tc.out, tc.f)(x)).Bits16()
			for _, v := range []uint16{0x7f81, 0xff81, 0x0001} {
				require.Contains(t, y, v)
			}
			require.NotContains(t, y, uint16(0x7fc1), "a quieted NaN")
		})
	}
}

// TestHalfRaggedAllToAll: ragged rows of bf16 move bit for bit, charged 2
// bytes an element.
func TestHalfRaggedAllToAll(t *testing.T) {
	m := shard.NewMesh([]int{8}, []string{"ep"})
	io, ss, oo, rs, rowsIn, rowsOut := raggedPlan(8)
	x32 := tensor.Normal(tensor.NewKey(5), 8*rowsIn, 3)
	run := func(x *tensor.Tensor, comm *shard.Comm) *tensor.Tensor {
		return shard.Gather(shard.Map(m, shard.P("ep"), shard.P("ep"), func(c *shard.Ctx, in raggedIn) *tensor.Tensor {
			out := c.Local(tensor.Zeros(in.X.DType(), rowsOut, 3))
			return c.RaggedAllToAll(in.X, out, in.IO, in.SS, in.OO, in.RS, shard.Axes{"ep"})
		}, shard.WithComm(comm))(raggedIn{x, io, ss, oo, rs}))
	}
	x16 := tensor.Convert(x32, tensor.BFloat16)
	var c16, c32 shard.Comm
	y16 := run(x16, &c16)
	y32 := run(tensor.Convert(x16, tensor.Float32), &c32)
	require.Equal(t, tensor.BFloat16, y16.DType())
	require.Equal(t, tensor.Convert(y32, tensor.BFloat16).Bits16(), y16.Bits16())
	// Device 0 sends (0+j)%2+1 rows of 3 elements to each j != 0:
	// 2+1+2+1+2+1+2 = 11.
	if shard.ProcessCount() > 1 {
		return // Comm counts this process's devices only
	}
	require.Equal(t, int64(11*3*2), c16.Bytes(m.Devices()[0], "ragged_all_to_all"))
	require.Equal(t, int64(11*3*4), c32.Bytes(m.Devices()[0], "ragged_all_to_all"))
}

// TestHalfCollectiveGrad differentiates through bf16 collectives: the
// transpose of an all-gather is a psum_scatter of bf16 cotangents (half
// the bytes of the float32 run), pmax's cotangent is bf16, and the
// gradient is the float32 run's within a few bf16 roundings.
func TestHalfCollectiveGrad(t *testing.T) {
	m := guideMesh()
	x := tensor.Convert(tensor.Normal(tensor.NewKey(2), 8, 4), tensor.BFloat16)
	grads := map[bool]*tensor.Tensor{}
	for _, wide := range []bool{false, true} {
		in := x
		if wide {
			in = tensor.Convert(x, tensor.Float32)
		}
		var comm shard.Comm
		f := shard.Map(m, shard.P("dp"), shard.P(), func(c *shard.Ctx, x *tensor.Tensor) *tensor.Tensor {
			g := c.AllGather(x, shard.Axes{"dp"}, 0, true)
			return tensor.Convert(c.Psum(tensor.Sum(tensor.Mul(g, c.Pmax(g, "tp"))), "dp"), tensor.Float32)
		}, shard.WithComm(&comm))
		grad := autodiff.Grad(f)(in)
		require.Equal(t, in.DType(), grad.DType())
		block := int64(8 * 4 * in.DType().Size())
		for _, d := range m.Devices() {
			if !d.IsLocal() {
				continue
			}
			require.Equal(t, 3*block/4, comm.Bytes(d, "psum_scatter"), "wide=%v", wide)
		}
		grads[wide] = tensor.Convert(grad, tensor.Float32)
	}
	want, got := grads[true].Float64s(), grads[false].Float64s()
	for i := range want {
		require.InDelta(t, want[i], got[i], 4*0x1p-8*(1+abs(want[i])), "grad[%d]", i)
	}
}

// TestHalfPropagation: sharding propagation on bf16 arrays. A matmul
// contracting a tp-sharded dimension leaves a pending sum, reduced by a
// psum of bf16 blocks in float32 and rounded once; resharding to P() is an
// all-gather and to P("tp","dp") an all-to-all. Every collective is
// charged the 16-bit bytes: half those of the same program on the float32
// widening; resharding moves the bf16 values bit for bit.
func TestHalfPropagation(t *testing.T) {
	if shard.ProcessCount() > 1 {
		// A propagated matmul whose contraction is sharded panics between
		// processes in float32 as well (step.run computes on the first
		// device of each replica group, which may be another process's).
		t.Skip("propagation of a partial-sum matmul is single-process")
	}
	m := guideMesh()
	xh := tensor.Convert(tensor.Normal(tensor.NewKey(7), 16, 8), tensor.BFloat16)
	wh := tensor.Convert(tensor.Normal(tensor.NewKey(8), 8, 4), tensor.BFloat16)
	run := func(dt tensor.DType) ([]*tensor.Tensor, *shard.Comm) {
		x := shard.Put(tensor.Convert(xh, dt), shard.NewSharding(m, shard.P("dp", "tp")))
		w := shard.Put(tensor.Convert(wh, dt), shard.NewSharding(m, shard.P("tp", nil)))
		var comm shard.Comm
		stop := shard.Record(m, &comm)
		y := shard.Constraint(tensor.MatMul(x, w), shard.NewSharding(m, shard.P("dp", nil)))
		y1 := shard.Reshard(y, shard.NewSharding(m, shard.P()))
		y2 := shard.Reshard(shard.Reshard(y, shard.NewSharding(m, shard.P("dp", "tp"))), shard.NewSharding(m, shard.P("tp", "dp")))
		stop()
		return []*tensor.Tensor{y, y1, y2}, &comm
	}
	h, ch := run(tensor.BFloat16)
	f, cf := run(tensor.Float32)
	require.Equal(t, "bfloat16[16@dp,4]", h[0].Type())
	// Each device's partial product is a bf16 block (rounded once), the
	// psum of those rounds once more: within two bf16 roundings.
	want, got := shard.Gather(f[0]).Float64s(), tensor.Convert(shard.Gather(h[0]), tensor.Float32).Float64s()
	for i := range want {
		require.InDelta(t, want[i], got[i], 3*0x1p-8*(1+abs(want[i])), "y[%d]", i)
	}
	for i := range h[1:] {
		require.Equal(t, shard.Gather(h[0]).Bits16(), shard.Gather(h[i+1]).Bits16(), "resharded %d", i+1)
	}
	if shard.ProcessCount() > 1 {
		return // Comm counts this process's devices only
	}
	for _, kind := range []string{"psum", "all_gather", "all_to_all"} {
		require.Positive(t, cf.Bytes(m.Devices()[0], kind), kind)
		for _, d := range m.Devices() {
			require.Equal(t, cf.Bytes(d, kind)/2, ch.Bytes(d, kind), "%s on device %d", kind, d.ID())
		}
	}
}

// TestHalfPropagationElementwise: ops that propagation computes block by
// block (elementwise, fused bias+activation, row-wise softmax, reductions
// over an unsharded axis) give on bf16/f16 placed operands the values and
// dtype of the same op on the host, bit for bit: each block is widened to
// float32, computed and rounded once, as on the host. (The blocks used to
// be handed to the float32 kernels as they were, which read no data and
// returned zeros of the wrong dtype.)
func TestHalfPropagationElementwise(t *testing.T) {
	m := guideMesh()
	x32 := tensor.Normal(tensor.NewKey(11), 16, 8)
	b32 := tensor.Normal(tensor.NewKey(12), 8)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		xh, bh := tensor.Convert(x32, dt), tensor.Convert(b32, dt)
		x := shard.Put(xh, shard.NewSharding(m, shard.P("dp", "tp")))
		b := shard.Put(bh, shard.NewSharding(m, shard.P("tp")))
		xr := shard.Put(xh, shard.NewSharding(m, shard.P("dp", nil)))
		for _, tc := range []struct {
			name       string
			host, prop *tensor.Tensor
		}{
			{"add", tensor.Add(xh, bh), tensor.Add(x, b)},
			{"bias_act gelu", tensor.BiasAct(xh, bh, tensor.ActGelu), tensor.BiasAct(x, b, tensor.ActGelu)},
			{"bias_act relu", tensor.BiasAct(xh, bh, tensor.ActRelu), tensor.BiasAct(x, b, tensor.ActRelu)},
			{"mul", tensor.Mul(xh, xh), tensor.Mul(x, x)},
			{"tanh", tensor.Tanh(xh), tensor.Tanh(x)},
			{"softmax rows", tensor.Softmax(xh, -1), tensor.Softmax(xr, -1)},
			{"sum rows", tensor.Sum(xh, -1), tensor.Sum(xr, -1)},
		} {
			require.Equal(t, tc.host.DType(), tc.prop.DType(), "%v %s", dt, tc.name)
			require.Equal(t, tc.host.Bits16(), shard.Gather(tc.prop).Bits16(), "%v %s", dt, tc.name)
		}
	}
}

// TestHalfConvertPlacedGrad: converting a traced placed float32 tensor to
// bf16 (what nn.CastToCompute does to sharded parameters) is
// differentiable, shard by shard: its gradient is the host's, bit for
// bit, placed like the parameter. (Convert used to map the blocks of any
// placed tensor outside the trace, so sharded parameters cast to bf16
// got zero gradients.)
func TestHalfConvertPlacedGrad(t *testing.T) {
	m := guideMesh()
	w32 := tensor.Normal(tensor.NewKey(21), 8, 4)
	c := tensor.Normal(tensor.NewKey(22), 8, 4)
	f := func(w *tensor.Tensor) *tensor.Tensor {
		h := tensor.Convert(w, tensor.BFloat16)
		return tensor.Sum(tensor.Mul(tensor.Convert(tensor.Mul(h, h), tensor.Float32), c))
	}
	lh, gh := autodiff.ValueAndGrad(f)(w32)
	s := shard.NewSharding(m, shard.P([]string{"dp", "tp"}))
	lp, gp := autodiff.ValueAndGrad(f)(shard.Put(w32, s))
	require.Equal(t, "float32[8@(dp,tp),4]", gp.Type())
	require.InDelta(t, lh.Item(), shard.Gather(lp).Item(), 1e-5*(1+abs(lh.Item())))
	require.Equal(t, gh.Float32s(), shard.Gather(gp).Float32s())
	for _, v := range gh.Float32s() {
		require.NotZero(t, v)
	}
}

// TestHalfConvertPendingSum: converting a tensor with pending sums (a
// row-parallel matmul's partial products, or a gradient of a weight
// replicated over the data axes) all-reduces it first: the conversion
// sees the sum, not one device's summand.
func TestHalfConvertPendingSum(t *testing.T) {
	if shard.ProcessCount() > 1 {
		t.Skip("propagation of a partial-sum matmul is single-process")
	}
	m := guideMesh()
	x32 := tensor.Normal(tensor.NewKey(31), 16, 8)
	w32 := tensor.Normal(tensor.NewKey(32), 8, 4)
	x := shard.Put(x32, shard.NewSharding(m, shard.P(nil, "tp")))
	w := shard.Put(w32, shard.NewSharding(m, shard.P("tp", nil)))
	y := tensor.Convert(tensor.MatMul(x, w), tensor.BFloat16) // partial over tp
	want := tensor.Convert(tensor.MatMul(x32, w32), tensor.BFloat16).Float64s()
	got := shard.Gather(y).Float64s()
	for i := range want {
		require.InDelta(t, want[i], got[i], 2*0x1p-8*(1+abs(want[i])), "y[%d]", i)
	}
}

// TestHalfPendingSumRoundsOnce: a bf16 sum over a sharded axis is
// accumulated in float32 and rounded once when the pending sum is read, as
// on the host and as Psum does. Blocks 256, 1, 1, 1: rounding after each
// add stalls at 256 (bf16 keeps 8 significant bits); 259 rounds to 260.
func TestHalfPendingSumRoundsOnce(t *testing.T) {
	mesh := shard.NewMesh([]int{4}, []string{"dp"})
	x := tensor.Convert(tensor.FromFloat32([]float32{256, 1, 1, 1}, 4), tensor.BFloat16)
	host := tensor.Convert(tensor.Sum(x), tensor.Float32).Item()
	placed := shard.Gather(tensor.Sum(shard.Put(x, shard.NewSharding(mesh, shard.P("dp")))))
	require.Equal(t, 260.0, host)
	require.Equal(t, host, tensor.Convert(placed, tensor.Float32).Item())
}

// TestHalfCrossEntropyShardedClasses: cross-entropy of bf16 logits whose
// class axis is sharded (the two-pass rule) equals the host's.
func TestHalfCrossEntropyShardedClasses(t *testing.T) {
	mesh := shard.NewMesh([]int{2, 2}, []string{"dp", "tp"})
	z := tensor.Convert(tensor.Normal(tensor.NewKey(5), 4, 8), tensor.BFloat16)
	labels := tensor.FromInts([]int{0, 3, 7, 5})
	want := tensor.Convert(tensor.SoftmaxCrossEntropy(z, labels), tensor.Float32).Float32s()
	zs := shard.Put(z, shard.NewSharding(mesh, shard.P("dp", "tp")))
	got := tensor.Convert(shard.Gather(tensor.SoftmaxCrossEntropy(zs, labels)), tensor.Float32).Float32s()
	require.InDeltaSlice(t, want, got, 4*0x1p-8*4)
}

// TestMatMulToPlaced: MatMulTo on placed bf16 operands returns the dtype
// asked for and the host's values, transposed operands included, with the
// contracting dim sharded (a float32 partial sum) or not.
func TestMatMulToPlaced(t *testing.T) {
	mesh := shard.NewMesh([]int{2, 2}, []string{"x", "y"})
	a := tensor.Convert(tensor.Normal(tensor.NewKey(1), 4, 6), tensor.BFloat16)
	b := tensor.Convert(tensor.Normal(tensor.NewKey(2), 6, 4), tensor.BFloat16)
	for _, tc := range []struct {
		ta     bool
		sa, sb shard.Spec
	}{
		{false, shard.P("x", nil), shard.P()},
		{false, shard.P(nil, "y"), shard.P("y", nil)},
		{true, shard.P("y", "x"), shard.P("y", nil)},
	} {
		aa := a
		if tc.ta {
			aa = tensor.Transpose(a)
		}
		for _, dt := range []tensor.DType{tensor.Float32, tensor.BFloat16} {
			want := tensor.MatMulTo(aa, b, tc.ta, false, dt)
			got := tensor.MatMulTo(shard.Put(aa, shard.NewSharding(mesh, tc.sa)), shard.Put(b, shard.NewSharding(mesh, tc.sb)), tc.ta, false, dt)
			require.Equal(t, dt, got.DType(), "%+v", tc)
			// float32: summation order only; bf16 with a sharded contracting
			// dim rounds each device's partial product, then the sum (two
			// roundings of values below 8: 2 ulps of 2^-5).
			tol := 1e-5
			if dt == tensor.BFloat16 {
				tol = 2 * 0x1p-5
			}
			require.InDeltaSlice(t, tensor.Convert(want, tensor.Float32).Float32s(), tensor.Convert(shard.Gather(got), tensor.Float32).Float32s(), tol, "%+v %v", tc, dt)
		}
	}
}
