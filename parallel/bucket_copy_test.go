package parallel_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// TestBucketCopied: the sharded step lays the small gradients it sums in
// one psum (the biases, and the loss) end to end by copying them into one
// buffer, and trains to the bits of the step that concatenates their
// reshapes (parallel.ConcatBucket): losses, parameters and state after 3
// steps of the guide MLP and of an MLP whose matrices are split along
// their columns or left whole (12-24-40-5), with Adam, AdamW, NAdam, SGD
// with momentum and Lion, with and without clipping, on 1, 2, 8 and 2×4
// devices. It fails if a device's step over more than one device does not
// copy its bucket, or one copies it with the path off. (On one device
// whether the step sums a bucket at all depends on the model's sizes.)
func TestBucketCopied(t *testing.T) {
	models := []struct {
		name  string
		sizes []int
	}{{"guide", guideSizes}, {"odd", []int{12, 24, 40, 5}}}
	for _, m := range models {
		mlp, _ := guideModel(m.sizes, 16, 3)
		var batches []batch
		for i := range 3 {
			_, b := guideModel(m.sizes, 16, 40+uint64(i))
			batches = append(batches, b)
		}
		for _, shape := range [][]int{{1}, {2}, {8}, {2, 4}} {
			mesh := shard.NewMesh(shape, []string{"dp", "tp"}[:len(shape)])
			for _, o := range laterOptimizers() {
				for _, clip := range []float64{0, 0.5} {
					t.Run(fmt.Sprintf("%s/%v/%s/clip=%v", m.name, shape, o.name, clip), func(t *testing.T) {
						run := func(off bool) ([]float64, []*tensor.Tensor, int64) {
							if off {
								defer parallel.ConcatBucket()()
							}
							tr, err := parallel.New(mlp, parallel.Config[nn.MLP, batch]{Loss: mlpLoss, Mesh: mesh, Optimizer: o.opt, ClipGlobalNorm: clip})
							require.NoError(t, err)
							n0 := parallel.BucketsCopied()
							l := stepAll(t, tr, batches)
							return l, append(pytree.Leaves(tr.Params()), floatState(tr.State())...), parallel.BucketsCopied() - n0
						}
						wl, wp, wn := run(true)
						l, p, n := run(false)
						require.Zero(t, wn, "buckets copied with the path off")
						if mesh.Size() > 1 {
							require.Equal(t, int64(len(batches)*mesh.Size()), n, "one bucket copied a device a step")
						}
						requireSameTraining(t, wl, wp, l, p)
					})
				}
			}
		}
	}
}

// TestBucketCopiedEP: under expert parallelism on 2×4 and 4×2 meshes the
// small gradients' bucket is copied on every device each step, to the
// bits of the concatenated one.
func TestBucketCopiedEP(t *testing.T) {
	for _, c := range []struct{ dp, ep int }{{2, 4}, {4, 2}} {
		t.Run(fmt.Sprintf("%dx%d", c.dp, c.ep), func(t *testing.T) {
			mesh := shard.NewMesh([]int{c.dp, c.ep}, []string{"dp", "ep"})
			n := trainEPBothWays(t, mesh, optim.AdamW(optim.Constant(1e-2), optim.AdamWOptions{WeightDecay: 0.1}),
				parallel.ConcatBucket, parallel.BucketsCopied)
			require.Equal(t, int64(3*mesh.Size()), n, "buckets copied")
		})
	}
}
