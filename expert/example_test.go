package expert_test

import (
	"fmt"

	"github.com/gonox/gonox/expert"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Eight experts split over ep=4, tokens over dp×ep: each device routes its
// own 8 tokens, drops on its side, and sends the rest to the devices
// holding their experts. The result equals the single-device layer with
// one sender per device.
func ExampleApply() {
	mesh := shard.NewMesh([]int{2, 4}, []string{"dp", "ep"})
	cfg := expert.Config{Experts: shard.Axes{"ep"}, Tokens: shard.Axes{"dp", "ep"}}
	m := nn.NewMoE(tensor.NewKey(0), 16, 32, 8, nn.MoEOptions{TopK: 2, CapacityFactor: 1})
	x := tensor.Normal(tensor.NewKey(1), 64, 16)

	out := expert.Apply(mesh, m, x, cfg)
	fmt.Println(out.Output.Type(), "capacity per sender:", out.Capacity)

	single := m
	single.Senders = mesh.Size()
	want := single.Forward(x)
	diff := tensor.Max(tensor.Abs(tensor.Sub(shard.Gather(out.Output), want.Output))).Item()
	fmt.Println("same drops:", fmt.Sprint(shard.Gather(out.Dropped).Bools()) == fmt.Sprint(want.Dropped.Bools()), "max |Δ| < 1e-6:", diff < 1e-6)
	// Output:
	// float32[64@(dp,ep),16] capacity per sender: 2
	// same drops: true max |Δ| < 1e-6: true
}
