package shard_test

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// The convolution and window rules against the host result under Strict
// (no gather fallback), value and gradients, with the gradients laid out
// like their inputs.
func TestConvPropagationMatchesHost(t *testing.T) {
	m := guideMesh() // dp=4, tp=2
	r := rand.New(rand.NewPCG(29, 1))
	f32 := func(shape ...int) *tensor.Tensor { return randT(r, shape...) }
	pad1 := tensor.ConvSpec{Padding: tensor.Pads([2]int{1, 1}, [2]int{1, 1})}
	conv := func(spec tensor.ConvSpec) func(xs []*tensor.Tensor) *tensor.Tensor {
		return func(xs []*tensor.Tensor) *tensor.Tensor {
			return tensor.Sum(tensor.Square(tensor.Conv(xs[0], xs[1], spec)))
		}
	}
	cases := []struct {
		name  string
		in    []*tensor.Tensor
		specs []shard.Spec
		f     func(xs []*tensor.Tensor) *tensor.Tensor
	}{
		{"batch over dp", []*tensor.Tensor{f32(8, 3, 5, 5), f32(4, 3, 3, 3)}, []shard.Spec{shard.P("dp"), shard.P()}, conv(pad1)},
		{"output channels over tp", []*tensor.Tensor{f32(8, 3, 5, 5), f32(4, 3, 3, 3)}, []shard.Spec{shard.P("dp"), shard.P("tp")}, conv(pad1)},
		{"input channels over tp", []*tensor.Tensor{f32(8, 4, 5, 5), f32(6, 4, 3, 3)}, []shard.Spec{shard.P("dp", "tp"), shard.P(nil, "tp")}, conv(pad1)},
		{"fsdp kernel", []*tensor.Tensor{f32(8, 3, 5, 5), f32(4, 3, 3, 3)}, []shard.Spec{shard.P("dp"), shard.P("dp")}, conv(pad1)},
		{"groups", []*tensor.Tensor{f32(8, 4, 5, 5), f32(4, 2, 3, 3)}, []shard.Spec{shard.P("dp", "tp"), shard.P("tp")},
			conv(tensor.ConvSpec{Groups: 2, Strides: []int{2, 1}})},
		{"transpose", []*tensor.Tensor{f32(8, 4, 3, 3), f32(4, 6, 3, 3)}, []shard.Spec{shard.P("dp", "tp"), shard.P("tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				y := tensor.ConvTranspose(xs[0], xs[1], tensor.ConvTransposeSpec{Strides: []int{2, 2}, Padding: [][2]int{{1, 1}, {1, 1}}, OutputPadding: []int{1, 1}})
				return tensor.Sum(tensor.Square(y))
			}},
		{"pooling", []*tensor.Tensor{f32(8, 4, 6, 6)}, []shard.Spec{shard.P("dp", "tp")},
			func(xs []*tensor.Tensor) *tensor.Tensor {
				mx := tensor.ReduceWindow(xs[0], tensor.WindowMax, tensor.Window{Dims: []int{1, 1, 2, 2}, Strides: []int{1, 1, 2, 2}})
				av := tensor.ReduceWindow(xs[0], tensor.WindowMean, tensor.Window{Dims: []int{1, 1, 3, 3}, Strides: []int{1, 1, 2, 2}, Padding: tensor.SamePadding})
				ad := tensor.AdaptivePool(xs[0], tensor.WindowMean, 1, 1)
				return tensor.Add(tensor.Add(tensor.Sum(tensor.Square(mx)), tensor.Sum(tensor.Square(av))), tensor.Sum(tensor.Square(ad)))
			}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			want, wantG := autodiff.ValueAndGrad(tc.f)(tc.in)
			placed := make([]*tensor.Tensor, len(tc.in))
			for i, x := range tc.in {
				placed[i] = shard.Put(x, shard.NewSharding(m, tc.specs[i]))
			}
			defer shard.Strict(m)()
			got, gotG := autodiff.ValueAndGrad(tc.f)(placed)
			requireClose(t, want, got, 1e-5, "value")
			for i := range wantG {
				requireClose(t, wantG[i], gotG[i], 1e-5, fmt.Sprintf("grad %d", i))
				s, ok := shard.ShardingOf(gotG[i])
				require.True(t, ok)
				require.True(t, s.Equal(shard.NewSharding(m, tc.specs[i])), "grad %d is %v, want %v", i, s, tc.specs[i])
			}
		})
	}
}

// What each split costs: a batch over the data axes needs no
// communication forward; input channels split over tp leave a partial
// sum, reduced once by the consumer; output channels over tp need none
// until the result is gathered.
func TestConvPropagationCommunication(t *testing.T) {
	m := guideMesh()
	r := rand.New(rand.NewPCG(29, 2))
	x, w := randT(r, 8, 4, 5, 5), randT(r, 6, 4, 3, 3)
	spec := tensor.ConvSpec{Padding: tensor.Pads([2]int{1, 1}, [2]int{1, 1})}
	run := func(xs, ws shard.Spec) (*tensor.Tensor, *shard.Comm) {
		xp, wp := shard.Put(x, shard.NewSharding(m, xs)), shard.Put(w, shard.NewSharding(m, ws))
		comm := new(shard.Comm)
		stop := shard.Record(m, comm)
		defer stop()
		defer shard.Strict(m)()
		return tensor.Conv(xp, wp, spec), comm
	}
	y, comm := run(shard.P("dp"), shard.P())
	require.Empty(t, comm.Kinds(), "batch-parallel convolution: %v", comm)
	s, _ := shard.ShardingOf(y)
	require.True(t, s.Equal(shard.NewSharding(m, shard.P("dp"))), "%v", s)

	y, comm = run(shard.P("dp"), shard.P("tp"))
	require.Empty(t, comm.Kinds(), "column-parallel convolution: %v", comm)
	s, _ = shard.ShardingOf(y)
	require.True(t, s.Equal(shard.NewSharding(m, shard.P("dp", "tp"))), "%v", s)

	y, comm = run(shard.P("dp", "tp"), shard.P(nil, "tp"))
	require.Empty(t, comm.Kinds(), "the row-parallel partial sum is pending: %v", comm)
	// Its consumer reduces it: one psum over tp.
	var later shard.Comm
	stop := shard.Record(m, &later)
	z := tensor.Relu(y)
	stop()
	require.Equal(t, []string{"psum"}, later.Kinds(), "%v", &later)
	requireClose(t, tensor.Relu(tensor.Conv(x, w, spec)), shard.Gather(z), 1e-5, "reduced partial sum")
}
