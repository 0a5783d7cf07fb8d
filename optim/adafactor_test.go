package optim_test

import (
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/gonox/gonox/optim"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// adafactorCfg are the hyperparameters of adafactorRef.
type adafactorCfg struct {
	lr          optim.Schedule // nil: none
	minDim      int
	decayRate   float64
	offset      int
	paramScale  bool
	clip        float64 // 0: none
	momentum    float64
	wd          float64
	decays      func(string) bool
	eps         float64
	notFactored bool
}

func defaultAdafactor() adafactorCfg {
	return adafactorCfg{minDim: 128, decayRate: 0.8, paramScale: true, clip: 1, eps: 1e-30}
}

// factoredDims is optax's _factored_dims: the two largest dimensions by a
// stable argsort of the shape (d1 second largest, d0 largest).
func factoredDims(c adafactorCfg, shape []int) (d1, d0 int, ok bool) {
	if c.notFactored || len(shape) < 2 {
		return 0, 0, false
	}
	// selection by hand: largest, ties to the later index
	d0 = 0
	for i := range shape {
		if shape[i] >= shape[d0] {
			d0 = i
		}
	}
	d1 = -1
	for i := range shape {
		if i != d0 && (d1 < 0 || shape[i] >= shape[d1]) {
			d1 = i
		}
	}
	if shape[d1] < c.minDim {
		return 0, 0, false
	}
	return d1, d0, true
}

func unravel(i int, shape []int) []int {
	idx := make([]int, len(shape))
	for d := len(shape) - 1; d >= 0; d-- {
		idx[d] = i % shape[d]
		i /= shape[d]
	}
	return idx
}

// key returns the flat index of idx with dimension drop removed, in the
// shape without that dimension.
func key(idx, shape []int, drop int) int {
	k := 0
	for d := range shape {
		if d != drop {
			k = k*shape[d] + idx[d]
		}
	}
	return k
}

func meanSq(x []float64) float64 {
	s := 0.0
	for _, v := range x {
		s += v * v
	}
	return s / float64(len(x))
}

// adafactorRef follows optax.adafactor step by step in float64:
// scale_by_factored_rms, clip_by_block_rms, learning rate,
// scale_by_param_block_rms, ema momentum, add_decayed_weights, negation.
func adafactorRef(c adafactorCfg) leafRef {
	vr, vc, v, m := map[string][]float64{}, map[string][]float64{}, map[string][]float64{}, map[string][]float64{}
	return func(t int, name string, shape []int, g, p []float64) []float64 {
		n := len(g)
		decay := 1 - math.Pow(float64(t-c.offset)+1, -c.decayRate)
		g2 := make([]float64, n)
		for i := range g {
			g2[i] = g[i]*g[i] + c.eps
		}
		u := make([]float64, n)
		if d1, d0, ok := factoredDims(c, shape); ok {
			if vr[name] == nil {
				vr[name], vc[name] = make([]float64, n/shape[d0]), make([]float64, n/shape[d1])
			}
			rowMean, colMean := make([]float64, n/shape[d0]), make([]float64, n/shape[d1])
			for i := range g2 {
				idx := unravel(i, shape)
				rowMean[key(idx, shape, d0)] += g2[i] / float64(shape[d0])
				colMean[key(idx, shape, d1)] += g2[i] / float64(shape[d1])
			}
			for i := range rowMean {
				vr[name][i] = decay*vr[name][i] + (1-decay)*rowMean[i]
			}
			for i := range colMean {
				vc[name][i] = decay*vc[name][i] + (1-decay)*colMean[i]
			}
			// the mean of v_row over the d1 dimension, for every other index
			rShape := append(append([]int(nil), shape[:d0]...), shape[d0+1:]...)
			rd1 := d1
			if d1 > d0 {
				rd1--
			}
			rcm := map[int]float64{}
			for i := range vr[name] {
				rcm[key(unravel(i, rShape), rShape, rd1)] += vr[name][i] / float64(rShape[rd1])
			}
			for i := range g {
				idx := unravel(i, shape)
				ri := key(idx, shape, d0)
				row := vr[name][ri] / rcm[key(unravel(ri, rShape), rShape, rd1)]
				u[i] = g[i] / math.Sqrt(row) / math.Sqrt(vc[name][key(idx, shape, d1)])
			}
		} else {
			if v[name] == nil {
				v[name] = make([]float64, n)
			}
			for i := range g {
				v[name][i] = decay*v[name][i] + (1-decay)*g2[i]
				u[i] = g[i] / math.Sqrt(v[name][i])
			}
		}
		if c.clip != 0 {
			den := math.Max(1, math.Sqrt(meanSq(u))/c.clip)
			for i := range u {
				u[i] /= den
			}
		}
		s := 1.0
		if c.lr != nil {
			s = c.lr(t)
		}
		if c.paramScale {
			s *= math.Max(math.Sqrt(meanSq(p)), 1e-3)
		}
		for i := range u {
			u[i] *= s
		}
		if c.momentum != 0 {
			if m[name] == nil {
				m[name] = make([]float64, n)
			}
			for i := range u {
				m[name][i] = c.momentum*m[name][i] + (1-c.momentum)*u[i]
				u[i] = m[name][i]
			}
		}
		for i := range u {
			if c.wd != 0 && c.decays(name) {
				u[i] += c.wd * p[i]
			}
			u[i] = -u[i]
		}
		return u
	}
}

func TestAdafactorAgainstReference(t *testing.T) {
	lr := optim.Constant(0.01)
	sched := optim.Linear(0.1, 0.02, 5, 0)
	with := func(f func(*adafactorCfg)) adafactorCfg {
		c := defaultAdafactor()
		f(&c)
		return c
	}
	for _, tc := range []struct {
		name string
		tx   optim.Transform
		cfg  adafactorCfg
	}{
		// W is f32[3,4]: unfactored with the default MinDimSizeToFactor.
		{"optax defaults, no lr, unfactored", optim.Adafactor(nil), defaultAdafactor()},
		{"factored W", optim.Adafactor(lr, optim.AdafactorOptions{MinDimSizeToFactor: 3}),
			with(func(c *adafactorCfg) { c.lr, c.minDim = lr, 3 })},
		{"min dim just above", optim.Adafactor(lr, optim.AdafactorOptions{MinDimSizeToFactor: 4}),
			with(func(c *adafactorCfg) { c.lr, c.minDim = lr, 4 })},
		{"NotFactored", optim.Adafactor(lr, optim.AdafactorOptions{MinDimSizeToFactor: 1, NotFactored: true}),
			with(func(c *adafactorCfg) { c.lr, c.minDim, c.notFactored = lr, 1, true })},
		{"factored, all options", optim.Adafactor(sched, optim.AdafactorOptions{
			MinDimSizeToFactor: 2, DecayRate: 0.5, DecayOffset: -2, ClippingThreshold: 0.5,
			Momentum: 0.9, WeightDecayRate: 0.1, WeightDecayMask: pytree.PathGlob("W"), Eps: 1e-3,
		}), with(func(c *adafactorCfg) {
			c.lr, c.minDim, c.decayRate, c.offset, c.clip = sched, 2, 0.5, -2, 0.5
			c.momentum, c.wd, c.decays, c.eps = 0.9, 0.1, only("W"), 1e-3
		})},
		{"no clipping, no parameter scale", optim.Adafactor(lr, optim.AdafactorOptions{MinDimSizeToFactor: 3, NoClipping: true, NoParameterScale: true}),
			with(func(c *adafactorCfg) { c.lr, c.minDim, c.clip, c.paramScale = lr, 3, 0, false })},
	} {
		t.Run(tc.name, func(t *testing.T) { compareRef(t, tc.tx, 6, adafactorRef(tc.cfg)) })
	}
}

// TestAdafactorFactoredShapes checks the factored path where the largest
// dimension comes first, where sizes tie, and for a rank-3 parameter,
// against the reference, and the shapes and logical axes of the factors.
func TestAdafactorFactoredShapes(t *testing.T) {
	for _, tc := range []struct {
		name       string
		shape      []int
		axes       []string
		rowShape   []int
		colShape   []int
		rowAxes    []string
		colAxes    []string
		unfactored bool
	}{
		{"largest first", []int{4, 3}, []string{"vocab", "embed"}, []int{3}, []int{4}, []string{"embed"}, []string{"vocab"}, false},
		{"largest last", []int{3, 5}, []string{"embed", "mlp"}, []int{3}, []int{5}, []string{"embed"}, []string{"mlp"}, false},
		{"tie", []int{3, 3}, []string{"a", "b"}, []int{3}, []int{3}, []string{"a"}, []string{"b"}, false},
		{"rank 3", []int{2, 3, 4}, []string{"layers", "embed", "mlp"}, []int{2, 3}, []int{2, 4}, []string{"layers", "embed"}, []string{"layers", "mlp"}, false},
		{"rank 3, largest in the middle", []int{3, 5, 2}, []string{"x", "y", "z"}, []int{3, 2}, []int{5, 2}, []string{"x", "z"}, []string{"y", "z"}, false},
		{"too small", []int{2, 8}, []string{"a", "b"}, nil, nil, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := 1
			for _, d := range tc.shape {
				n *= d
			}
			cfg := defaultAdafactor()
			cfg.minDim = 3
			ref := adafactorRef(cfg)
			opt := optim.Adafactor(nil, optim.AdafactorOptions{MinDimSizeToFactor: 3})
			p := tensor.WithLogicalAxes(f32(wave(n, 0.1), tc.shape...), tc.axes...)
			p64 := p.Float64s()
			state := opt.Init(p)
			for step := range 4 {
				g := f32(wave(n, 3+float64(step)), tc.shape...)
				u, st := opt.Update(g, state, p)
				state = st
				want := ref(step, "p", tc.shape, g.Float64s(), p64)
				closeTo(t, want, u.(*tensor.Tensor).Float64s(), 2e-5, 1e-7, "step %d", step)
				for i := range want {
					p64[i] += want[i]
				}
				p = optim.Apply(p, u)
				assert.Equal(t, tc.axes, p.LogicalAxes(), "Apply keeps the axes")
				fs := state.(optim.AdafactorState)
				if tc.unfactored {
					require.Nil(t, fs.VRow)
					require.Equal(t, tc.shape, fs.V.(*tensor.Tensor).Shape())
					assert.Equal(t, tc.axes, fs.V.(*tensor.Tensor).LogicalAxes())
					continue
				}
				require.Nil(t, fs.V)
				vr, vc := fs.VRow.(*tensor.Tensor), fs.VCol.(*tensor.Tensor)
				assert.Equal(t, tc.rowShape, vr.Shape())
				assert.Equal(t, tc.colShape, vc.Shape())
				assert.Equal(t, tc.rowAxes, vr.LogicalAxes(), "step %d", step)
				assert.Equal(t, tc.colAxes, vc.LogicalAxes(), "step %d", step)
			}
		})
	}
}

func TestAdafactorSavesMemory(t *testing.T) {
	// A factored 256x512 matrix keeps 256+512 statistics instead of 131072.
	p := tensor.Zeros(tensor.Float32, 256, 512)
	st := optim.Adafactor(nil).Init(p).(optim.AdafactorState)
	total := 0
	for _, x := range pytree.Leaves(st) {
		total += x.Size()
	}
	assert.Equal(t, 256+512+1, total)
}
