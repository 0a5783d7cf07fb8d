//go:build mpi

package mpi_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Sharding propagation on meshes whose devices live in several processes:
// each process computes its own devices' blocks, and the reductions the
// rules leave meet across processes. The references are computed here in
// float64 loops, or by the same function on host tensors in one process.

// spansProcesses reports whether some group of devices along axes holds
// devices of more than one process, so a reduction over those axes must
// cross processes.
func spansProcesses(m *shard.Mesh, axes ...string) bool {
	for d := range m.Size() {
		c := m.Coords(d)
		for e := range m.Size() {
			ce := m.Coords(e)
			same := true
			for k, name := range m.AxisNames() {
				if c[k] != ce[k] && !slices.Contains(axes, name) {
					same = false
				}
			}
			if same && m.Devices()[d].Process() != m.Devices()[e].Process() {
				return true
			}
		}
	}
	return false
}

// matmul64 is a·b in float64 from float32 row-major data.
func matmul64(a, b *tensor.Tensor) []float64 {
	m, k, n := a.Dim(0), a.Dim(1), b.Dim(1)
	ad, bd := a.Float64s(), b.Float64s()
	out := make([]float64, m*n)
	for i := range m {
		for j := range n {
			var s float64
			for l := range k {
				s += ad[i*k+l] * bd[l*n+j]
			}
			out[i*n+j] = s
		}
	}
	return out
}

// TestPropagatedMatMulAcrossProcesses contracts a dimension sharded on
// both operands (a pending sum over its axes) and reads the sum in every
// way a consumer can: Gather, Blocks, an elementwise op that wants it
// replicated (psum), one that wants it sharded (psum_scatter), and
// reductions over sharded dimensions (a pending sum of a sum, pmax).
func TestPropagatedMatMulAcrossProcesses(t *testing.T) {
	guideMesh(t)
	crossed := false
	for _, shape := range [][]int{{2, 4}, {4, 2}} {
		m := shard.NewMesh(shape, []string{"dp", "tp"})
		for _, k := range [][]string{{"dp"}, {"tp"}, {"dp", "tp"}} {
			t.Run(fmt.Sprintf("%dx%d/%v", shape[0], shape[1], k), func(t *testing.T) {
				crossed = crossed || spansProcesses(m, k...)
				r := rand.New(rand.NewPCG(3, 9)) // the same numbers on every process
				ah, bh := randT(r, 8, 16), randT(r, 16, 8)
				want := matmul64(ah, bh)
				a := shard.Put(ah, shard.NewSharding(m, shard.P(nil, k)))
				b := shard.Put(bh, shard.NewSharding(m, shard.P(k, nil)))
				c := tensor.MatMul(a, b)

				assert.InDeltaSlice(t, want, shard.Gather(c).Float64s(), 1e-4, "Gather")
				local := 0
				for d, blk := range shard.Blocks(c) {
					if !m.Devices()[d].IsLocal() {
						assert.Nil(t, blk, "block of device %d (another process)", d)
						continue
					}
					local++
					assert.InDeltaSlice(t, want, blk.Float64s(), 1e-4, "block of device %d", d)
				}
				assert.Equal(t, 8/shard.ProcessCount(), local)

				plus := shard.Gather(tensor.AddScalar(c, 1)).Float64s()
				for i, v := range want {
					assert.InDelta(t, v+1, plus[i], 1e-4)
				}
				// Times a tensor sharded by rows over k: the sum is
				// reduce-scattered to rows.
				sh := randT(r, 8, 8)
				rows := shard.Put(sh, shard.NewSharding(m, shard.P(k, nil)))
				prod := tensor.Mul(c, rows)
				got := shard.Gather(prod).Float64s()
				for i, v := range sh.Float64s() {
					assert.InDelta(t, want[i]*v, got[i], 1e-4)
				}
				var total float64
				for _, v := range want {
					total += v
				}
				assert.InDelta(t, total, tensor.Sum(c).Item(), 1e-3, "sum of the pending sum")
				// The maximum of each row of c laid out with columns over
				// k: a per-device max, then pmax across the k groups.
				cols := shard.Reshard(c, shard.NewSharding(m, shard.P(nil, k)))
				mx := shard.Gather(tensor.Max(cols, -1)).Float64s()
				for i := range 8 {
					w := math.Inf(-1)
					for j := range 8 {
						w = max(w, want[i*8+j])
					}
					assert.InDelta(t, w, mx[i], 1e-4, "max of row %d", i)
				}
			})
		}
	}
	if shard.ProcessCount() > 1 {
		require.True(t, crossed, "no case reduced across processes")
	}
}

// mlp3 is an MLP 16-32-32-8 as plain tensors.
type mlp3 struct {
	W1, B1, W2, B2, W3, B3 *tensor.Tensor
}

func (p mlp3) loss(x, y *tensor.Tensor) *tensor.Tensor {
	h := tensor.Relu(tensor.Add(tensor.MatMul(x, p.W1), p.B1))
	h = tensor.Relu(tensor.Add(tensor.MatMul(h, p.W2), p.B2))
	return tensor.Mean(tensor.SoftmaxCrossEntropy(tensor.Add(tensor.MatMul(h, p.W3), p.B3), y))
}

// TestPropagatedMLPGradientsAcrossProcesses differentiates an MLP placed
// for FSDP (weights split over every axis), TP (Megatron: column- then
// row-parallel over tp, batch over dp) and FSDP+TP on meshes spread over
// the processes: the loss and every gradient equal the one-process host
// computation, and each gradient is laid out like its parameter.
func TestPropagatedMLPGradientsAcrossProcesses(t *testing.T) {
	guideMesh(t)
	r := rand.New(rand.NewPCG(11, 2))
	host := mlp3{
		W1: tensor.MulScalar(randT(r, 16, 32), 0.3), B1: tensor.MulScalar(randT(r, 32), 0.1),
		W2: tensor.MulScalar(randT(r, 32, 32), 0.2), B2: tensor.MulScalar(randT(r, 32), 0.1),
		W3: tensor.MulScalar(randT(r, 32, 8), 0.2), B3: tensor.MulScalar(randT(r, 8), 0.1),
	}
	x := randT(r, 16, 16)
	labels := make([]int32, 16)
	for i := range labels {
		labels[i] = int32(r.IntN(8))
	}
	y := tensor.FromInt32(labels, 16)
	wantL, wantG := autodiff.ValueAndGrad(func(p mlp3) *tensor.Tensor { return p.loss(x, y) })(host)

	all := []string{"dp", "tp"}
	for _, tc := range []struct {
		name  string
		shape []int
		data  []string
		specs [6]shard.Spec // W1 B1 W2 B2 W3 B3
	}{
		{"fsdp", []int{8, 1}, all, [6]shard.Spec{shard.P(nil, all), shard.P(all), shard.P(all, nil), shard.P(), shard.P(), shard.P()}},
		{"fsdp", []int{2, 4}, all, [6]shard.Spec{shard.P(nil, all), shard.P(all), shard.P(all, nil), shard.P(), shard.P(), shard.P()}},
		{"tp", []int{2, 4}, []string{"dp"}, [6]shard.Spec{shard.P(nil, "tp"), shard.P("tp"), shard.P("tp", nil), shard.P(), shard.P(), shard.P()}},
		{"tp", []int{4, 2}, []string{"dp"}, [6]shard.Spec{shard.P(nil, "tp"), shard.P("tp"), shard.P("tp", nil), shard.P(), shard.P(), shard.P()}},
		{"fsdp_tp", []int{2, 4}, []string{"dp"}, [6]shard.Spec{shard.P("dp", "tp"), shard.P("tp"), shard.P("tp", "dp"), shard.P("dp"), shard.P("dp", nil), shard.P()}},
		{"fsdp_tp", []int{4, 2}, []string{"dp"}, [6]shard.Spec{shard.P("dp", "tp"), shard.P("tp"), shard.P("tp", "dp"), shard.P("dp"), shard.P("dp", nil), shard.P()}},
	} {
		t.Run(fmt.Sprintf("%s/%dx%d", tc.name, tc.shape[0], tc.shape[1]), func(t *testing.T) {
			m := shard.NewMesh(tc.shape, []string{"dp", "tp"})
			put := func(x *tensor.Tensor, s shard.Spec) *tensor.Tensor { return shard.Put(x, shard.NewSharding(m, s)) }
			hp := []*tensor.Tensor{host.W1, host.B1, host.W2, host.B2, host.W3, host.B3}
			pp := make([]*tensor.Tensor, 6)
			for i := range hp {
				pp[i] = put(hp[i], tc.specs[i])
			}
			placed := mlp3{pp[0], pp[1], pp[2], pp[3], pp[4], pp[5]}
			xs, ys := put(x, shard.P(tc.data, nil)), put(y, shard.P(tc.data))
			defer shard.Strict(m)() // nothing falls back to gathering
			gotL, gotG := autodiff.ValueAndGrad(func(p mlp3) *tensor.Tensor { return p.loss(xs, ys) })(placed)
			require.InDelta(t, wantL.Item(), gotL.Item(), 1e-5)
			wg := []*tensor.Tensor{wantG.W1, wantG.B1, wantG.W2, wantG.B2, wantG.W3, wantG.B3}
			gg := []*tensor.Tensor{gotG.W1, gotG.B1, gotG.W2, gotG.B2, gotG.W3, gotG.B3}
			for i := range wg {
				s, ok := shard.ShardingOf(gg[i])
				require.True(t, ok, "gradient %d is placed", i)
				ps, _ := shard.ShardingOf(pp[i])
				assert.True(t, s.Equal(ps), "gradient %d is laid out as %v, its parameter as %v", i, s, ps)
				assert.InDeltaSlice(t, wg[i].Float64s(), shard.Gather(gg[i]).Float64s(), 1e-5, "gradient %d", i)
			}
		})
	}
}

// TestReshardAcrossProcesses moves tensors of every dtype between
// layouts whose blocks live on different processes (including onto
// another mesh over the same devices, and onto replicas): the values
// equal the host tensor's, and each process holds exactly its own
// devices' blocks.
func TestReshardAcrossProcesses(t *testing.T) {
	m := guideMesh(t)
	other := shard.NewMesh([]int{2, 2, 2}, []string{"a", "b", "c"})
	r := rand.New(rand.NewPCG(1, 4))
	f := randT(r, 8, 16)
	for _, host := range []*tensor.Tensor{
		f,
		tensor.AsType(f, tensor.BFloat16),
		tensor.AsType(f, tensor.Float16),
		tensor.Reshape(tensor.Arange(128), 8, 16),
	} {
		want := host.Float64s()
		steps := []shard.Sharding{
			shard.NewSharding(m, shard.P("dp", "tp")),
			shard.NewSharding(m, shard.P("tp", "dp")),
			shard.NewSharding(m, shard.P([]string{"dp", "tp"}, nil)),
			shard.NewSharding(m, shard.P(nil, []string{"tp", "dp"})),
			shard.NewSharding(other, shard.P("c", []string{"a", "b"})),
			shard.Replicated(m),
			shard.NewSharding(m, shard.P(nil, "dp")),
		}
		x := host
		for i, s := range steps {
			x = shard.Reshard(x, s)
			name := fmt.Sprintf("%v step %d (%v)", host.DType(), i, s)
			assert.Equal(t, want, shard.Gather(x).Float64s(), name)
			for d, blk := range shard.Blocks(x) {
				assert.Equal(t, s.Mesh().Devices()[d].IsLocal(), blk != nil, "%s: block %d", name, d)
			}
		}
	}
}

// TestGatherFallbackAcrossProcesses: an op without a sharding rule
// gathers its operands from every process, computes on the host and
// places the result replicated; its gradient goes back to the operand's
// layout. Both equal the host computation.
func TestGatherFallbackAcrossProcesses(t *testing.T) {
	m := guideMesh(t)
	r := rand.New(rand.NewPCG(8, 1))
	host := randT(r, 8, 4)
	a := shard.Put(host, shard.NewSharding(m, shard.P("dp", "tp")))
	patch := tensor.Zeros(tensor.Float32, 1, 4)
	f := func(x *tensor.Tensor) *tensor.Tensor {
		return tensor.Sum(tensor.Square(tensor.DynamicUpdateSlice(x, patch, []int{2, 0})))
	}
	wantU := tensor.DynamicUpdateSlice(host, patch, []int{2, 0})
	u := tensor.DynamicUpdateSlice(a, patch, []int{2, 0})
	s, ok := shard.ShardingOf(u)
	require.True(t, ok)
	assert.True(t, s.IsReplicated(), "%v", s)
	assert.Equal(t, wantU.Float32s(), shard.Gather(u).Float32s())
	wantL, wantG := autodiff.ValueAndGrad(f)(host)
	gotL, gotG := autodiff.ValueAndGrad(f)(a)
	assert.InDelta(t, wantL.Item(), gotL.Item(), 1e-4)
	gs, _ := shard.ShardingOf(gotG)
	as, _ := shard.ShardingOf(a)
	assert.True(t, gs.Equal(as), "gradient laid out as %v, want %v", gs, as)
	assert.InDeltaSlice(t, wantG.Float64s(), shard.Gather(gotG).Float64s(), 1e-5)
	// Row 2 was overwritten: no gradient reaches it.
	assert.Equal(t, []float32{0, 0, 0, 0}, shard.Gather(gotG).Float32s()[8:12])
}

// TestHalfPrecisionPendingSumAcrossProcesses: a bf16 and an f16 matmul
// whose contracting dimension is sharded over processes reduce their
// pending sums across processes (in float32, rounded once) to the
// one-process product within half-precision rounding.
func TestHalfPrecisionPendingSumAcrossProcesses(t *testing.T) {
	m := guideMesh(t)
	r := rand.New(rand.NewPCG(6, 6))
	ah, bh := randT(r, 4, 16), randT(r, 16, 4)
	for _, dt := range []tensor.DType{tensor.BFloat16, tensor.Float16} {
		a16, b16 := tensor.AsType(ah, dt), tensor.AsType(bh, dt)
		want := matmul64(tensor.AsType(a16, tensor.Float32), tensor.AsType(b16, tensor.Float32))
		all := []string{"dp", "tp"}
		a := shard.Put(a16, shard.NewSharding(m, shard.P(nil, all)))
		b := shard.Put(b16, shard.NewSharding(m, shard.P(all, nil)))
		for _, got := range []*tensor.Tensor{
			shard.Gather(tensor.MatMul(a, b)),
			shard.Gather(shard.Reshard(tensor.MatMul(a, b), shard.NewSharding(m, shard.P("dp", nil)))),
		} {
			require.Equal(t, dt, got.DType())
			for i, v := range tensor.AsType(got, tensor.Float32).Float64s() {
				assert.InDelta(t, want[i], v, 0.05*max(1, math.Abs(want[i])), "%v element %d", dt, i)
			}
		}
	}
}
