package tensor

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"go.uber.org/goleak"

	"github.com/gonox/gonox/tensor/internal/workers"
)

// withParallel lowers the split threshold so that small tensors take the
// parallel paths, on 4 procs, for the duration of a test.
func withParallel(t *testing.T, minWork int) {
	old, oldProcs := parallelMinWork, runtime.GOMAXPROCS(4)
	parallelMinWork = minWork
	t.Cleanup(func() {
		parallelMinWork = old
		runtime.GOMAXPROCS(oldProcs)
	})
}

func randTensor(rng *rand.Rand, shape ...int) *Tensor {
	d := make([]float32, numel(shape))
	for i := range d {
		d[i] = float32(rng.NormFloat64() * 2)
	}
	return FromFloat32(d, shape...)
}

// kernelsUnderTest runs every kernel that splits over goroutines.
func kernelsUnderTest(x, y, b, row *Tensor) []*Tensor {
	return []*Tensor{
		Add(x, y), Sub(x, b), Mul(x, row), Div(y, Scalar(3)), Maximum(x, y),
		Exp(x), Tanh(x), Sigmoid(x), Gelu(x), Silu(x), GeluExact(x), Log(Abs(x)), Softplus(x),
		Sum(x), Sum(x, 1), Sum(x, 0), SumKeep(x, 0, 1), Max(x, 1), Min(x, 0),
		Softmax(x, -1), LogSoftmax(x, -1), MSE(x, y),
		BiasAct(x, b, ActGelu), BiasAct(x, b, ActRelu), BiasAct(x, b, ActTanh),
		Apply(geluBwdOp, nil, y, x), Apply(biasActBwdOp, ActSilu, y, x, b),
		ApplyN(mseGradOp, nil, Scalar(0.5), x, y)[0],
		SoftmaxCrossEntropy(x, FromInts(make([]int, x.shape[0]))),
		// Kernels that split with srtParallel.
		Softmax(x, 0), Apply(softmaxGradOp, 1, y, x), Apply(logSoftmaxGradOp, 0, y, x),
		Sort(x, 1, false), Sort(x, 0, true), topKValues(x, 20),
		Apply(xentGradOp, nil, Sum(y, 1), x, FromInts(make([]int, x.shape[0]))),
		LogSumExp(x, 1), LogSumExpKeep(x, 0),
	}
}

func topKValues(x *Tensor, k int) *Tensor {
	v, _ := TopK(x, k)
	return v
}

// Parallel kernels return the same bits as the serial ones.
func TestParallelMatchesSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	// Rows longer than a sum block, so that whole-tensor sums split too.
	x, y := randTensor(rng, 40, 3000), randTensor(rng, 40, 3000)
	b, row := randTensor(rng, 3000), randTensor(rng, 40, 1)
	serialOut := kernelsUnderTest(x, y, b, row)
	withParallel(t, 64)
	before := parallelSpawned.Load()
	parOut := kernelsUnderTest(x, y, b, row)
	require.Greater(t, parallelSpawned.Load(), before, "the kernels did not split")
	for i := range serialOut {
		s, p := serialOut[i].Float32s(), parOut[i].Float32s()
		require.Equal(t, len(s), len(p))
		for j := range s {
			if math.IsNaN(float64(s[j])) && math.IsNaN(float64(p[j])) {
				continue
			}
			require.Equal(t, math.Float32bits(s[j]), math.Float32bits(p[j]), "kernel %d element %d", i, j)
		}
	}
	// A single huge sum spans several blocks.
	big := randTensor(rng, 5*65536+3)
	withParallel(t, 1<<30)
	s1 := Sum(big).Item()
	withParallel(t, 64)
	require.Equal(t, s1, Sum(big).Item())
}

type fakeEnv struct{}

func (fakeEnv) AxisNames() []string                     { return []string{"dp"} }
func (e fakeEnv) Local(mask uint64) *Local              { return &Local{Env: e, Mask: mask} }
func (fakeEnv) PsumMask(x *Tensor, mask uint64) *Tensor { return x }

// A block inside shard.Map (a Local mark) is computed on the calling
// goroutine only, whatever its size.
func TestLocalStaysSerial(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	loc := &Local{Env: fakeEnv{}, Mask: 1}
	x := WithLocal(randTensor(rng, 40, 3000), loc)
	y := WithLocal(randTensor(rng, 40, 3000), loc)
	b := WithLocal(randTensor(rng, 3000), loc)
	row := WithLocal(randTensor(rng, 40, 1), loc)
	withParallel(t, 64)
	before := parallelSpawned.Load()
	asked := workers.Asked()
	outs := kernelsUnderTest(x, y, b, row)
	require.Equal(t, before, parallelSpawned.Load(), "a kernel on a Local block started goroutines")
	require.Equal(t, asked, workers.Asked(), "a kernel on a Local block asked the workers for help")
	for _, o := range outs {
		require.NotNil(t, o.Local())
	}
	// The same ops on unmarked operands do split (the test can tell).
	kernelsUnderTest(StopGradient(WithLocal(x, nil)), WithLocal(y, nil), WithLocal(b, nil), WithLocal(row, nil))
	require.Greater(t, parallelSpawned.Load(), before)
}

// TestSpreadPanics: a panic in any chunk, on the caller's goroutine or on
// a helper, reaches the caller only after every chunk has finished, and no
// goroutine is left running (the pooled workers exit after
// workers.IdleExit, well within goleak's retries).
func TestSpreadPanics(t *testing.T) {
	defer goleak.VerifyNone(t)
	for _, bad := range []int{0, 2} {
		t.Run(fmt.Sprintf("chunk %d panics", bad), func(t *testing.T) {
			var done atomic.Int64
			require.PanicsWithValue(t, "kernel fault", func() {
				spread(4, func(c int) int { return 10 * c }, func(lo, hi int) {
					if lo == 10*bad {
						panic("kernel fault")
					}
					time.Sleep(20 * time.Millisecond)
					done.Add(int64(hi - lo))
				})
			})
			require.Equal(t, int64(30), done.Load(), "the other chunks finished before the panic was raised")
		})
	}
}

// TestParallelForChunks: parallelFor covers [0, n) exactly once, in chunks
// aligned as asked (all but the last), several per goroutine, and a
// goroutine that starts late finds its chunks taken by the others.
func TestParallelForChunks(t *testing.T) {
	withParallel(t, 64)
	for _, c := range []struct{ n, align int }{{1000, 1}, {1000, 8}, {37, 4}, {3, 1}} {
		seen := make([]atomic.Int32, c.n)
		var chunks atomic.Int32
		parallelFor(c.n, 100, c.align, false, func(lo, hi int) {
			require.True(t, lo%c.align == 0, "chunk [%d, %d) not aligned to %d", lo, hi, c.align)
			chunks.Add(1)
			for i := lo; i < hi; i++ {
				seen[i].Add(1)
			}
		})
		for i := range seen {
			require.Equal(t, int32(1), seen[i].Load(), "n=%d align=%d element %d", c.n, c.align, i)
		}
		if c.n >= 1000 {
			require.Greater(t, int(chunks.Load()), runtime.GOMAXPROCS(0), "n=%d: one chunk per goroutine", c.n)
		}
	}
}
