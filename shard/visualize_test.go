package shard_test

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// box joins lines into Visualize's output.
func box(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

func TestVisualize(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	x := tensor.Zeros(tensor.Float32, 8, 8)
	v := tensor.Zeros(tensor.Float32, 8)
	for _, tc := range []struct {
		name string
		x    *tensor.Tensor
		spec shard.Spec
		want string
	}{
		{"P(dp,None)", x, shard.P("dp", nil), box(
			"┌───────────────────────┐",
			"│        CPU 0,1        │",
			"├───────────────────────┤",
			"│        CPU 2,3        │",
			"├───────────────────────┤",
			"│        CPU 4,5        │",
			"├───────────────────────┤",
			"│        CPU 6,7        │",
			"└───────────────────────┘")},
		{"P(None,tp)", x, shard.P(nil, "tp"), box(
			"┌───────────┬───────────┐",
			"│           │           │",
			"│           │           │",
			"│           │           │",
			"│           │           │",
			"│CPU 0,2,4,6│CPU 1,3,5,7│",
			"│           │           │",
			"│           │           │",
			"│           │           │",
			"│           │           │",
			"└───────────┴───────────┘")},
		{"P(dp,tp)", x, shard.P("dp", "tp"), box(
			"┌──────────┬──────────┐",
			"│  CPU 0   │  CPU 1   │",
			"├──────────┼──────────┤",
			"│  CPU 2   │  CPU 3   │",
			"├──────────┼──────────┤",
			"│  CPU 4   │  CPU 5   │",
			"├──────────┼──────────┤",
			"│  CPU 6   │  CPU 7   │",
			"└──────────┴──────────┘")},
		{"P(tp,dp)", x, shard.P("tp", "dp"), box(
			"┌───────┬───────┬───────┬───────┐",
			"│       │       │       │       │",
			"│ CPU 0 │ CPU 2 │ CPU 4 │ CPU 6 │",
			"│       │       │       │       │",
			"│       │       │       │       │",
			"├───────┼───────┼───────┼───────┤",
			"│       │       │       │       │",
			"│ CPU 1 │ CPU 3 │ CPU 5 │ CPU 7 │",
			"│       │       │       │       │",
			"│       │       │       │       │",
			"└───────┴───────┴───────┴───────┘")},
		{"P((dp,tp))", x, shard.P([]string{"dp", "tp"}), box(
			"┌───────────────────────┐",
			"│         CPU 0         │",
			"├───────────────────────┤",
			"│         CPU 1         │",
			"├───────────────────────┤",
			"│         CPU 2         │",
			"├───────────────────────┤",
			"│         CPU 3         │",
			"├───────────────────────┤",
			"│         CPU 4         │",
			"├───────────────────────┤",
			"│         CPU 5         │",
			"├───────────────────────┤",
			"│         CPU 6         │",
			"├───────────────────────┤",
			"│         CPU 7         │",
			"└───────────────────────┘")},
		{"replicated", x, shard.P(), box(
			"┌───────────────────────┐",
			"│                       │",
			"│                       │",
			"│                       │",
			"│                       │",
			"│  CPU 0,1,2,3,4,5,6,7  │",
			"│                       │",
			"│                       │",
			"│                       │",
			"│                       │",
			"└───────────────────────┘")},
		{"1-D P((dp,tp))", v, shard.P([]string{"dp", "tp"}), box(
			"┌───────┬───────┬───────┬───────┬───────┬───────┬───────┬───────┐",
			"│ CPU 0 │ CPU 1 │ CPU 2 │ CPU 3 │ CPU 4 │ CPU 5 │ CPU 6 │ CPU 7 │",
			"└───────┴───────┴───────┴───────┴───────┴───────┴───────┴───────┘")},
		{"1-D P(tp)", v, shard.P("tp"), box(
			"┌───────────┬───────────┐",
			"│CPU 0,2,4,6│CPU 1,3,5,7│",
			"└───────────┴───────────┘")},
		{"1-D replicated", v, shard.P(), box(
			"┌───────────────────┐",
			"│CPU 0,1,2,3,4,5,6,7│",
			"└───────────────────┘")},
		{"wide: narrowed to 80 columns", tensor.Zeros(tensor.Float32, 8, 4096), shard.P(nil, "tp"), box(
			"┌──────────────────────────────────────┬──────────────────────────────────────┐",
			"│                                      │                                      │",
			"│                                      │                                      │",
			"│                                      │                                      │",
			"│                                      │                                      │",
			"│             CPU 0,2,4,6              │             CPU 1,3,5,7              │",
			"│                                      │                                      │",
			"│                                      │                                      │",
			"│                                      │                                      │",
			"│                                      │                                      │",
			"└──────────────────────────────────────┴──────────────────────────────────────┘")},
		{"tall", tensor.Zeros(tensor.Float32, 4096, 8), shard.P("dp", "tp"), box(
			"┌───────┬───────┐",
			"│ CPU 0 │ CPU 1 │",
			"├───────┼───────┤",
			"│ CPU 2 │ CPU 3 │",
			"├───────┼───────┤",
			"│ CPU 4 │ CPU 5 │",
			"├───────┼───────┤",
			"│ CPU 6 │ CPU 7 │",
			"└───────┴───────┘")},
		{"3-D: leading dims flattened", tensor.Zeros(tensor.Float32, 2, 4, 8), shard.P("tp", "dp"), box(
			"┌───────────────────────┐",
			"│         CPU 0         │",
			"├───────────────────────┤",
			"│         CPU 2         │",
			"├───────────────────────┤",
			"│         CPU 4         │",
			"├───────────────────────┤",
			"│         CPU 6         │",
			"├───────────────────────┤",
			"│         CPU 1         │",
			"├───────────────────────┤",
			"│         CPU 3         │",
			"├───────────────────────┤",
			"│         CPU 5         │",
			"├───────────────────────┤",
			"│         CPU 7         │",
			"└───────────────────────┘")},
		{"scalar", tensor.Scalar(1), shard.P(), box(
			"┌───────────────────────┐",
			"│  CPU 0,1,2,3,4,5,6,7  │",
			"└───────────────────────┘")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := shard.Visualize(shard.Put(tc.x, shard.NewSharding(m, tc.spec)))
			assert.Equal(t, tc.want, got, "got:\n%s", got)
		})
	}
}

func TestVisualizeOtherMeshes(t *testing.T) {
	devs := shard.Devices()
	student := shard.NewMeshOn(devs[4:8], []int{2, 2}, []string{"p", "q"})
	x := shard.Put(tensor.Zeros(tensor.Float32, 4, 4), shard.NewSharding(student, shard.P("q")))
	assert.Equal(t, box(
		"┌───────────────────────┐",
		"│                       │",
		"│        CPU 4,6        │",
		"│                       │",
		"│                       │",
		"├───────────────────────┤",
		"│                       │",
		"│        CPU 5,7        │",
		"│                       │",
		"│                       │",
		"└───────────────────────┘"), shard.Visualize(x))

	// A host tensor is on no device of a mesh.
	assert.Equal(t, box(
		"┌───────┐",
		"│ host  │",
		"└───────┘"), shard.Visualize(tensor.Zeros(tensor.Float32, 4)))
}

func TestVisualizeEdgeCases(t *testing.T) {
	m := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	// Empty dimensions still draw one box per block.
	assert.Equal(t, box(
		"┌───────────┬───────────┐",
		"│CPU 0,2,4,6│CPU 1,3,5,7│",
		"└───────────┴───────────┘"), shard.Visualize(shard.Put(tensor.Zeros(tensor.Float32, 0), shard.NewSharding(m, shard.P("tp")))))
	got := shard.Visualize(shard.Put(tensor.Zeros(tensor.Float32, 0, 8), shard.NewSharding(m, shard.P("dp", "tp"))))
	assert.Equal(t, 4, strings.Count(got, "CPU 0")+strings.Count(got, "CPU 2")+strings.Count(got, "CPU 4")+strings.Count(got, "CPU 6"))
	// A block inside Map is drawn as a host tensor.
	var inside string
	x := shard.Put(tensor.Zeros(tensor.Float32, 8), shard.NewSharding(m, shard.P("dp")))
	shard.Map(m, shard.P("dp"), shard.P("dp"), func(c *shard.Ctx, b *tensor.Tensor) *tensor.Tensor {
		if c.Device().ID() == 0 {
			inside = shard.Visualize(b)
		}
		return b
	})(x)
	assert.Equal(t, box(
		"┌──────────┐",
		"│   host   │",
		"└──────────┘"), inside) // the block is f32[2]

}
