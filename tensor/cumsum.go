package tensor

import "fmt"

type cumsumParams struct {
	axis      int
	reverse   bool // sum from the end of the axis
	exclusive bool // leave out the element itself
}

var cumsumOp *Op

func init() {
	cumsumOp = &Op{
		Name:     "cumsum",
		Sharding: ShardingRule{Family: ShardAlongAxis, Params: func(p any) OpParams { return OpParams{Axes: []int{p.(cumsumParams).axis}} }},
		Impl: func(in []*Tensor, pp any) *Tensor {
			x := in[0]
			p := pp.(cumsumParams)
			out := newTensor(x.dtype, x.shape)
			outer, n, inner := srtLanes(x.shape, p.axis)
			if n == 0 || inner == 0 {
				return out
			}
			// Walk the axis in summation order, carrying one running sum
			// per inner lane (float sums in float64).
			facc := make([]float64, inner)
			iacc := make([]int32, inner)
			var iacc64 []int64
			if x.dtype == Int64 {
				iacc64 = make([]int64, inner)
			}
			for o := 0; o < outer; o++ {
				clear(facc)
				clear(iacc)
				clear(iacc64)
				for t := 0; t < n; t++ {
					j := t
					if p.reverse {
						j = n - 1 - t
					}
					b := (o*n + j) * inner
					switch x.dtype {
					case Float32:
						src, dst := x.f32()[b:b+inner], out.f32()[b:b+inner]
						for i, v := range src {
							if p.exclusive {
								dst[i] = float32(facc[i])
								facc[i] += float64(v)
							} else {
								facc[i] += float64(v)
								dst[i] = float32(facc[i])
							}
						}
					case Float64:
						cumsumLane(out.f64()[b:b+inner], x.f64()[b:b+inner], facc, p.exclusive)
					case Int64:
						cumsumLane(out.i64()[b:b+inner], x.i64()[b:b+inner], iacc64, p.exclusive)
					case Int32:
						src, dst := x.i32()[b:b+inner], out.i32()[b:b+inner]
						for i, v := range src {
							if p.exclusive {
								dst[i] = iacc[i]
								iacc[i] += v
							} else {
								iacc[i] += v
								dst[i] = iacc[i]
							}
						}
					}
				}
			}
			return out
		},
		VJP: func(g *Tensor, _ []*Tensor, _ *Tensor, pp any) []*Tensor {
			// y_i = Σ_{j≤i} x_j  ⇒  dx_j = Σ_{i≥j} g_i: the same sum run the
			// other way (strict bounds stay strict for the exclusive forms).
			p := pp.(cumsumParams)
			p.reverse = !p.reverse
			return []*Tensor{Apply(cumsumOp, p, g)}
		},
		JVP: linearJVP(&cumsumOp),
		Batch: func(in []*Tensor, _ []bool, pp any) []*Tensor {
			p := pp.(cumsumParams)
			p.axis++
			return one1(Apply(cumsumOp, p, in[0]))
		},
		Traits: Traits{Types: TypesFloat64 | TypesInt64},
	}
}

func cumsum(name string, x *Tensor, axis int, reverse, exclusive bool) *Tensor {
	if !x.dtype.IsFloat() && x.dtype != Int32 && x.dtype != Int64 {
		panic(fmt.Sprintf("%s: %v: not defined for %v; convert with tensor.AsType", name, x, x.dtype))
	}
	a := normAxis(name, x, axis)
	return Apply(cumsumOp, cumsumParams{axis: a, reverse: reverse, exclusive: exclusive}, x)
}

// Cumsum returns the inclusive cumulative sum of x along axis (negative
// counts from the end), like jnp.cumsum: element i is x_0 + ... + x_i.
// It is defined for float32 (accumulated in float64, each result rounded
// once) and int32 (wrapping on overflow). Its VJP is a reverse cumsum.
func Cumsum(x *Tensor, axis int) *Tensor {
	checkNil("tensor.Cumsum", "x", x)
	return cumsum("tensor.Cumsum", x, axis, false, false)
}

// CumsumExclusive returns the exclusive cumulative sum along axis: element
// i is x_0 + ... + x_{i-1}, so element 0 is 0 and the last element of x is
// not used. For a vector of group sizes it gives each group's start
// offset, as jnp.cumsum(jnp.pad(sizes[:-1], (1, 0))) does in MoE routing.
func CumsumExclusive(x *Tensor, axis int) *Tensor {
	checkNil("tensor.CumsumExclusive", "x", x)
	return cumsum("tensor.CumsumExclusive", x, axis, false, true)
}

// CumsumReverse returns the cumulative sum from the end of the axis:
// element i is x_i + ... + x_{n-1} (jnp.cumsum(x[::-1])[::-1]).
func CumsumReverse(x *Tensor, axis int) *Tensor {
	checkNil("tensor.CumsumReverse", "x", x)
	return cumsum("tensor.CumsumReverse", x, axis, true, false)
}
