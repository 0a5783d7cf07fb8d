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
// 0.88, 0.83. The student is a parallel.Trainer with the DP strategy.
//
// Built with -tags mpi it runs under mpirun too; each process then gives
// the first half of its devices to the teacher and the second half to the
// student, so both meshes span every process, and prints the same losses:
//
//	go build -tags mpi -o distill ./examples/distill
//	GONOX_DEVICES=4 mpirun -np 2 -x GONOX_DEVICES ./distill
//
// A bad -steps or -lr, or a GONOX_DEVICES that is not an integer of at least
// 2 (or any other bad gonox environment variable), is reported before
// anything is printed, with exit status 2; Ctrl-C exits with status 130.
package main

import (
	"fmt"
	"io"
	"math"
	"sync"

	"github.com/gonox/gonox/examples/internal/cli"

	"github.com/gonox/gonox/nn"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/parallel"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Bounds of the flags.
const (
	maxSteps = 1_000_000
	maxLR    = 10
)

func main() { cli.Main("distill", parseAndRun) }

// mainExit runs the command as main does, without the process, and
// returns its exit status: 2 for a usage mistake (reported before
// anything else is printed), 1 for a failure.
func mainExit(args []string, out, errOut io.Writer) int {
	return cli.Run("distill", args, out, errOut, parseAndRun)
}

func parseAndRun(args []string, out, errOut io.Writer) error {
	var steps int
	var lr float64
	f := cli.NewFlags("distill", errOut)
	f.Int(&steps, "steps", 5, 0, maxSteps, "training steps")
	f.Float(&lr, "lr", 0.01, cli.Positive(maxLR), "student learning rate (plain gradient descent, as the guide)")
	if err := f.Parse(args); err != nil {
		return err
	}
	n, err := shard.DevicesFromEnv()
	if err != nil {
		return cli.Usage(err)
	}
	if shard.ProcessCount() > 1 {
		// Under mpirun each process gives half its devices to each mesh.
		if n = len(shard.LocalDevices()); n < 2 {
			return cli.Usagef("%s=%d: the teacher and the student need at least 2 devices in every process", shard.DevicesEnv, n)
		}
	}
	if n < 2 {
		return cli.Usagef("%s=%d: the teacher and the student need at least 2 devices", shard.DevicesEnv, n)
	}
	return run(steps, lr, out)
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

// studentBatch is what the student trains on: inputs and the teacher's
// outputs for them.
type studentBatch struct {
	X, Teacher *tensor.Tensor
}

// studentLoss is the mean squared distance to the teacher's outputs.
func studentLoss(m nn.MLP, b studentBatch) *tensor.Tensor {
	d := tensor.Sub(m.Forward(b.X), b.Teacher)
	return tensor.Mean(tensor.Sum(tensor.Square(d), -1))
}

// splitDevices returns the devices of the teacher's and the student's
// meshes: the first and the second half of every process's devices (in
// one process, devices 0-3 and 4-7 of 8), so under mpirun both meshes
// span every process and each process computes on both.
func splitDevices() (teacher, student []*shard.Device) {
	byProc := make([][]*shard.Device, shard.ProcessCount())
	for _, d := range shard.Devices() {
		byProc[d.Process()] = append(byProc[d.Process()], d)
	}
	for _, devs := range byProc {
		half := len(devs) / 2
		teacher = append(teacher, devs[:half]...)
		student = append(student, devs[half:2*half]...)
	}
	return teacher, student
}

func run(steps int, lr float64, out io.Writer) error {
	teacherDevs, studentDevs := splitDevices()
	if len(teacherDevs) < 1 {
		return fmt.Errorf("need at least 2 devices per process (set %s)", shard.DevicesEnv)
	}
	half := len(teacherDevs)
	inference := shard.NewMeshOn(teacherDevs, []int{half}, []string{"tp"})
	train := shard.NewMeshOn(studentDevs, []int{half}, []string{"dp"})

	keys := tensor.NewKey(0).Split(2)
	teacher := initModel(keys[0], []int{32, 128, 256, 128, 4})
	xKey, _ := keys[1].Split2()
	x := tensor.Normal(xKey, 16, 32) // the guide's init_random_batch inputs

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

	// Student: data parallel on the training mesh (replicated, batch split
	// over dp), trained by plain gradient descent on the squared distance
	// to the teacher's outputs.
	student, err := parallel.New(initModel(tensor.NewKey(1), []int{32, 4}), parallel.Config[nn.MLP, studentBatch]{
		Loss:      studentLoss,
		Optimizer: optim.SGD(optim.Constant(lr)),
		Mesh:      train,
		Strategy:  parallel.DP,
	})
	if err != nil {
		return err
	}
	if x.Dim(0)%half != 0 {
		return fmt.Errorf("the batch of %d does not split over the %d devices of the student's mesh", x.Dim(0), half)
	}

	// Pipeline: the teacher computes the outputs of step i+1 while the
	// student trains on step i. (Every step uses the guide's one batch.)
	xTeacher := shard.Put(x, shard.NewSharding(inference, shard.P(nil, "tp")))
	xStudent := shard.Put(x, student.BatchSharding())
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
			case targets <- shard.Reshard(y, student.BatchSharding()):
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
		loss, err := student.Step(studentBatch{X: xStudent, Teacher: y})
		if err != nil {
			return err
		}
		fmt.Fprintf(out, "Loss: %.2f\n", loss)
	}
	return nil
}
