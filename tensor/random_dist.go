package tensor

import (
	"fmt"
	"math"
	"slices"
)

// This file holds the samplers of jax.random's common distributions beyond
// random.go's: exponential, Laplace, gamma (and its logarithm), beta,
// Dirichlet, Poisson, choice and categorical with a sample shape. They
// follow JAX's algorithms step for step (the same key splits, the same
// draws in the same order, the same float32 formulas), so that they draw
// JAX's numbers: where a formula is made of exact float32 operations the
// bits match; where it takes a logarithm, a power or an exponential, gonox
// rounds a high-precision value and XLA evaluates its own float32
// approximation, so an occasional result differs from JAX's in the last
// bit, and a rejection sampler that compares such a value with a bound can
// then, rarely, take another branch. The tests check JAX's published
// values. Results are constants for autodiff (JAX differentiates gamma,
// beta and Dirichlet samples with respect to their parameters; gonox does
// not).

// Exponential returns float32 values from the exponential distribution
// with rate 1 (density e^-x on [0, ∞)), like jax.random.exponential(k,
// shape): -log1p(-u) for u from Uniform(k, shape...). Element i depends
// only on k and i, as for Uniform. It panics on a negative dimension.
func Exponential(k Key, shape ...int) *Tensor {
	checkShape("tensor.Exponential", shape)
	return k.sample("tensor.Exponential", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat32s(rngExponential(rngPartitionable, k, numel(shape)), shape)
	})
}

func rngExponential(s rngScheme, k Key, n int) []float32 {
	u := rngUniform(s, k, n, 0, 1)
	for i, v := range u {
		u[i] = -float32(rngLog1p(-v))
	}
	return u
}

// Laplace returns float32 values from the Laplace distribution with
// location 0 and scale 1 (density e^-|x|/2), like jax.random.laplace(k,
// shape): sign(u)·log1p(-|u|) for u uniform in (-1, 1). Element i depends
// only on k and i. It panics on a negative dimension.
func Laplace(k Key, shape ...int) *Tensor {
	checkShape("tensor.Laplace", shape)
	return k.sample("tensor.Laplace", func(k Key, _ []*Tensor) *Tensor {
		return rngFloat32s(rngLaplace(rngPartitionable, k, numel(shape)), shape)
	})
}

func rngLaplace(s rngScheme, k Key, n int) []float32 {
	u := rngUniform(s, k, n, math.Nextafter32(-1, 0), 1) // minval -1 + float32 epsneg
	for i, v := range u {
		l := float32(rngLog1p(-abs32(v)))
		switch {
		case v > 0:
			u[i] = l
		case v < 0:
			u[i] = -l
		default:
			u[i] = 0 // sign(0)·log1p(0)
		}
	}
	return u
}

func abs32(x float32) float32 { return math.Float32frombits(math.Float32bits(x) &^ (1 << 31)) }

// Gamma returns float32 values from the gamma distribution with shape
// parameters a and scale 1 (density x^(a-1)·e^-x/Γ(a)), like
// jax.random.gamma(k, a, shape): a (float32 or float64, every element > 0)
// is broadcast to shape, which defaults to a's shape, and the result has
// a's dtype (a float64 a draws float64 values, as dtype=jnp.float64 does
// in JAX). Each element is drawn by Marsaglia and Tsang's rejection
// method, with a < 1 boosted to a+1 and the sample multiplied by u^(1/a),
// from its own key of k.Split(n) (n the number of elements), exactly as
// JAX draws it. It panics if a is not float32 or float64, does not
// broadcast to shape, or has an element that is not positive (JAX does not
// check).
func Gamma(k Key, a *Tensor, shape ...int) *Tensor {
	checkNil("tensor.Gamma", "a", a)
	return k.sample("tensor.Gamma", func(k Key, p []*Tensor) *Tensor {
		return rngGammaDraw("tensor.Gamma", k, p[0], shape, false)
	}, a)
}

// LogGamma returns the logarithms of gamma samples, like
// jax.random.loggamma(k, a, shape): the same draws as Gamma, computed in
// log space so that a small a (where the samples underflow float32) keeps
// its precision. Beta and Dirichlet are built on it. a is float32 or
// float64, as for Gamma.
func LogGamma(k Key, a *Tensor, shape ...int) *Tensor {
	checkNil("tensor.LogGamma", "a", a)
	return k.sample("tensor.LogGamma", func(k Key, p []*Tensor) *Tensor {
		return rngGammaDraw("tensor.LogGamma", k, p[0], shape, true)
	}, a)
}

// rngGammaDraw draws Gamma (LogGamma if logSpace) of the host parameter
// a, in a's dtype.
func rngGammaDraw(op string, k Key, a *Tensor, shape []int, logSpace bool) *Tensor {
	shape, av := rngParam(op, "a", a, shape)
	if av.dtype == Float64 {
		v := av.f64()
		checkPositive(op, "a", a, v)
		return rngFloat64s(rngGamma64(k, v, logSpace), shape)
	}
	v := av.f32()
	checkPositive(op, "a", a, v)
	return rngFloat32s(rngGamma(rngPartitionable, k, v, logSpace), shape)
}

// rngParam checks a float32 or float64 parameter of a sampler and returns
// the sample shape (the parameter's if none is given) and the parameter
// broadcast to it (a host tensor of its own, which the caller may read
// but not change).
func rngParam(op, name string, p *Tensor, shape []int) ([]int, *Tensor) {
	checkNil(op, name, p)
	if p.dtype != Float32 && p.dtype != Float64 {
		panic(fmt.Sprintf("%s: %s %v must be float32 or float64", op, name, p))
	}
	if shape == nil {
		shape = slices.Clone(p.shape)
	}
	checkShape(op, shape)
	if !broadcastsTo(p.shape, shape) {
		panic(fmt.Sprintf("%s: %s %v does not broadcast to the sample shape %v", op, name, p, shape))
	}
	return shape, BroadcastTo(StopGradient(p), shape...).host(op)
}

// checkPositive panics unless every value of a parameter is > 0.
func checkPositive[F float32 | float64](op, name string, p *Tensor, v []F) {
	for _, x := range v {
		if !(x > 0) {
			panic(fmt.Sprintf("%s: %s %v holds %v; every element must be positive", op, name, p, x))
		}
	}
}

// broadcastsTo reports whether from broadcasts to exactly to.
func broadcastsTo(from, to []int) bool {
	if len(from) > len(to) {
		return false
	}
	off := len(to) - len(from)
	for i, d := range from {
		if d != 1 && d != to[off+i] {
			return false
		}
	}
	return true
}

// rngGamma is jax.random.gamma (log space: loggamma) for float32 shape
// parameters a: one key per element from k.Split(len(a)).
func rngGamma(s rngScheme, k Key, a []float32, logSpace bool) []float32 {
	keys := s.split(k, len(a))
	out := make([]float32, len(a))
	// An element costs a few hundred times a uniform draw: weigh it so.
	const weight = 256
	rngParallel(len(a)*weight, func(lo, hi int) {
		for i := lo / weight; i < hi/weight; i++ {
			out[i] = rngGammaOne(s, keys[i], a[i], logSpace)
		}
	})
	return out
}

// log32 and exp32 are the float32 logarithm and exponential, rounded from
// high-precision values.
func log32(x float32) float32 {
	switch {
	case x < 0 || x != x:
		return float32(math.NaN())
	case math.IsInf(float64(x), 1):
		return x
	}
	return float32(rngLog(float64(x)))
}

func exp32(x float32) float32 { return float32(math.Exp(float64(x))) }

// rngGammaOne is JAX's _gamma_one: Marsaglia and Tsang's method ("A simple
// method for generating gamma variables", 2000) for one element, with
// JAX's keys and float32 arithmetic (every product rounded before it is
// added: float32(a*b) keeps Go from fusing it).
func rngGammaOne(s rngScheme, k Key, alpha float32, logSpace bool) float32 {
	const third = float32(1.0 / 3)
	boost := alpha >= 1
	alphaOrig := alpha
	if !boost {
		alpha++
	}
	d := alpha - third
	c := third / float32(math.Sqrt(float64(d)))
	var ks [3]Key
	s.splitInto(k, ks[:2])
	key, sub := ks[0], ks[1]
	X, V, U := float32(0), float32(1), float32(2)
	for U >= 1-float32(0.0331*float32(X*X)) &&
		log32(U) >= float32(X*0.5)+float32(d*(float32(1-V)+log32(V))) {
		s.splitInto(key, ks[:3])
		kx, ku := ks[1], ks[2]
		key = ks[0]
		x, v := float32(0), float32(-1)
		for v <= 0 {
			var kk [2]Key
			s.splitInto(kx, kk[:])
			kx = kk[0]
			x = rngNormalWord(s.word(kk[1]))
			v = 1 + float32(x*c)
		}
		X = float32(x * x)
		V = float32(float32(v*v) * v)
		U = rngUnit(s.word(ku))
	}
	u := rngUnit(s.word(sub))
	if logSpace {
		logSamples := float32(rngLog1p(-u)) // -exponential(sub)
		var logBoost float32
		if !boost && logSamples != 0 {
			logBoost = float32(logSamples * (1 / alphaOrig))
		}
		return (log32(d) + log32(V)) + logBoost
	}
	boostV := float32(1)
	if !boost {
		boostV = float32(math.Pow(float64(1-u), float64(1/alphaOrig)))
	}
	return float32(float32(d*V) * boostV)
}

// word returns the one random word of a scalar draw from k: bits(k, 1).
func (s rngScheme) word(k Key) uint32 {
	a, b := rngThreefry2x32(k.data[0], k.data[1], 0, 0)
	if s == rngPartitionable {
		return a ^ b
	}
	return a // legacy: counters (0, 0) for one word, the first output
}

// splitInto is split(k, len(out)) into out, for a few keys without
// allocating.
func (s rngScheme) splitInto(k Key, out []Key) {
	k0, k1 := k.data[0], k.data[1]
	n := len(out)
	if s == rngPartitionable {
		for i := range out {
			a, b := rngThreefry2x32(k0, k1, uint32(uint64(i)>>32), uint32(i))
			out[i] = Key{data: [2]uint32{a, b}}
		}
		return
	}
	var buf [8]uint32
	var words []uint32
	if 2*n > len(buf) {
		words = make([]uint32, 2*n)
	} else {
		words = buf[:2*n]
	}
	for i := range n {
		a, b := rngThreefry2x32(k0, k1, uint32(i), uint32(n+i))
		words[i], words[n+i] = a, b
	}
	for i := range out {
		out[i] = Key{data: [2]uint32{words[2*i], words[2*i+1]}}
	}
}

// Beta returns float32 values from the beta distribution with parameters a
// and b (density ∝ x^(a-1)·(1-x)^(b-1) on [0, 1]), like
// jax.random.beta(k, a, b, shape): LogGamma samples ga of a and gb of b
// (from the two keys of k.Split(2)) combined as e^ga/(e^ga + e^gb)
// without overflow. a and b (float32, or both float64: then the draws are
// float64; every element > 0) are broadcast to shape, which defaults to
// their broadcast shape. It panics if a or b is not float32 or float64,
// their dtypes differ, or they do not broadcast to shape.
func Beta(k Key, a, b *Tensor, shape ...int) *Tensor {
	checkNil("tensor.Beta", "a b", a, b)
	if shape == nil {
		shape = broadcastShapes("tensor.Beta", ",", a, b)
	}
	return k.sample("tensor.Beta", func(k Key, p []*Tensor) *Tensor {
		shape, at := rngParam("tensor.Beta", "a", p[0], shape)
		_, bt := rngParam("tensor.Beta", "b", p[1], shape)
		if at.dtype != bt.dtype {
			panic(fmt.Sprintf("tensor.Beta: a %v and b %v must have one dtype", p[0], p[1]))
		}
		if at.dtype == Float64 {
			checkPositive("tensor.Beta", "a", p[0], at.f64())
			checkPositive("tensor.Beta", "b", p[1], bt.f64())
			return rngFloat64s(rngBeta64(k, at.f64(), bt.f64()), shape)
		}
		av, bv := at.f32(), bt.f32()
		checkPositive("tensor.Beta", "a", p[0], av)
		checkPositive("tensor.Beta", "b", p[1], bv)
		return rngFloat32s(rngBeta(rngPartitionable, k, av, bv), shape)
	}, a, b)
}

func rngBeta(s rngScheme, k Key, a, b []float32) []float32 {
	ks := s.split(k, 2)
	ga := rngGamma(s, ks[0], a, true)
	gb := rngGamma(s, ks[1], b, true)
	for i := range ga {
		m := max(ga[i], gb[i])
		ea, eb := exp32(ga[i]-m), exp32(gb[i]-m)
		ga[i] = ea / (ea + eb)
	}
	return ga
}

// Dirichlet returns float32 values from the Dirichlet distribution with
// concentrations alpha [..., n] (every element > 0), like
// jax.random.dirichlet(k, alpha, shape): the result has shape
// shape + [n], and sums to 1 along its last axis; shape (the batch shape)
// defaults to alpha's shape without its last axis, and alpha's batch
// dimensions broadcast to it. It draws LogGamma(k, alpha broadcast to
// shape + [n]) and takes the softmax over the last axis, as JAX does; a
// float64 alpha draws float64 values. It panics if alpha is not float32 or
// float64, has no axis or does not broadcast.
func Dirichlet(k Key, alpha *Tensor, shape ...int) *Tensor {
	checkNil("tensor.Dirichlet", "alpha", alpha)
	if alpha.Rank() == 0 {
		panic(fmt.Sprintf("tensor.Dirichlet: alpha %v needs at least one axis (the categories)", alpha))
	}
	if shape == nil {
		shape = alpha.shape[:len(alpha.shape)-1]
	}
	n := alpha.shape[len(alpha.shape)-1]
	return k.sample("tensor.Dirichlet", func(k Key, p []*Tensor) *Tensor {
		full, at := rngParam("tensor.Dirichlet", "alpha", p[0], append(slices.Clone(shape), n))
		if at.dtype == Float64 {
			checkPositive("tensor.Dirichlet", "alpha", p[0], at.f64())
			return rngFloat64s(rngDirichlet64(k, at.f64(), n), full)
		}
		av := at.f32()
		checkPositive("tensor.Dirichlet", "alpha", p[0], av)
		return rngFloat32s(rngDirichlet(rngPartitionable, k, av, n), full)
	}, alpha)
}

func rngDirichlet(s rngScheme, k Key, alpha []float32, n int) []float32 {
	g := rngGamma(s, k, alpha, true)
	for lo := 0; lo < len(g); lo += n {
		row := g[lo : lo+n]
		m := float32(math.Inf(-1))
		for _, v := range row {
			m = max(m, v)
		}
		var sum float32
		for j, v := range row {
			row[j] = exp32(v - m)
			sum += row[j]
		}
		for j := range row {
			row[j] /= sum
		}
	}
	return g
}

// Poisson returns int32 values from the Poisson distribution with rates
// lam (float32, or float64, which JAX and gonox round to float32 first),
// like jax.random.poisson(k, lam, shape): lam is broadcast to shape, which
// defaults to lam's shape. As in JAX, every element is
// drawn by Knuth's multiplication method where lam < 10 (or NaN) and by
// Hörmann's transformed rejection (PTRS) elsewhere, both from k itself,
// in lockstep over all elements (one uniform draw of the whole shape per
// round, until every element is done); lam = 0 gives 0, and a negative or
// NaN lam gives -1. It panics if lam is not float32 or float64 or does not
// broadcast to shape.
func Poisson(k Key, lam *Tensor, shape ...int) *Tensor {
	checkNil("tensor.Poisson", "lam", lam)
	return k.sample("tensor.Poisson", func(k Key, p []*Tensor) *Tensor {
		shape, lt := rngParam("tensor.Poisson", "lam", p[0], shape)
		lv := lt.f32()
		if lt.dtype == Float64 {
			lv = make([]float32, len(lt.f64()))
			for i, v := range lt.f64() {
				lv[i] = float32(v)
			}
		}
		return rngInt32s(rngPoisson(rngPartitionable, k, lv), shape)
	}, lam)
}

func rngPoisson(s rngScheme, k Key, lam []float32) []int32 {
	n := len(lam)
	knuth := make([]float32, n)
	rej := make([]float32, n)
	useKnuth := make([]bool, n)
	for i, l := range lam {
		useKnuth[i] = l != l || l < 10
		if useKnuth[i] {
			knuth[i], rej[i] = l, 1e5
		} else {
			knuth[i], rej[i] = 0, l
		}
	}
	kn := rngPoissonKnuth(s, k, knuth)
	rj := rngPoissonRejection(s, k, rej)
	out := make([]int32, n)
	for i := range out {
		switch {
		case lam[i] == 0:
			out[i] = 0
		case useKnuth[i]:
			out[i] = kn[i]
		default:
			out[i] = rj[i]
		}
	}
	return out
}

// rngPoissonKnuth is JAX's _poisson_knuth: count the uniforms whose
// product stays above e^-lam, all elements in lockstep.
func rngPoissonKnuth(s rngScheme, key Key, lam []float32) []int32 {
	n := len(lam)
	k := make([]int32, n)
	logProd := make([]float32, n)
	active := func() bool {
		for i, l := range lam {
			if logProd[i] > -l {
				return true
			}
		}
		return false
	}
	for active() {
		ks := s.split(key, 2)
		key = ks[0]
		u := rngUniform(s, ks[1], n, 0, 1)
		for i, l := range lam {
			// An element once done stays done (the product only
			// shrinks): JAX updates it anyway, to no effect.
			if logProd[i] > -l {
				k[i]++
				logProd[i] += log32(u[i])
			}
		}
	}
	for i := range k {
		k[i]--
	}
	return k
}

// rngPoissonRejection is JAX's _poisson_rejection: Hörmann's transformed
// rejection with squeeze ("The transformed rejection method for generating
// Poisson random variables", 1993), all elements in lockstep; as in JAX an
// element accepted again in a later round takes that round's value.
func rngPoissonRejection(s rngScheme, key Key, lam []float32) []int32 {
	n := len(lam)
	type consts struct{ logLam, b, a, invAlpha, vr float32 }
	cs := make([]consts, n)
	for i, l := range lam {
		b := 0.931 + float32(2.53*float32(math.Sqrt(float64(l))))
		cs[i] = consts{
			logLam:   log32(l),
			b:        b,
			a:        -0.059 + float32(0.02483*b),
			invAlpha: 1.1239 + 1.1328/(b-3.4),
			vr:       0.9277 - 3.6224/(b-2),
		}
	}
	out := make([]float32, n)
	accepted := make([]bool, n)
	for i := range out {
		out[i] = -1
	}
	for slices.Contains(accepted, false) {
		ks := s.split(key, 3)
		key = ks[0]
		us := rngUniform(s, ks[1], n, 0, 1)
		vs := rngUniform(s, ks[2], n, 0, 1)
		for i, l := range lam {
			c := cs[i]
			u := us[i] - 0.5
			v := vs[i]
			us := 0.5 - abs32(u)
			kk := float32(math.Floor(float64(float32(float32(float32(2*c.a)/us+c.b)*u) + l + 0.43)))
			sv := log32(float32(v*c.invAlpha) / (c.a/float32(us*us) + c.b))
			t := -l + float32(kk*c.logLam) - lgamma32(kk+1)
			accept1 := us >= 0.07 && v <= c.vr
			reject := kk < 0 || (us < 0.013 && v > us)
			if accept1 || (!reject && sv <= t) {
				out[i] = kk
				accepted[i] = true
			}
		}
	}
	res := make([]int32, n)
	for i, v := range out {
		res[i] = int32(v)
	}
	return res
}

func lgamma32(x float32) float32 {
	v, _ := math.Lgamma(float64(x))
	return float32(v)
}

// ChoiceOptions configures Choice. The zero value is jax.random.choice's
// default: with replacement, uniform probabilities, along axis 0.
type ChoiceOptions struct {
	// WithoutReplacement draws distinct elements (replace=False).
	WithoutReplacement bool
	// P, if set, holds the probability of each element along the axis
	// (a float32 or float64 vector of that length; it need not be
	// normalised). A float64 P draws float64 uniform or Gumbel numbers,
	// as JAX does.
	P *Tensor
	// Axis is the axis of a to choose along.
	Axis int
}

// Choice draws elements of a at random, like jax.random.choice(k, a,
// shape, replace, p, axis), with JAX's algorithms: with replacement and
// uniform probabilities, indices from RandInt; without replacement, the
// first ones of Permutation; with probabilities p and replacement, the
// inverse of their cumulative sum at uniform points; with p and without
// replacement, the top Gumbel-perturbed log-probabilities. The result has
// a's shape with the chosen axis replaced by shape. A scalar int32 a = n
// draws from 0, 1, ..., n-1 and returns shape. It panics on an empty axis
// (unless no element is drawn), on drawing more elements than there are
// without replacement, and on a P of the wrong shape or dtype.
func Choice(k Key, a *Tensor, shape []int, opts ChoiceOptions) *Tensor {
	checkNil("tensor.Choice", "a", a)
	checkShape("tensor.Choice", shape)
	operands := []*Tensor{a}
	if opts.P != nil {
		operands = append(operands, opts.P)
	}
	return k.sample("tensor.Choice", func(k Key, p []*Tensor) *Tensor {
		a := p[0]
		if opts.P != nil {
			opts.P = p[1]
		}
		return choice(k, a, shape, opts)
	}, operands...)
}

// choice is Choice on host operands.
func choice(k Key, a *Tensor, shape []int, opts ChoiceOptions) *Tensor {
	var n, axis int
	if a.Rank() == 0 {
		if a.dtype != Int32 {
			panic(fmt.Sprintf("tensor.Choice: scalar a %v must be an int32 count", a))
		}
		n = int(a.i32()[0])
	} else {
		axis = normAxis("tensor.Choice", a, opts.Axis)
		n = a.shape[axis]
	}
	draws := numel(shape)
	gather := func(ind *Tensor) *Tensor {
		if a.Rank() == 0 {
			return ind
		}
		return Take(a, ind, axis)
	}
	if draws == 0 {
		return gather(Zeros(Int32, shape...))
	}
	if n <= 0 {
		panic(fmt.Sprintf("tensor.Choice: a %v has no elements to choose from", a))
	}
	if opts.WithoutReplacement && draws > n {
		panic(fmt.Sprintf("tensor.Choice: cannot draw %d of %d elements without replacement", draws, n))
	}
	var ind []int32
	if opts.P == nil {
		if opts.WithoutReplacement {
			ind = rngPermutation(rngPartitionable, k, n)[:draws]
		} else {
			ind = rngRandInt(rngPartitionable, k, draws, 0, n)
		}
	} else {
		p := opts.P
		if (p.dtype != Float32 && p.dtype != Float64) || !slices.Equal(p.shape, []int{n}) {
			panic(fmt.Sprintf("tensor.Choice: p %v must be float32[%d] or float64[%d], one probability per element of a along the axis", p, n, n))
		}
		if p.dtype == Float64 {
			pv := StopGradient(p).Float64s()
			if opts.WithoutReplacement {
				ind = rngChoiceGumbel64(k, pv, draws)
			} else {
				ind = rngChoiceCDF64(k, pv, draws)
			}
			return gather(FromInt32(ind, shape...))
		}
		pv := StopGradient(p).Float32s()
		if opts.WithoutReplacement {
			ind = rngChoiceGumbel(rngPartitionable, k, pv, draws)
		} else {
			ind = rngChoiceCDF(rngPartitionable, k, pv, draws)
		}
	}
	return gather(FromInt32(ind, shape...))
}

// rngChoiceCDF is choice with p and replacement: searchsorted(cumsum(p),
// cumsum(p)[-1]·(1-u)) (side left).
func rngChoiceCDF(s rngScheme, k Key, p []float32, draws int) []int32 {
	cum := make([]float32, len(p))
	var acc float32
	for i, v := range p {
		acc += v
		cum[i] = acc
	}
	u := rngUniform(s, k, draws, 0, 1)
	ind := make([]int32, draws)
	for i, v := range u {
		r := float32(acc * (1 - v))
		ind[i] = int32(sortSearch(cum, r))
	}
	return ind
}

// sortSearch returns the first index i with a[i] >= v (len(a) if none),
// jnp.searchsorted's side="left".
func sortSearch[T float32 | float64](a []T, v T) int {
	lo, hi := 0, len(a)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if a[m] < v {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo
}

// rngChoiceGumbel is choice with p and without replacement: the indices of
// the draws largest gumbel + log(p) (the Gumbel top-k trick).
func rngChoiceGumbel(s rngScheme, k Key, p []float32, draws int) []int32 {
	g := rngGumbel(s, k, len(p))
	for i, v := range p {
		g[i] += log32(v)
	}
	_, idx := TopK(FromFloat32(g), draws)
	return idx.Int32s()
}

// CategoricalOptions configures CategoricalSample. The zero value draws one
// category per distribution with replacement, as Categorical does.
type CategoricalOptions struct {
	// Shape is the shape of the result (jax.random.categorical's shape):
	// leading sample dimensions followed by the batch shape (logits'
	// shape without the category axis), to which the batch dimensions of
	// logits broadcast. nil means the batch shape.
	Shape []int
	// WithoutReplacement draws distinct categories per distribution (the
	// Gumbel top-k trick, replace=False): at most as many as there are.
	WithoutReplacement bool
}

// CategoricalSample is Categorical with jax.random.categorical's shape and
// replace arguments: it draws the categories for every element of
// opts.Shape, with replacement (argmax of logits + independent Gumbel noise
// per sample) or without (the largest logits + one Gumbel draw, for the
// leading sample dimensions in order). It panics as Categorical does, and
// if opts.Shape does not end in a shape the batch shape broadcasts to, or
// asks for more samples without replacement than there are categories.
// Float64 logits take float64 Gumbel noise, as in JAX.
func CategoricalSample(k Key, logits *Tensor, axis int, opts CategoricalOptions) *Tensor {
	checkNil("tensor.CategoricalSample", "logits", logits)
	if logits.dtype != Float32 && logits.dtype != Float64 {
		panic(fmt.Sprintf("tensor.CategoricalSample: logits %v must be float32 or float64", logits))
	}
	a := normAxis("tensor.CategoricalSample", logits, axis)
	if logits.shape[a] == 0 {
		panic(fmt.Sprintf("tensor.CategoricalSample: logits %v: axis %d has no categories", logits, axis))
	}
	batch := slices.Delete(slices.Clone(logits.shape), a, a+1)
	shape := opts.Shape
	if shape == nil {
		shape = batch
	}
	checkShape("tensor.CategoricalSample", shape)
	if len(shape) < len(batch) || !broadcastsTo(batch, shape[len(shape)-len(batch):]) {
		panic(fmt.Sprintf("tensor.CategoricalSample: logits %v (batch shape %v) do not broadcast to the sample shape %v",
			logits, batch, shape))
	}
	prefix := shape[:len(shape)-len(batch)]
	x := StopGradient(logits)
	if !opts.WithoutReplacement {
		// The categories' axis counted from the end, inserted into the
		// sample shape's batch part.
		fromEnd := len(logits.shape) - a
		gshape := slices.Insert(slices.Clone(shape), len(shape)-fromEnd+1, logits.shape[a])
		g := gumbelOf(k, logits.dtype, gshape...)
		for range prefix {
			x = ExpandDims(x, 0)
		}
		return ArgMax(Add(g, x), len(gshape)-fromEnd)
	}
	if !slices.Equal(batch, shape[len(prefix):]) {
		panic(fmt.Sprintf("tensor.CategoricalSample: without replacement the sample shape %v must end in the batch shape %v", shape, batch))
	}
	m := numel(prefix)
	if m > logits.shape[a] {
		panic(fmt.Sprintf("tensor.CategoricalSample: %d samples without replacement from %d categories", m, logits.shape[a]))
	}
	x = Add(x, gumbelOf(k, logits.dtype, logits.shape...))
	perm := make([]int, 0, len(logits.shape))
	for i := range logits.shape {
		if i != a {
			perm = append(perm, i)
		}
	}
	_, idx := TopK(Transpose(x, append(perm, a)...), m) // batch + [m]
	// Move the samples to the front: [m] + batch, then shape.
	back := []int{idx.Rank() - 1}
	for i := range idx.Rank() - 1 {
		back = append(back, i)
	}
	return Reshape(Transpose(idx, back...), shape...)
}
