package tensor

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/gonox/gonox/tensor/internal/gemm"
	"github.com/gonox/gonox/tensor/internal/vec"
	"github.com/gonox/gonox/tensor/internal/vec/f64"
)

// Float64, Int64 and Uint8: the dtypes beyond the 32- and 16-bit ones.
//
// A Float64 tensor stores float64 (Tensor.f64()) and is a compute type of
// its own, as in JAX with jax_enable_x64: an op that takes it computes and
// accumulates in float64 (elementwise kernels of package
// tensor/internal/vec/f64, matmul through gemm.Dgemm) and returns float64
// results; its VJP gives float64 cotangents. Int64 (Tensor.i64()) is an
// integer type like Int32 for large index spaces; Uint8 (Tensor.u8()) is a
// storage type for bytes (images), moved, compared and converted, and
// computed on after AsType.
//
// Which ops take which of these dtypes is declared with each op
// (Traits.Types); Apply panics, naming the op and its operands in type
// notation, when an op meets a dtype it does not declare, so no op ever
// reads float64 data as float32. Float32 scalars (Scalar(0.5)) meet a
// float64 operand as weak types, as Python scalars do in JAX: they are
// converted to float64 first.

// TypeSet says which of the dtypes Float64, Int64 and Uint8 an op
// computes on (Traits.Types).
type TypeSet uint8

const (
	// TypesFloat64: the op takes Float64 operands (its results are
	// float64 where they would be float32).
	TypesFloat64 TypeSet = 1 << iota
	// TypesInt64: the op takes Int64 operands where it takes Int32 ones.
	TypesInt64
	// TypesUint8: the op takes Uint8 operands (ops that move or compare
	// data whatever its dtype).
	TypesUint8
	// TypesAll takes every dtype: ops that move data (reshape, slice,
	// concatenate, gather) or convert it.
	TypesAll = TypesFloat64 | TypesInt64 | TypesUint8
)

// Has reports whether every dtype of q is in s.
func (s TypeSet) Has(q TypeSet) bool { return s&q == q }

// typeBit returns the TypeSet bit of dt (0 for the dtypes every op takes).
func typeBit(dt DType) TypeSet {
	switch dt {
	case Float64:
		return TypesFloat64
	case Int64:
		return TypesInt64
	case Uint8:
		return TypesUint8
	}
	return 0
}

// checkTypes panics unless op declares every Float64, Int64 or Uint8
// dtype among its host operands.
func checkTypes(op *Op, in []*Tensor) {
	for _, x := range in {
		if b := typeBit(x.dtype); b != 0 && !op.Traits.Types.Has(b) && !op.distributed() {
			panic(fmt.Sprintf("tensor: op %q is not defined for %v operands (%s); convert them with tensor.Convert or tensor.AsType", op.Name, x.dtype, typeList(in)))
		}
	}
}

// typeList returns the types of ts in type notation, comma-separated.
func typeList(ts []*Tensor) string {
	s := make([]string, len(ts))
	for i, t := range ts {
		s[i] = t.String()
	}
	return strings.Join(s, ", ")
}

// fillWide sets every element of the Float64, Int64 or Uint8 tensor t to
// v, panicking, naming op, if v is not representable in an integer dtype.
func fillWide(op string, t *Tensor, v float64) {
	switch t.dtype {
	case Float64:
		d := t.f64()
		for i := range d {
			d[i] = v
		}
	case Int64:
		if v != math.Trunc(v) || v >= -math.MinInt64 || v < math.MinInt64 {
			panic(fmt.Sprintf("%s: %v is not an int64", op, v))
		}
		iv := int64(v)
		d := t.i64()
		for i := range d {
			d[i] = iv
		}
	case Uint8:
		if v != math.Trunc(v) || v < 0 || v > math.MaxUint8 {
			panic(fmt.Sprintf("%s: %v is not a uint8", op, v))
		}
		d := t.u8()
		for i := range d {
			d[i] = uint8(v)
		}
	}
}

// FromFloat64s returns a Float64 tensor of the given shape holding a copy
// of data (the shape arguments as for FromFloat32), as jnp.asarray does
// with jax_enable_x64 on. FromFloat64 converts to float32 instead.
func FromFloat64s(data []float64, shape ...int) *Tensor {
	return hostTensor("tensor.FromFloat64s", Float64, raw(append([]float64{}, data...)), shape)
}

// FromInt64 returns an Int64 tensor of the given shape holding a copy of
// data.
func FromInt64(data []int64, shape ...int) *Tensor {
	return hostTensor("tensor.FromInt64", Int64, raw(append([]int64{}, data...)), shape)
}

// FromUint8 returns a Uint8 tensor of the given shape holding a copy of
// data (pixels, say).
func FromUint8(data []uint8, shape ...int) *Tensor {
	return hostTensor("tensor.FromUint8", Uint8, raw(append([]uint8{}, data...)), shape)
}

// WrapFloat64 is WrapFloat32 for float64 data: a Float64 tensor over data,
// without copying. The caller must not change data afterwards.
func WrapFloat64(data []float64, shape ...int) *Tensor {
	if data == nil {
		data = []float64{}
	}
	return hostTensor("tensor.WrapFloat64", Float64, raw(data), shape)
}

// WrapInt64 is WrapFloat32 for int64 data.
func WrapInt64(data []int64, shape ...int) *Tensor {
	if data == nil {
		data = []int64{}
	}
	return hostTensor("tensor.WrapInt64", Int64, raw(data), shape)
}

// WrapUint8 is WrapFloat32 for uint8 data.
func WrapUint8(data []uint8, shape ...int) *Tensor {
	if data == nil {
		data = []uint8{}
	}
	return hostTensor("tensor.WrapUint8", Uint8, raw(data), shape)
}

// ScalarFloat64 returns a Float64 scalar (shape []).
func ScalarFloat64(v float64) *Tensor {
	return &Tensor{dtype: Float64, shape: []int{}, data: raw([]float64{v})}
}

// ScalarInt64 returns an Int64 scalar.
func ScalarInt64(v int64) *Tensor {
	return &Tensor{dtype: Int64, shape: []int{}, data: raw([]int64{v})}
}

// Int64s returns a copy of the elements of an Int64 tensor (Ints for
// Int32). A sharded tensor is gathered first.
func (t *Tensor) Int64s() []int64 {
	t.mustDType("Tensor.Int64s", Int64)
	return append([]int64(nil), t.host("Tensor.Int64s").i64()...)
}

// Uint8s returns a copy of the elements of a Uint8 tensor.
func (t *Tensor) Uint8s() []uint8 {
	t.mustDType("Tensor.Uint8s", Uint8)
	return append([]uint8(nil), t.host("Tensor.Uint8s").u8()...)
}

// RawFloat64 returns the storage of a Float64 host tensor without copying
// (read-only, see RawFloat32).
func (t *Tensor) RawFloat64() []float64 {
	t.mustRaw("Tensor.RawFloat64", Float64)
	return t.f64()
}

// RawInt64 is RawFloat32 for Int64 tensors.
func (t *Tensor) RawInt64() []int64 {
	t.mustRaw("Tensor.RawInt64", Int64)
	return t.i64()
}

// RawUint8 is RawFloat32 for Uint8 tensors.
func (t *Tensor) RawUint8() []uint8 {
	t.mustRaw("Tensor.RawUint8", Uint8)
	return t.u8()
}

// number is an element type that converts to and from the others with Go
// conversions.
type number interface {
	float32 | float64 | int32 | int64 | uint8
}

// castSlice sets dst[i] to src[i] converted with Go's conversion.
func castSlice[D, S number](dst []D, src []S) {
	src = src[:len(dst)]
	for i, v := range src {
		dst[i] = D(v)
	}
}

// boolsTo sets dst[i] to 1 where src[i] is true, else 0.
func boolsTo[D number](dst []D, src []bool) {
	src = src[:len(dst)]
	for i, v := range src {
		if v {
			dst[i] = 1
		} else {
			dst[i] = 0
		}
	}
}

// toFloat writes the host tensor x (any dtype but the half ones)
// converted to D into dst.
func toFloat[D vec.Float](dst []D, x *Tensor) {
	switch x.dtype {
	case Float32:
		castSlice(dst, x.f32())
	case Float64:
		castSlice(dst, x.f64())
	case Int32:
		vec.FloatFromInt(dst, x.i32())
	case Int64:
		vec.FloatFromInt(dst, x.i64())
	case Uint8:
		vec.FloatFromInt(dst, x.u8())
	case Bool:
		boolsTo(dst, x.b())
	}
}

// toInt writes the host tensor x (any dtype but the half ones) converted
// to D into dst: floats truncated and saturated, integers wrapped.
func toInt[D vec.Integer](dst []D, x *Tensor) {
	switch x.dtype {
	case Float32:
		vec.IntFromFloat(dst, x.f32())
	case Float64:
		vec.IntFromFloat(dst, x.f64())
	case Int32:
		vec.IntFromInt(dst, x.i32())
	case Int64:
		vec.IntFromInt(dst, x.i64())
	case Uint8:
		vec.IntFromInt(dst, x.u8())
	case Bool:
		boolsTo(dst, x.b())
	}
}

// asTypeImpl converts the host tensor x (not a half dtype) to dt (not a
// half dtype).
func asTypeImpl(x *Tensor, dt DType) *Tensor {
	out := newOutUninit(dt, x.shape)
	switch dt {
	case Float32:
		toFloat(out.f32(), x)
	case Float64:
		toFloat(out.f64(), x)
	case Int32:
		toInt(out.i32(), x)
	case Int64:
		toInt(out.i64(), x)
	case Uint8:
		toInt(out.u8(), x)
	case Bool:
		switch x.dtype {
		case Int64:
			d := out.b()
			for i, v := range x.i64() {
				d[i] = v != 0
			}
		default:
			d := out.b()
			for i := range d {
				d[i] = x.at(i) != 0
			}
		}
	}
	return out
}

// convertFloat converts the host float tensor x to the float dtype dt
// (different from x's): the Impl of Convert.
func convertFloat(x *Tensor, dt DType) *Tensor {
	switch {
	case x.dtype == Float64 && dt == Float32:
		out := newOutUninit(Float32, x.shape)
		vec.F32FromF64(out.f32(), x.f64())
		return out
	case x.dtype == Float32 && dt == Float64:
		out := newOutUninit(Float64, x.shape)
		vec.F64FromF32(out.f64(), x.f32())
		return out
	case x.dtype == Float64: // to a half dtype, through float32
		return narrow(convertFloat(x, Float32), dt)
	case dt == Float64: // from a half dtype: both widenings are exact
		return convertFloat(widen(x), Float64)
	case x.dtype == Float32:
		return narrow(x, dt)
	case dt == Float32:
		return widen(x)
	}
	return narrow(widen(x), dt) // bf16 <-> f16: float32 holds both exactly
}

// maxFloat is maxF32 for any float type: NaN if either is NaN.
func maxFloat[T float32 | float64](x, y T) T {
	if x != x || x > y {
		return x
	}
	return y
}

// minFloat is minF32 for any float type.
func minFloat[T float32 | float64](x, y T) T {
	if x != x || x < y {
		return x
	}
	return y
}

// floorDivInt is Python's // on integers (y != 0).
func floorDivInt[T int32 | int64](x, y T) T {
	q := x / y
	if (x%y != 0) && ((x < 0) != (y < 0)) {
		q--
	}
	return q
}

// mapT runs an elementwise kernel over s into d, split over goroutines
// when large (mapF32 for any element type).
func mapT[T any](kernel func(d, s []T), d, s []T, cost int, local bool) {
	if serial(len(s)*cost, local) {
		kernel(d, s)
		return
	}
	parallelFor(len(s), cost, 8, local, func(lo, hi int) { kernel(d[lo:hi], s[lo:hi]) })
}

// map2T is map2F32 for any element type.
func map2T[T any](kernel func(d, a, b []T), d, a, b []T, cost int, local bool) {
	if serial(len(d)*cost, local) {
		kernel(d, a, b)
		return
	}
	parallelFor(len(d), cost, 8, local, func(lo, hi int) { kernel(d[lo:hi], a[lo:hi], b[lo:hi]) })
}

// withFloat64 gives the unary op its float64 kernel k: its Impl computes a
// Float64 operand with k (split when large, as the float32 kernel) and
// any other as before. It returns op.
func withFloat64(op *Op, cost int, k func(d, s []float64)) *Op {
	impl := op.Impl
	op.Impl = func(in []*Tensor, p any) *Tensor {
		x := in[0]
		if x.dtype != Float64 {
			return impl(in, p)
		}
		out := newOutUninit(Float64, x.shape)
		mapT(k, out.f64(), x.f64(), cost, x.local() != nil)
		return out
	}
	op.Traits.Types |= TypesFloat64
	return op
}

// withInt64 gives the unary op its int64 function f.
func withInt64(op *Op, f func(int64) int64) *Op {
	impl := op.Impl
	op.Impl = func(in []*Tensor, p any) *Tensor {
		x := in[0]
		if x.dtype != Int64 {
			return impl(in, p)
		}
		out := newOutUninit(Int64, x.shape)
		d := out.i64()
		for i, v := range x.i64() {
			d[i] = f(v)
		}
		return out
	}
	op.Traits.Types |= TypesInt64
	return op
}

// withFloat64Bwd gives the fused backward op (bwdOp) its float64 kernel
// k(dst, g, x).
func withFloat64Bwd(op *Op, cost int, k func(d, g, x []float64)) *Op {
	impl := op.Impl
	op.Impl = func(in []*Tensor, p any) *Tensor {
		g, x := in[0], in[1]
		if g.dtype != Float64 {
			return impl(in, p)
		}
		out := newOutUninit(Float64, g.shape)
		map2T(k, out.f64(), g.f64(), x.f64(), cost, isLocal(g, x))
		return out
	}
	op.Traits.Types |= TypesFloat64
	return op
}

// each64 returns a float64 kernel applying f to every element.
func each64(f func(float64) float64) func(d, s []float64) {
	return func(d, s []float64) {
		d = d[:len(s)]
		for i, v := range s {
			d[i] = f(v)
		}
	}
}

// gradTimes64 is gradTimes for float64: dst = g·grad(x).
func gradTimes64(grad func(d, s []float64)) func(d, g, x []float64) {
	return func(d, g, x []float64) {
		var buf [stageLen]float64
		for lo := 0; lo < len(d); lo += stageLen {
			hi := min(lo+stageLen, len(d))
			t := buf[:hi-lo]
			grad(t, x[lo:hi])
			f64.MulVV(d[lo:hi], t, g[lo:hi])
		}
	}
}

// sign64 is jnp.sign for float64: ±1, and 0, -0 or NaN as they are.
func sign64(x float64) float64 {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return x
}

// signInt is jnp.sign for integers.
func signInt[T int32 | int64](x T) T {
	switch {
	case x > 0:
		return 1
	case x < 0:
		return -1
	}
	return 0
}

// absInt is |x| for integers (wrapping at the minimum, as Go's -x).
func absInt[T int32 | int64](x T) T {
	if x < 0 {
		return -x
	}
	return x
}

// constLike returns the scalar c in x's float dtype: exact for Float64,
// rounded to float32 (a weak scalar) for the others. VJPs use it for
// their constants so that float64 gradients keep every digit.
func constLike(x *Tensor, c float64) *Tensor {
	if x.dtype == Float64 {
		return ScalarFloat64(c)
	}
	return Scalar(float32(c))
}

// mulConst returns x·c with c as constLike gives it.
func mulConst(x *Tensor, c float64) *Tensor { return Mul(x, constLike(x, c)) }

// sumWide adds the elements of src (of shape) into out (of the reduced
// shape keep, with the reduced axes of size 1), accumulating in T: the
// float64 and int64 sums.
func sumWide[T float64 | int64](out, src []T, shape, keep []int) {
	reduceLoop(shape, keep, func(xi, o, n, do int) {
		s := src[xi : xi+n]
		if do == 0 {
			var acc T
			for _, v := range s {
				acc += v
			}
			out[o] += acc
			return
		}
		d := out[o : o+n]
		for j, v := range s {
			d[j] += v
		}
	})
}

// chooseWide computes the max (isMax) or min of src over the reduced
// axes into out, starting from init; a NaN wins, as in the float32
// kernel.
func chooseWide[T float64 | int64](out, src []T, shape, keep []int, isMax bool, init T) {
	for i := range out {
		out[i] = init
	}
	reduceLoop(shape, keep, func(xi, o, n, do int) {
		for j := 0; j < n; j++ {
			v, w := src[xi+j], &out[o+j*do]
			if v != v || (isMax && v > *w) || (!isMax && v < *w) {
				*w = v
			}
		}
	})
}

// matmulF64 is matmulF32 for float64 operands: one gemm.Dgemm per
// product of the batch, each on every core for a single product.
func matmulF64(a, b *Tensor, p *matmulParams) *Tensor {
	out := newOutUninit(Float64, p.outShape) // beta = 0: Dgemm writes all of C
	threads := 0
	if a.local() != nil || b.local() != nil {
		threads = 1
	}
	lda, ldb := p.leading()
	sizeA, sizeB, sizeC := p.m*p.k, p.k*p.n, p.m*p.n
	if nb := numel(p.batch); nb == 1 || p.stacked(a, b) {
		gemm.Dgemm(p.ta, p.tb, nb*p.m, p.n, p.k, 1, a.f64(), lda, b.f64(), ldb, 0, out.f64(), p.n, threads)
		return out
	}
	if 2*p.m*p.n*p.k < batchSplitFlops {
		matmulSmallBatchF64(a, b, out, p)
		return out
	}
	sa := broadcastStrides(a.shape[:len(a.shape)-2], p.batch)
	sb := broadcastStrides(b.shape[:len(b.shape)-2], p.batch)
	broadcastLoop(p.batch, sa, sb, func(o, ia, ib, n, da, db int) {
		for j := 0; j < n; j++ {
			oa, ob, oc := (ia+j*da)*sizeA, (ib+j*db)*sizeB, (o+j)*sizeC
			gemm.Dgemm(p.ta, p.tb, p.m, p.n, p.k, 1, a.f64()[oa:oa+sizeA], lda, b.f64()[ob:ob+sizeB], ldb,
				0, out.f64()[oc:oc+sizeC], p.n, threads)
		}
	})
	return out
}

// cumsumLane advances the running sums acc of one step of a cumulative
// sum over src into dst (inclusive, or exclusive: dst gets the sums
// before src).
func cumsumLane[T float64 | int64](dst, src, acc []T, exclusive bool) {
	for i, v := range src {
		if exclusive {
			dst[i] = acc[i]
			acc[i] += v
		} else {
			acc[i] += v
			dst[i] = acc[i]
		}
	}
}

// lanes64 calls fn on each lane of the axis of shape: the elements
// base, base+stride, ..., base+(n-1)·stride of the flat storage.
func lanes64(shape []int, axis int, local *Local, fn func(base, stride, n int)) {
	outer, n, inner := srtLanes(shape, axis)
	lanes := outer * inner
	if n == 0 || lanes == 0 {
		return
	}
	srtParallel(lanes, lanes*n*8, local, func(lo, hi int) {
		for l := lo; l < hi; l++ {
			fn((l/inner)*n*inner+l%inner, inner, n)
		}
	})
}

// softmax64 is softmaxImpl for float64: exp(x - max) / Σ exp(x - max)
// along axis, or its log, each lane in float64.
func softmax64(x *Tensor, axis int, log bool) *Tensor {
	out := newOutUninit(Float64, x.shape)
	src, dst := x.f64(), out.f64()
	lanes64(x.shape, axis, x.local(), func(b, st, n int) {
		m := math.Inf(-1)
		for j := 0; j < n; j++ {
			if v := src[b+j*st]; v > m || v != v {
				m = v
			}
		}
		if math.IsInf(m, -1) {
			m = 0 // a lane of -Inf: exp gives 0s, the sum 0, as JAX
		}
		s := 0.0
		for j := 0; j < n; j++ {
			s += math.Exp(src[b+j*st] - m)
		}
		ls := math.Log(s)
		for j := 0; j < n; j++ {
			i := b + j*st
			if log {
				dst[i] = src[i] - m - ls
			} else {
				dst[i] = math.Exp(src[i]-m) / s
			}
		}
	})
	return out
}

// softmaxGrad64 is softmaxGradImpl for float64 with the lane function
// f(g, y at lane index j, s) where s is sum(g, y) over the lane.
func softmaxGrad64(g, y *Tensor, axis int, sum func(g, y float64) float64, f func(g, y, s float64) float64) *Tensor {
	out := newOutUninit(Float64, g.shape)
	gs, ys, dst := g.f64(), y.f64(), out.f64()
	lanes64(g.shape, axis, srtLocal(g, y), func(b, st, n int) {
		s := 0.0
		for j := 0; j < n; j++ {
			s += sum(gs[b+j*st], ys[b+j*st])
		}
		for j := 0; j < n; j++ {
			i := b + j*st
			dst[i] = f(gs[i], ys[i], s)
		}
	})
	return out
}

// srtKeyF64 maps v to a uint64 whose unsigned order is the sort order of
// srtKeyF32: -0 equal to +0, every NaN above +Inf.
func srtKeyF64(v float64) uint64 {
	b := math.Float64bits(v)
	if e := b &^ (1 << 63); e == 0 || e > 0x7ff0000000000000 {
		if e == 0 {
			return 1 << 63
		}
		return math.MaxUint64
	}
	return b ^ (uint64(int64(b)>>63) | 1<<63)
}

// srtWideKeys writes the sort keys of a lane of a Float64, Int64 or
// Uint8 tensor: the rank of each element's 64-bit key among the lane's
// distinct keys (equal elements get equal keys, as the stable sorts
// need), inverted by inv.
func srtWideKeys(x *Tensor, base, stride int, keys []uint32, inv uint32) {
	if x.dtype == Uint8 {
		xs := x.u8()
		for j := range keys {
			keys[j] = uint32(xs[base+j*stride]) ^ inv
		}
		return
	}
	k64 := make([]uint64, len(keys))
	if x.dtype == Float64 {
		xs := x.f64()
		for j := range k64 {
			k64[j] = srtKeyF64(xs[base+j*stride])
		}
	} else {
		xs := x.i64()
		for j := range k64 {
			k64[j] = uint64(xs[base+j*stride]) ^ 1<<63
		}
	}
	uniq := slices.Clone(k64)
	slices.Sort(uniq)
	uniq = slices.Compact(uniq)
	for j, k := range k64 {
		r, _ := slices.BinarySearch(uniq, k)
		keys[j] = uint32(r) ^ inv
	}
}

// BorrowFloat64 is BorrowFloat32 for float64 tensors.
func (t *Tensor) BorrowFloat64() []float64 {
	t.mustDType("Tensor.BorrowFloat64", Float64)
	t.mustHost("Tensor.BorrowFloat64")
	t.mustHaveData("Tensor.BorrowFloat64")
	return t.f64()
}

// BorrowInt64 is BorrowFloat32 for int64 tensors.
func (t *Tensor) BorrowInt64() []int64 {
	t.mustDType("Tensor.BorrowInt64", Int64)
	t.mustHost("Tensor.BorrowInt64")
	t.mustHaveData("Tensor.BorrowInt64")
	return t.i64()
}

// attention64 is DotProductAttention in float64, composed from ops as
// jax.nn.dot_product_attention's reference path is: softmax(q·kᵀ·scale)
// over the visible keys, times v. Scale is float32 in the public
// signature (the default 1/√H is computed in float64 here).
func attention64(q, k, v, mask *Tensor, scale float64, causal bool) *Tensor {
	B, T, N, H := q.shape[0], q.shape[1], q.shape[2], q.shape[3]
	S := k.shape[1]
	if scale == float64(float32(1/math.Sqrt(float64(max(H, 1))))) {
		scale = 1 / math.Sqrt(float64(max(H, 1)))
	}
	qt := Transpose(q, 0, 2, 1, 3)                  // [B,N,T,H]
	kt := Transpose(k, 0, 2, 3, 1)                  // [B,N,H,S]
	s := Mul(MatMul(qt, kt), ScalarFloat64(scale))  // [B,N,T,S]
	visible := OnesLike(AsType(ZerosLike(s), Bool)) // all true
	if mask != nil {
		visible = LogicalAnd(visible, attentionMask("tensor.DotProductAttention", mask, B, N, T, S))
	}
	if causal {
		tri := LessEqual(Reshape(Arange(S), 1, S), Reshape(Arange(T), T, 1)) // key s <= query t
		visible = LogicalAnd(visible, Reshape(tri, 1, 1, T, S))
	}
	s = Where(visible, s, ScalarFloat64(math.Inf(-1)))
	o := MatMul(Softmax(s, -1), Transpose(v, 0, 2, 1, 3)) // [B,N,T,V]
	return Transpose(o, 0, 2, 1, 3)
}

// raggedDot64 is RaggedDot in float64, composed: one MatMul per group of
// rows (groupSizes is host data), zeros past the groups.
func raggedDot64(x, w, groupSizes *Tensor) *Tensor {
	m, n := x.shape[0], w.shape[2]
	var parts []*Tensor
	at := 0
	for i, g := range groupSizes.i32() {
		if g == 0 {
			continue
		}
		rows := SliceAxis(x, 0, at, at+int(g))
		parts = append(parts, MatMul(rows, Squeeze(SliceAxis(w, 0, i, i+1), 0)))
		at += int(g)
	}
	if at < m {
		parts = append(parts, Zeros(Float64, m-at, n))
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return Concat(0, parts...)
}

// adam64 is AdamUpdate in float64, composed from ops (the coefficients
// are AdamCoeffs' float32 values).
func adam64(g, mu, nu, p *Tensor, c AdamCoeffs) (u, mu2, nu2 *Tensor) {
	k := func(v float32) *Tensor { return ScalarFloat64(float64(v)) }
	mu2 = Add(Mul(k(c.B1), mu), Mul(k(c.G1), g))
	nu2 = Add(Mul(k(c.B2), nu), Mul(k(c.G2), Square(g)))
	num := Mul(k(c.A), mu2)
	if c.B != 0 {
		num = Add(num, Mul(k(c.B), g))
	}
	d := Add(Sqrt(Add(Mul(k(c.C2), nu2), k(c.EpsRoot))), k(c.Eps))
	u = Div(num, d)
	if c.WD != 0 {
		u = Add(u, Mul(k(c.WD), p))
	}
	return Mul(k(c.Post), u), mu2, nu2
}

// sgd64 is SGDStep in float64, composed from ops.
func sgd64(p, g, t *Tensor, mu, s float64, nesterov bool) (p2, t2 *Tensor) {
	if t == nil {
		return Add(p, Mul(ScalarFloat64(s), g)), nil
	}
	t2 = Add(g, Mul(ScalarFloat64(mu), t))
	step := t2
	if nesterov {
		step = Add(g, Mul(ScalarFloat64(mu), t2))
	}
	return Add(p, Mul(ScalarFloat64(s), step)), t2
}
