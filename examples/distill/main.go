// Command distill runs the JAX sharding guide's knowledge-distillation
// example with gonox: a teacher MLP does tensor-parallel inference on one
// mesh (devices 0-3) while a student trains with data parallelism on a
// disjoint mesh (devices 4-7), the teacher's outputs moving between the
// meshes with shard.Reshard. Teacher inference for the next batch runs
// while the student trains on the current one, so both meshes work at once.
//
//	go run ./examples/distill
//
// With the guide's keys (jax.random.key(0) for the teacher and the batch,
// key(1) for the student) it prints the guide's losses: 1.09, 1.01, 0.94,
// 0.88, 0.83.
package main

import (
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"sync"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

func main() {
	steps := flag.Int("steps", 5, "training steps")
	lr := flag.Float64("lr", 0.01, "student learning rate (plain gradient descent, as the guide)")
	flag.Parse()
	if err := run(*steps, float32(*lr), os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "distill:", err)
		os.Exit(1)
	}
}

// initModel builds the guide's Model: for each layer, keys split from key,
// w = normal(k1, (n_in, n_out)) / sqrt(n_in), b = normal(k2, (n_out,)),
// relu after every layer.
func initModel(key tensor.Key, sizes []int) nn.MLP {
	m := nn.MLP{Activation: nn.Relu, FinalActivation: nn.Relu}
	for i, k := range key.Split(len(sizes) - 1) {
		k1, k2 := k.Split2()
		nIn, nOut := sizes[i], sizes[i+1]
		w := tensor.MulScalar(tensor.Normal(k1, nIn, nOut), float32(1/math.Sqrt(float64(nIn))))
		m.Layers = append(m.Layers, nn.Linear{W: w, B: tensor.Normal(k2, nOut)})
	}
	return m
}

type teacherIn struct {
	Model nn.MLP
	X     *tensor.Tensor
}

type studentIn struct {
	Model   nn.MLP
	X       *tensor.Tensor
	Teacher *tensor.Tensor
}

type studentOut struct {
	Model nn.MLP
	Loss  *tensor.Tensor
}

func run(steps int, lr float32, out io.Writer) error {
	devs := shard.Devices()
	if len(devs) < 2 {
		return fmt.Errorf("need at least 2 devices (set %s)", shard.DevicesEnv)
	}
	half := len(devs) / 2
	inference := shard.NewMeshOn(devs[:half], []int{half}, []string{"tp"})
	train := shard.NewMeshOn(devs[half:2*half], []int{half}, []string{"dp"})

	keys := tensor.NewKey(0).Split(2)
	teacher := initModel(keys[0], []int{32, 128, 256, 128, 4})
	xKey, _ := keys[1].Split2()
	x := tensor.Normal(xKey, 16, 32) // the guide's init_random_batch inputs
	student := initModel(tensor.NewKey(1), []int{32, 4})

	// Teacher: weights split by rows over tp, inputs by columns; each layer
	// multiplies its column block by its row block and reduce-scatters.
	teacherSpecs := shard.Specs{"Model.Layers[*].W": shard.P("tp", nil), "Model.Layers[*].B": shard.P("tp"), "X": shard.P(nil, "tp")}
	teacherForward := shard.Map(inference, teacherSpecs, shard.P(nil, "tp"), func(c *shard.Ctx, in teacherIn) *tensor.Tensor {
		h := in.X
		for _, l := range in.Model.Layers {
			h = c.PsumScatter(tensor.MatMul(h, l.W), shard.Axes{"tp"}, 1, true)
			h = tensor.Relu(tensor.Add(h, l.B))
		}
		return h
	})

	// Student: replicated, batch split over dp, trained on the squared
	// distance to the teacher's outputs.
	studentSpecs := shard.Specs{"Model": shard.P(), "X": shard.P("dp", nil), "Teacher": shard.P("dp", nil)}
	trainStep := shard.Map(train, studentSpecs, shard.Specs{"Model": shard.P(), "Loss": shard.P()}, func(c *shard.Ctx, in studentIn) studentOut {
		loss, g := autodiff.ValueAndGrad(func(m nn.MLP) *tensor.Tensor {
			d := tensor.Sub(m.Forward(in.X), in.Teacher)
			return c.Pmean(tensor.Mean(tensor.Sum(tensor.Square(d), -1)), "dp")
		})(in.Model)
		next := pytree.MapN(func(p []*tensor.Tensor) *tensor.Tensor {
			return tensor.Sub(p[0], tensor.MulScalar(p[1], lr))
		}, in.Model, g)
		return studentOut{Model: next, Loss: loss}
	})

	// Pipeline: the teacher computes the outputs of step i+1 while the
	// student trains on step i. (Every step uses the guide's one batch.)
	xTeacher := shard.Put(x, shard.NewSharding(inference, shard.P(nil, "tp")))
	xStudent := shard.Put(x, shard.NewSharding(train, shard.P("dp", nil)))
	targets := make(chan *tensor.Tensor, 1)
	done := make(chan struct{})
	errc := make(chan error, 1)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(targets)
		defer func() {
			if r := recover(); r != nil {
				errc <- fmt.Errorf("teacher: %v", r)
			}
		}()
		for range steps {
			y := teacherForward(teacherIn{Model: teacher, X: xTeacher})
			select {
			case targets <- shard.Reshard(y, shard.NewSharding(train, shard.P("dp", nil))):
			case <-done:
				return
			}
		}
	}()
	defer wg.Wait() // the teacher's goroutine ends before run returns
	defer close(done)
	for i := 0; i < steps; i++ {
		y, ok := <-targets
		if !ok {
			return <-errc
		}
		res := trainStep(studentIn{Model: student, X: xStudent, Teacher: y})
		student = res.Model
		fmt.Fprintf(out, "Loss: %.2f\n", res.Loss.Item())
	}
	return nil
}
