package checkpoint_test

import (
	"fmt"
	"os"

	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Linear is a layer; Act is static structure, not saved.
type Linear struct {
	W, B *tensor.Tensor
	Act  func(*tensor.Tensor) *tensor.Tensor
}

// TrainState is what a training loop saves: the model, optimizer moments
// and the counters it needs to resume, as int32 tensors.
type TrainState struct {
	Model  []Linear
	Mu     []Linear
	Step   *tensor.Tensor // i32[]
	Loader *tensor.Tensor // i32[]: position in the data
	Key    *tensor.Tensor // i32[2]: the PRNG key
}

func newTrainState(key tensor.Key) TrainState {
	k := key.Split(2)
	layer := func(k tensor.Key, in, out int) Linear {
		return Linear{W: tensor.Normal(k, in, out), B: tensor.Zeros(tensor.Float32, out), Act: tensor.Relu}
	}
	model := []Linear{layer(k[0], 8, 16), layer(k[1], 16, 4)}
	return TrainState{
		Model:  model,
		Mu:     pytree.Map(model, tensor.ZerosLike),
		Step:   tensor.ScalarInt(0),
		Loader: tensor.ScalarInt(0),
		Key:    checkpoint.KeyTensor(key),
	}
}

// Save a training state sharded on a dp=4,tp=2 mesh, then restore it on a
// mesh of two devices, on the host, and only its model.
func Example() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)

	mesh := shard.NewMesh([]int{4, 2}, []string{"dp", "tp"})
	state := newTrainState(tensor.NewKey(0))
	state = shard.FilterShard(state, mesh, shard.Specs{
		"Model[*].W": shard.P("dp", "tp"),
		"Mu[*].W":    shard.P("dp", "tp"),
		"":           shard.P(),
	})
	state.Step = tensor.ScalarInt(100)
	state.Loader = tensor.ScalarInt(6400)
	if err := checkpoint.Save(dir, 100, state); err != nil {
		fmt.Println(err)
		return
	}

	// like gives the structure, shapes and dtypes; its values are not read.
	like := newTrainState(tensor.NewKey(1))
	two := shard.NewMesh([]int{2}, []string{"dp"})
	onTwo, err := checkpoint.Restore(dir, 100, like, checkpoint.OnMesh(two, shard.Specs{
		"Model[*].W": shard.P(nil, "dp"),
		"":           shard.P(),
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(onTwo.Model[0].W, onTwo.Step.Item(), onTwo.Loader.Item(), pytree.Equal(state, onTwo, 0, 0))

	onHost, err := checkpoint.Restore(dir, 100, like, nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(onHost.Model[0].W, checkpoint.TensorKey(onHost.Key) == tensor.NewKey(0))

	model, err := checkpoint.Restore(dir, 100, like.Model, nil, checkpoint.Subtree("Model"))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pytree.Format(model))

	steps, _ := checkpoint.Steps(dir)
	fmt.Println(steps)
	// Output:
	// f32[8,16@dp] 100 6400 true
	// f32[8,16] true
	// [
	//   Linear{W: f32[8,16], B: f32[16], Act: func},
	//   Linear{W: f32[16,4], B: f32[4], Act: func},
	// ]
	// [100]
}

// A Manager saving every 100 steps in the background, keeping the two
// latest steps and the best one by validation loss.
func ExampleManager() {
	dir, _ := os.MkdirTemp("", "ckpt")
	defer os.RemoveAll(dir)
	m, err := checkpoint.NewManager(dir, checkpoint.ManagerOptions{
		SaveEvery:  100,
		KeepLatest: 2,
		KeepBest:   1,
		Metric:     "val_loss",
		Async:      true,
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	state := newTrainState(tensor.NewKey(0))
	valLoss := map[int]float64{100: 0.9, 200: 0.4, 300: 0.6, 400: 0.7, 500: 0.8}
	for step := 1; step <= 500; step++ {
		state.Step = tensor.ScalarInt(int32(step))
		// ... a training step updates state ...
		if m.ShouldSave(step) {
			if _, err := m.Save(step, state, map[string]float64{"val_loss": valLoss[step]}); err != nil {
				fmt.Println(err)
				return
			}
		}
	}
	if err := m.Close(); err != nil {
		fmt.Println(err)
		return
	}
	latest, _ := m.Latest()
	best, _ := m.Best()
	fmt.Println(m.Steps(), latest, best)

	// Resume from the latest step.
	resumed, step, err := checkpoint.RestoreLatest(dir, newTrainState(tensor.NewKey(1)), nil)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(step, resumed.Step.Item())
	// Output:
	// [200 400 500] 500 200
	// 500 500
}

// Export a model to a safetensors file and read it back.
func ExampleExportSafetensors() {
	dir, _ := os.MkdirTemp("", "st")
	defer os.RemoveAll(dir)
	path := dir + "/model.safetensors"
	model := map[string]*tensor.Tensor{
		"encoder.weight": tensor.FromFloat32([]float32{1, 2, 3, 4}, 2, 2),
		"encoder.bias":   tensor.FromFloat32([]float32{0.5, -0.5}, 2),
	}
	if err := checkpoint.ExportSafetensors(path, model, map[string]string{"format": "pt"}); err != nil {
		fmt.Println(err)
		return
	}
	like := map[string]*tensor.Tensor{
		"encoder.weight": tensor.Zeros(tensor.Float32, 2, 2),
		"encoder.bias":   tensor.Zeros(tensor.Float32, 2),
	}
	back, meta, err := checkpoint.ImportSafetensors(path, like)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(back["encoder.weight"].Float32s(), back["encoder.bias"].Float32s(), meta)
	// Output:
	// [1 2 3 4] [0.5 -0.5] map[format:pt]
}

// Load the weights of a PyTorch MLP into a gonox nn.MLP. In PyTorch:
//
//	model = nn.Sequential(nn.Linear(3, 2), nn.ReLU(), nn.Linear(2, 1))
//	safetensors.torch.save_file(model.state_dict(), "mlp.safetensors")
//
// The file holds "0.weight" [2,3], "0.bias", "2.weight" [1,2] and
// "2.bias", weights [out, in] and in bfloat16 here; TorchMLP(0, 2) maps
// them to Layers[0] and Layers[1] of nn.MLP, whose weights are [in, out]
// (transposed on the way), and widens them to float32. Rename and
// Transpose write such rules for other models.
func ExampleTorchMLP() {
	dir, _ := os.MkdirTemp("", "torch")
	defer os.RemoveAll(dir)
	path := dir + "/mlp.safetensors"
	// Stand-in for the PyTorch file: a state dict under PyTorch's names.
	stateDict := map[string]*tensor.Tensor{
		"0.weight": tensor.FromFloat32([]float32{1, 0, -1, 0.5, 0.5, 0.5}, 2, 3),
		"0.bias":   tensor.FromFloat32([]float32{0, -1}, 2),
		"2.weight": tensor.FromFloat32([]float32{2, -1}, 1, 2),
		"2.bias":   tensor.FromFloat32([]float32{0.25}, 1),
	}
	if err := checkpoint.ExportSafetensors(path, stateDict, map[string]string{"format": "pt"}, checkpoint.ExportFloatsAs(checkpoint.AsBFloat16)); err != nil {
		fmt.Println(err)
		return
	}

	like := nn.NewMLP(tensor.NewKey(0), []int{3, 2, 1}, nn.MLPOptions{})
	mlp, _, err := checkpoint.ImportSafetensors(path, like, checkpoint.MapNames(checkpoint.TorchMLP(0, 2)...))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(pytree.Format(mlp))
	fmt.Println(mlp.Layers[0].W.Float32s())
	// relu([1-3, 0.5+1+1.5-1]) = [0, 2]; 2*0 - 1*2 + 0.25
	fmt.Println(mlp.Forward(tensor.FromFloat32([]float32{1, 2, 3}, 1, 3)).Float32s())
	// Output:
	// MLP{
	//   Layers: [Linear{W: f32[3,2], B: f32[2]}, Linear{W: f32[2,1], B: f32[1]}],
	//   Activation: Relu,
	//   FinalActivation: Identity,
	// }
	// [1 0.5 0 0.5 -1 0.5]
	// [-1.75]
}
