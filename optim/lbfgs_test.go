package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"gonum.org/v1/gonum/mat"

	"github.com/gonox/gonox/autodiff"
	"github.com/gonox/gonox/checkpoint"
	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// point1 is a one-leaf model: a point to move.
type point1 struct{ X *tensor.Tensor }

var (
	quadA = []float64{
		4, 1, 0.5, 0,
		1, 3, 0, 0.2,
		0.5, 0, 2, 0.3,
		0, 0.2, 0.3, 1,
	}
	quadB = []float64{1, -2, 0.5, 3}
)

// quadratic is ½xᵀAx - bᵀx with A symmetric positive definite.
func quadratic(m point1) *tensor.Tensor {
	ax := tensor.MatMul(f32(quadA, 4, 4), m.X)
	return tensor.Sub(tensor.MulScalar(tensor.Sum(tensor.Mul(m.X, ax)), 0.5), tensor.Sum(tensor.Mul(f32(quadB, 4), m.X)))
}

// rosenbrock is (1-x)² + 100(y-x²)².
func rosenbrock(m point1) *tensor.Tensor {
	x := tensor.SliceAxis(m.X, 0, 0, 1)
	y := tensor.SliceAxis(m.X, 0, 1, 2)
	a := tensor.Square(tensor.AddScalar(tensor.Neg(x), 1))
	b := tensor.MulScalar(tensor.Square(tensor.Sub(y, tensor.Square(x))), 100)
	return tensor.Sum(tensor.Add(a, b))
}

// runLBFGS minimizes f from x0 for at most iters steps as LBFGS's doc
// shows, and returns the final point and the number of calls of f.
func runLBFGS(t *testing.T, opt optim.Transform, f func(point1) *tensor.Tensor, x0 []float64, iters int) (point1, int, optim.State) {
	t.Helper()
	calls := 0
	vg := autodiff.ValueAndGrad(f)
	counted := func(m point1) (*tensor.Tensor, point1) { calls++; return vg(m) }
	params := point1{X: f32(x0, len(x0))}
	state := opt.Init(params)
	for range iters {
		value, grads := optim.ValueAndGradFromState(counted, params, state)
		params, state = optim.StepExtra(opt, params, grads, state, optim.Extra{Value: value, ValueAndGrad: optim.ValueAndGradOf(counted)})
	}
	return params, calls, state
}

// On a quadratic of dimension 4, L-BFGS with an exact-enough line search
// reaches the minimizer A⁻¹b (solved with gonum) in a few steps.
func TestLBFGSQuadratic(t *testing.T) {
	var want mat.VecDense
	require.NoError(t, want.SolveVec(mat.NewDense(4, 4, quadA), mat.NewVecDense(4, quadB)))
	got, calls, state := runLBFGS(t, optim.LBFGS(), quadratic, []float64{0, 0, 0, 0}, 8)
	closeTo(t, want.RawVector().Data, got.X.Float64s(), 1e-4, 1e-4, "minimizer")

	// The loss is evaluated once at the start and then only by the line
	// search: ValueAndGradFromState reused the rest.
	ls := state.(optim.ChainState)[2].(optim.ZoomLinesearchState)
	assert.Less(t, calls, 8*3, "a handful of evaluations per step")
	assert.InDelta(t, quadratic(got).Item(), ls.Value.Item(), 1e-6, "the state holds the loss at the new params")
}

func TestLBFGSRosenbrock(t *testing.T) {
	got, _, _ := runLBFGS(t, optim.LBFGS(), rosenbrock, []float64{-1.2, 1}, 60)
	closeTo(t, []float64{1, 1}, got.X.Float64s(), 0, 2e-3, "Rosenbrock's minimum")
	// A smaller memory converges too.
	got, _, _ = runLBFGS(t, optim.LBFGS(optim.LBFGSOptions{MemorySize: 3}), rosenbrock, []float64{-1.2, 1}, 80)
	closeTo(t, []float64{1, 1}, got.X.Float64s(), 0, 2e-3, "Rosenbrock's minimum, memory 3")
}

// bfgsDense applies the BFGS inverse-Hessian update for each (s, y) pair,
// oldest first, to H0 = γI, and returns H·g: what the two-loop recursion
// computes without forming H (Nocedal and Wright, section 7.2).
func bfgsDense(ss, ys [][]float64, gamma float64, g []float64) []float64 {
	n := len(g)
	h := mat.NewDense(n, n, nil)
	for i := range n {
		h.Set(i, i, gamma)
	}
	id := mat.NewDense(n, n, nil)
	for i := range n {
		id.Set(i, i, 1)
	}
	for k := range ss {
		s, y := mat.NewVecDense(n, ss[k]), mat.NewVecDense(n, ys[k])
		rho := 1 / mat.Dot(s, y)
		var l, r, sst mat.Dense
		l.Outer(-rho, s, y)
		l.Add(id, &l)
		r.Outer(-rho, y, s)
		r.Add(id, &r)
		var lh, lhr mat.Dense
		lh.Mul(&l, h)
		lhr.Mul(&lh, &r)
		sst.Outer(rho, s, s)
		h.Add(&lhr, &sst)
	}
	var out mat.VecDense
	out.MulVec(h, mat.NewVecDense(n, g))
	return out.RawVector().Data
}

// ScaleByLBFGS's two-loop recursion equals the dense BFGS update of the
// inverse Hessian over the pairs in memory, with the memory as a ring.
func TestScaleByLBFGSTwoLoop(t *testing.T) {
	for _, memory := range []int{10, 2} {
		tx := optim.ScaleByLBFGS(optim.LBFGSOptions{MemorySize: memory})
		var xs, gs [][]float64
		for k := range 5 {
			xs = append(xs, wave(4, 0.7*float64(k)))
			gs = append(gs, wave(4, 3+1.3*float64(k)))
		}
		st := tx.Init(point1{X: f32(xs[0], 4)})
		for k := range xs {
			u, s := tx.Update(point1{X: f32(gs[k], 4)}, st, point1{X: f32(xs[k], 4)})
			st = s
			var ss, ys [][]float64
			for j := max(1, k-memory+1); j <= k; j++ {
				s, y := make([]float64, 4), make([]float64, 4)
				for i := range 4 {
					s[i], y[i] = xs[j][i]-xs[j-1][i], gs[j][i]-gs[j-1][i]
				}
				ss, ys = append(ss, s), append(ys, y)
			}
			gamma := math.Min(1, 1/math.Sqrt(dot(gs[0], gs[0])))
			if k > 0 {
				s, y := ss[len(ss)-1], ys[len(ys)-1]
				gamma = dot(s, y) / dot(y, y)
			}
			want := bfgsDense(ss, ys, gamma, gs[k])
			closeTo(t, want, u.(point1).X.Float64s(), 1e-4, 1e-5, "memory %d step %d", memory, k)
		}
	}
}

// The zoom line search along -∇f of ‖x - c‖²: the exact step is ½, which
// the quadratic interpolation of the first zoom finds; started from the
// step kept from the last search it is accepted at once.
func TestZoomLinesearch(t *testing.T) {
	c := f32([]float64{1, -2, 3}, 3)
	f := func(m point1) *tensor.Tensor { return tensor.Sum(tensor.Square(tensor.Sub(m.X, c))) }
	vg := autodiff.ValueAndGrad(f)
	calls := 0
	counted := func(m point1) (*tensor.Tensor, point1) { calls++; return vg(m) }
	ls := optim.ScaleByZoomLinesearch(10)
	params := point1{X: f32([]float64{0, 0, 0}, 3)}
	st := ls.Init(params)
	step := func(guessOne bool) optim.ZoomLinesearchState {
		value, g := vg(params)
		opt := optim.Chain(optim.Scale(-1), ls)
		if guessOne {
			opt = optim.Chain(optim.Scale(-1), optim.ScaleByZoomLinesearch(10, optim.ZoomLinesearchOptions{InitialGuess: optim.GuessOne}))
		}
		var cs optim.State = optim.ChainState{optim.EmptyState{}, st}
		calls = 0
		u, cs := optim.UpdateExtra(opt, g, cs, params, optim.Extra{Value: value, Grad: g, ValueAndGrad: optim.ValueAndGradOf(counted)})
		params = optim.Apply(params, u)
		st = cs.(optim.ChainState)[1]
		return st.(optim.ZoomLinesearchState)
	}
	s := step(true)
	assert.InDelta(t, 0.5, s.LearningRate.Item(), 1e-6)
	assert.Equal(t, int32(2), s.Info.NumLinesearchSteps.Int32s()[0])
	assert.Equal(t, 2, calls, "one call per point evaluated")
	closeTo(t, c.Float64s(), params.X.Float64s(), 1e-6, 1e-6, "the minimum")
	assert.Zero(t, s.Info.DecreaseError.Item())
	assert.Zero(t, s.Info.CurvatureError.Item())

	params = point1{X: f32([]float64{5, 5, 5}, 3)}
	s = step(false) // keeps ½
	assert.Equal(t, int32(1), s.Info.NumLinesearchSteps.Int32s()[0])
	assert.Equal(t, 1, calls)

	// Along a line where the loss keeps decreasing, the step grows by
	// IncreaseFactor up to MaxLearningRate and stops there.
	lin := func(m point1) *tensor.Tensor { return tensor.Sum(m.X) }
	lvg := autodiff.ValueAndGrad(lin)
	capped := optim.Chain(optim.Scale(-1), optim.ScaleByZoomLinesearch(10, optim.ZoomLinesearchOptions{MaxLearningRate: 4, InitialGuess: optim.GuessOne}))
	p := point1{X: f32([]float64{0, 0}, 2)}
	v, g := lvg(p)
	_, cst := optim.UpdateExtra(capped, g, capped.Init(p), p, optim.Extra{Value: v, Grad: g, ValueAndGrad: optim.ValueAndGradOf(lvg)})
	zs := cst.(optim.ChainState)[1].(optim.ZoomLinesearchState)
	assert.Equal(t, 4.0, zs.LearningRate.Item())
	assert.Equal(t, int32(3), zs.Info.NumLinesearchSteps.Int32s()[0], "η = 1, 2, 4")
}

// The LBFGS state (a memory of trees) survives a checkpoint, and the run
// goes on identically from it.
func TestLBFGSCheckpoint(t *testing.T) {
	opt := optim.LBFGS(optim.LBFGSOptions{MemorySize: 3})
	p, _, st := runLBFGS(t, opt, rosenbrock, []float64{-1.2, 1}, 4)
	dir := t.TempDir()
	require.NoError(t, checkpoint.Save(dir, 4, st))
	back, err := checkpoint.Restore(dir, 4, opt.Init(p), checkpoint.OnHost())
	require.NoError(t, err)
	require.NoError(t, pytree.Diff(st, back, 0, 0))
	vg := autodiff.ValueAndGrad(rosenbrock)
	next := func(st optim.State) point1 {
		v, g := optim.ValueAndGradFromState(vg, p, st)
		out, _ := optim.StepExtra(opt, p, g, st, optim.Extra{Value: v, ValueAndGrad: optim.ValueAndGradOf(vg)})
		return out
	}
	require.NoError(t, pytree.Diff(next(st), next(back), 0, 0))
}

func TestLBFGSPanics(t *testing.T) {
	p := point1{X: f32([]float64{1, 2}, 2)}
	for _, tc := range []struct {
		name string
		f    func()
		want string
	}{
		{"no loss", func() { opt := optim.LBFGS(); opt.Update(p, opt.Init(p), p) },
			"optim.ScaleByZoomLinesearch: Update needs the loss: call optim.UpdateExtra or optim.StepExtra with optim.Extra{Value: loss, ValueAndGrad: optim.ValueAndGradOf(lossAndGrad)}"},
		{"memory", func() { optim.LBFGS(optim.LBFGSOptions{MemorySize: -1}) }, "optim.LBFGS: MemorySize -1, want >= 1"},
		{"linesearch twice", func() { optim.LBFGS(optim.LBFGSOptions{Linesearch: optim.Identity(), NoLinesearch: true}) },
			"optim.LBFGS: Linesearch and NoLinesearch together"},
		{"scale options", func() { optim.ScaleByLBFGS(optim.LBFGSOptions{NoLinesearch: true}) },
			"optim.ScaleByLBFGS: LearningRate, Linesearch and NoLinesearch are options of LBFGS"},
		{"steps", func() { optim.ScaleByZoomLinesearch(0) }, "optim.ScaleByZoomLinesearch: maxSteps 0, want >= 1"},
		{"wolfe", func() { optim.ScaleByZoomLinesearch(5, optim.ZoomLinesearchOptions{SlopeRTol: 0.95}) },
			"optim.ScaleByZoomLinesearch: SlopeRTol 0.95, CurvRTol 0.9: want 0 < SlopeRTol < CurvRTol < 1"},
		{"from state", func() {
			optim.ValueAndGradFromState(autodiff.ValueAndGrad(quadratic), p, optim.Adam(optim.Constant(1)).Init(p))
		},
			"optim.ValueAndGradFromState: state is optim.AdamState, which holds no ZoomLinesearchState"},
	} {
		t.Run(tc.name, func(t *testing.T) { require.PanicsWithValue(t, tc.want, tc.f) })
	}
}
