package tensor

import (
	"fmt"

	"github.com/gonox/gonox/tensor/internal/vec"
)

// Activation selects the activation function of BiasAct.
type Activation uint8

// The activations BiasAct fuses.
const (
	ActIdentity  Activation = iota // x + b
	ActRelu                        // Relu(x + b)
	ActGelu                        // Gelu(x + b) (tanh approximation)
	ActGeluExact                   // GeluExact(x + b)
	ActSilu                        // Silu(x + b)
	ActTanh                        // Tanh(x + b)
	ActSigmoid                     // Sigmoid(x + b)
	numActivations
)

var actNames = [...]string{"identity", "relu", "gelu", "gelu_exact", "silu", "tanh", "sigmoid"}

// String returns the activation's name ("gelu").
func (a Activation) String() string {
	if a < numActivations {
		return actNames[a]
	}
	return fmt.Sprintf("Activation(%d)", uint8(a))
}

// fromInput reports whether the derivative of the activation is computed
// from its input z = x + b (else from its output).
func (a Activation) fromInput() bool {
	return a == ActGelu || a == ActGeluExact || a == ActSilu
}

// kernel returns the forward vec kernel (nil for identity).
func (a Activation) kernel() (func(d, s []float32), int) {
	switch a {
	case ActRelu:
		return vec.Relu, costCheap
	case ActGelu:
		return vec.Gelu, costMath
	case ActGeluExact:
		return vec.GeluExact, costSlow
	case ActSilu:
		return vec.Silu, costMath
	case ActTanh:
		return vec.Tanh, costMath
	case ActSigmoid:
		return vec.Sigmoid, costMath
	}
	return nil, costCheap
}

// gradKernel returns the derivative's vec kernel of an activation whose
// derivative needs its input (GELU, exact GELU, SiLU).
func (a Activation) gradKernel() func(d, s []float32) {
	switch a {
	case ActGelu:
		return vec.GeluGrad
	case ActGeluExact:
		return vec.GeluExactGrad
	}
	return vec.SiluGrad
}

// bwd returns the fused backward primitive of the activation alone:
// g·f'(z) from (g, z) or g·f'(y) from (g, y).
func (a Activation) bwd() *Op {
	switch a {
	case ActRelu:
		return reluBwdOp
	case ActGelu:
		return geluBwdOp
	case ActGeluExact:
		return geluExactBwdOp
	case ActSilu:
		return siluBwdOp
	case ActTanh:
		return tanhBwdOp
	case ActSigmoid:
		return sigmoidBwdOp
	}
	return nil
}

var biasActOp, biasActBwdOp *Op

func init() {
	biasActOp = &Op{
		Name:     "bias_act",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, p any) *Tensor {
			x, b := in[0], in[1]
			out := newOutUninit(Float32, x.shape)
			// b is [N], or a batch of biases [B..., 1..., N] with x's
			// leading dimensions (the batching rule's).
			addBiasAct(out.f32(), x.f32(), b.f32(), b.shape[len(b.shape)-1], p.(Activation), isLocal(x, b))
			return out
		},
		VJPNeed: func(g *Tensor, in []*Tensor, out *Tensor, p any, need uint64) []*Tensor {
			act := p.(Activation)
			x, b := in[0], in[1]
			var gz *Tensor
			switch {
			case act == ActIdentity:
				gz = g
			case act.fromInput():
				gz = Apply(biasActBwdOp, act, g, x, b)
			default:
				gz = Apply(act.bwd(), nil, g, out)
			}
			res := []*Tensor{nil, nil}
			if Wants(need, 0) {
				res[0] = gz
			}
			if Wants(need, 1) {
				res[1] = biasGrad(gz, b)
			}
			return res
		},
		SaveFor: func(p any) SaveMask {
			switch act := p.(Activation); {
			case act == ActIdentity:
				return 0
			case act.fromInput():
				return SaveAllInputs
			}
			return SaveOutput
		},
		// dy = f'(z)·(dx + db), computed as the VJP computes g·f'(z).
		JVP: func(x, t, outs []*Tensor, p any) []*Tensor {
			act := p.(Activation)
			dz := toShapeOf(addTangents(t[0], t[1]), x[0])
			switch {
			case act == ActIdentity:
				return one1(dz)
			case act.fromInput():
				return one1(Apply(biasActBwdOp, act, dz, x[0], x[1]))
			}
			return one1(Apply(act.bwd(), nil, dz, outs[0]))
		},
		// A batch of x with one bias is one fused call, and so is a batch
		// of x with a batch of biases (an ensemble's layers) when the
		// activation's derivative does not need its input (bias_act_bwd
		// takes one bias); otherwise the composition act(x + b), whose
		// bits BiasAct's are.
		Batch: biasActBatch,
		// The VJP passes g through or consumes it once in a bwd op,
		// which may write over it (ad_backward.go).
		Traits: Traits{Reuse: FreshVJP | TakesCotangent},
	}
}

// biasActBatch is bias_act's batching rule (dense's calls it too).
func biasActBatch(in []*Tensor, batched []bool, p any) []*Tensor {
	act := p.(Activation)
	if !batched[1] {
		return one1(BiasAct(in[0], in[1], act))
	}
	x := alignBatch(in, batched, maxExampleRank(in, batched))
	if batched[0] && !act.fromInput() && x[0].dtype == Float32 && leadingBias(x[0].shape, x[1].shape) {
		rc := new(ruleCall)
		rc.args[0], rc.args[1] = x[0], x[1]
		return rc.call(biasActOp, act, 2)
	}
	z := Add(x[0], x[1])
	y := act.apply(z)
	donateTemp(z, y)
	return one1(y)
}

func init() {
	// bias_act_bwd computes g·f'(x + b) in one sweep, for the activations
	// whose derivative needs their input. Its VJP is built from ops.
	biasActBwdOp = &Op{
		Name:     "bias_act_bwd",
		Sharding: ShardingRule{Family: ShardElementwise},
		Impl: func(in []*Tensor, p any) *Tensor {
			g, x, b := in[0], in[1], in[2]
			out := takeDonated(g) // the rows below allow out == g
			if out == nil {
				out = newOutUninit(Float32, x.shape)
			}
			grad := p.(Activation).gradKernel()
			n := len(b.f32())
			rows := func(lo, hi int) {
				var buf [stageLen]float32
				for r := lo; r < hi; r++ {
					for c := 0; c < n; c += stageLen {
						e := min(c+stageLen, n)
						t := buf[:e-c]
						vec.AddVV(t, x.f32()[r*n+c:r*n+e], b.f32()[c:e])
						grad(t, t)
						vec.MulVV(out.f32()[r*n+c:r*n+e], t, g.f32()[r*n+c:r*n+e])
					}
				}
			}
			m := len(x.f32()) / max(n, 1)
			if n == 0 || serial(len(x.f32())*costMath, isLocal(g, x, b)) {
				rows(0, m)
			} else {
				parallelFor(m, n*costMath, 1, false, rows)
			}
			return out
		},
		VJP: func(c *Tensor, in []*Tensor, _ *Tensor, p any) []*Tensor {
			act := p.(Activation)
			g, x, b := in[0], in[1], in[2]
			z := Add(x, b)
			var f2 *Tensor
			switch act {
			case ActGelu:
				f2 = geluTanhGrad2(z)
			case ActGeluExact:
				f2 = geluExactGrad2(z)
			default:
				f2 = siluGrad2(z)
			}
			gz := Mul(Mul(c, g), f2)
			return []*Tensor{Apply(act.bwd(), nil, c, z), gz, unbroadcast(gz, b.shape)}
		},
		Save: SaveAllInputs,
		// out = g·f'(z), z = x + b: d out = dg·f'(z) + g·f''(z)·dz.
		JVP: func(x, t, _ []*Tensor, p any) []*Tensor {
			act := p.(Activation)
			g, z := x[0], Add(x[1], x[2])
			var d *Tensor
			if t[0] != nil {
				d = Apply(act.bwd(), nil, t[0], z)
			}
			if dz := addTangents(t[1], t[2]); dz != nil {
				d = addTangents(d, Mul(Mul(g, act.grad2(z)), dz))
			}
			return one1(toShapeOf(d, g))
		},
		// One fused call for one bias; for a batch of biases, the bwd op
		// of the activation on z = x + b (the same bits).
		Batch: func(in []*Tensor, batched []bool, p any) []*Tensor {
			act := p.(Activation)
			n := batchSize(in, batched)
			g, x := materialize(in[0], batched[0], n), materialize(in[1], batched[1], n)
			if !batched[2] {
				return one1(Apply(biasActBwdOp, act, g, x, in[2]))
			}
			b := alignBatch(in[2:], batched[2:], len(x.shape)-1)[0]
			z := Add(x, b)
			y := Apply(act.bwd(), nil, g, z)
			donateTemp(z, y)
			return one1(y)
		},
	}
}

// biasGrad returns the cotangent of BiasAct's bias b from gz, that of
// x + b: gz summed over its leading axes (unbroadcast). For a first-order
// float32 [N] bias and a plain host gz, the sum runs here (sumColsF32, the
// bits of Sum's) instead of through a Sum op: one dispatch fewer per
// layer in a training step's backward pass.
func biasGrad(gz, b *Tensor) *Tensor {
	if g := batchBiasGrad(gz, b); g != nil {
		return g
	}
	if len(b.shape) != 1 || len(gz.shape) < 2 || gz.dtype != Float32 || b.dtype != Float32 ||
		higherOrder(gz, b) || gz.xv() != nil || gz.layout() != nil || b.layout() != nil || gz.local() != nil || b.local() != nil {
		return unbroadcast(gz, b.shape)
	}
	n := b.shape[0]
	out := newOutUninit(Float32, b.shape)
	sumColsF32(out.f32(), gz.f32(), len(gz.f32())/max(n, 1), n, false)
	return out
}

// batchBiasGrad is biasGrad under Vmap: for gz a value inside Vmap whose
// batch is plain float32 data ([B, M..., N]), the batch of bias cotangents
// ([B, N]) summed as Sum's batching rule sums it (the middle axes, the same
// bits), without the reduction's op, params and rule. Otherwise nil.
func batchBiasGrad(gz, b *Tensor) *Tensor {
	if gz.node != nil || gz.xv() == nil || len(b.shape) != 1 || len(gz.shape) < 2 || b.dtype != Float32 || b.layout() != nil || higherOrder(gz, b) {
		return nil
	}
	bt, ok := gz.xv().lvl.(*BatchTrace)
	v := gz.xv().val
	if !ok || !plainF32(v) || v.xv() != nil || v.local() != nil {
		return nil
	}
	n, nb := b.shape[0], v.shape[0]
	out := newOutUninit(Float32, []int{nb, n})
	sumMiddleF32(out.f32(), v.f32(), nb, len(v.f32())/max(nb*n, 1), n, false)
	return bt.wrapFresh(out)
}

// leadingBias reports whether a bias of shape b, of x's rank, is one
// vector per block of rows of x: b is x's leading dimensions, then ones,
// then x's last dimension.
func leadingBias(x, b []int) bool {
	r := len(x)
	if len(b) != r || r == 0 || b[r-1] != x[r-1] {
		return false
	}
	j := 0
	for j < r-1 && b[j] == x[j] {
		j++
	}
	for ; j < r-1; j++ {
		if b[j] != 1 {
			return false
		}
	}
	return true
}

// donateTemp donates tmp, a temporary a batching rule computed on its way
// to its result res, so that the next step reuses its storage as the
// fused op would need none: unless tmp is res itself, or traced (a
// gradient of the vmapped function needs it).
func donateTemp(tmp, res *Tensor) {
	if tmp != res && !tmp.IsTraced() {
		Donate(tmp)
	}
}

// apply returns the activation of z, as the unfused ops compute it.
func (a Activation) apply(z *Tensor) *Tensor {
	switch a {
	case ActRelu:
		return Relu(z)
	case ActGelu:
		return Gelu(z)
	case ActGeluExact:
		return GeluExact(z)
	case ActSilu:
		return Silu(z)
	case ActTanh:
		return Tanh(z)
	case ActSigmoid:
		return Sigmoid(z)
	}
	return z
}

// grad2 returns the second derivative of an activation whose derivative
// needs its input (GELU, exact GELU, SiLU) at z, built from ops.
func (a Activation) grad2(z *Tensor) *Tensor {
	switch a {
	case ActGelu:
		return geluTanhGrad2(z)
	case ActGeluExact:
		return geluExactGrad2(z)
	}
	return siluGrad2(z)
}

// addBiasAct writes act(x + b) into dst for rows of n elements: b holds
// one bias of n elements, or several, each added to its block of
// consecutive rows (a batch of biases, one per block).
func addBiasAct(dst, x, b []float32, n int, act Activation, local bool) {
	if n == 0 || len(b) == 0 {
		return
	}
	kernel, cost := act.kernel()
	m := len(x) / n
	if serial(len(x)*(cost+1), local) {
		addBiasActRows(dst, x, b, n, act, kernel, 0, m) // no closure to allocate
		return
	}
	parallelFor(m, n*(cost+1), 1, false, func(lo, hi int) { addBiasActRows(dst, x, b, n, act, kernel, lo, hi) })
}

// addBiasActRows is addBiasAct on rows [lo, hi), kernel the activation's
// (nil for none). ReLU and no activation take each bias's block of rows
// in one call where the kernel set has one (vec.AddBiasRows, the same
// bits).
func addBiasActRows(dst, x, b []float32, n int, act Activation, kernel func(d, s []float32), lo, hi int) {
	per := len(x) / n / (len(b) / n) // rows per bias
	if act == ActRelu || act == ActIdentity {
		for lo < hi {
			v := lo / per
			e := min(hi, (v+1)*per)
			if !vec.AddBiasRows(dst[lo*n:e*n], x[lo*n:e*n], b[v*n:(v+1)*n], act == ActRelu) {
				break // no such kernel: nothing done, the loop below
			}
			lo = e
		}
	}
	for r := lo; r < hi; r++ {
		d := dst[r*n : (r+1)*n]
		v := r / per
		vec.AddVV(d, x[r*n:(r+1)*n], b[v*n:(v+1)*n])
		if kernel != nil {
			kernel(d, d)
		}
	}
}

// BiasAct returns act(x + b) for x of shape [..., N] and a bias b of shape
// [N], as one fused primitive: one sweep forward, and a backward pass that
// keeps only what the activation's derivative needs (the output for relu,
// tanh and sigmoid; x and b, which the caller usually keeps anyway, for
// the GELUs and SiLU; nothing for identity) and computes the gradient of
// the pre-activation in one sweep. Results and gradients are bit for bit
// those of the composition, e.g. Gelu(Add(x, b)).
func BiasAct(x, b *Tensor, act Activation) *Tensor {
	checkNil("tensor.BiasAct", "x b", x, b)
	const name = "tensor.BiasAct"
	if !sameFloat(x, b) {
		panic(floatMismatch(name+": "+operands("", x, b), "operands must be float32", x, b))
	}
	if act >= numActivations {
		panic(fmt.Sprintf("%s: %s: unknown activation %v", name, operands("", x, b), act))
	}
	if len(x.shape) == 0 || len(b.shape) != 1 || b.shape[0] != x.shape[len(x.shape)-1] {
		panic(fmt.Sprintf("%s: %s: the bias must be a vector as long as the last dimension of x", name, operands("", x, b)))
	}
	if x.dtype == Float64 { // composed: the fused kernels are float32
		return act.apply(Add(x, b))
	}
	return Apply(biasActOp, act, x, b)
}
