package tensor

import (
	"fmt"
	"math"
	"slices"
	"unsafe"
)

// Tensor is an n-dimensional array with a dtype, a shape and contiguous
// row-major storage.
//
// Tensors are values: no operation changes a tensor that already exists, every
// op returns a new one (which may share storage with its input when nothing
// was computed, as Reshape does). A *Tensor is safe to read from several
// goroutines at once.
//
// Besides its data a tensor may carry:
//   - an autodiff node, when it is being differentiated (see Trace);
//   - a Local mark, when it is one device's block inside shard.Map;
//   - a Layout, when it is a global array sharded over a mesh (then it has no
//     host data; ops refuse it and readers such as Float32s gather it);
//   - a batch or a tangent, when it is a value inside Vmap or forward mode
//     (see BatchTrace and JVPTrace; then it has no host data of its own);
//   - logical axis names (see WithLogicalAxes), metadata for sharding rules.
type Tensor struct {
	dtype     DType
	donated   bool  // given to Donate (see donate.go)
	cotShared bool  // see cot
	outIdx    int32 // which output of node this is
	shape     []int

	// data is the storage, of the element type of dtype (uint16 bits for
	// BFloat16 and Float16), read through f32(), i32(), b(), u16(),
	// f64(), i64() and u8(): one slot for every dtype keeps the header
	// small.
	data rawData

	node   *node   // non-nil when traced
	primal *Tensor // when traced: the same value one trace level down

	// ext holds the rarely set fields (see tensorExt), nil when none is:
	// every op result gets a header, so the header is kept small.
	ext *tensorExt

	// cot marks a cotangent whose storage the backward pass cot owns
	// outright (see ownCotangents in ad_backward.go); with cotShared it
	// owns the header only, to donate it once dead (the storage is a
	// collective's result, which other devices' headers share).
	cot *backwardPass

	// rec counts the holders of allocator-made storage (nil for storage
	// from elsewhere, which is never recycled; see donate.go).
	rec *storageRec
}

// tensorExt is the part of a Tensor header that most tensors leave unset.
// It is never changed once a header points to it (headers copied with
// *t share it): the setters below give the header a new one.
type tensorExt struct {
	local  *Local
	layout Layout
	axes   []string // logical axis names, nil if unset

	// xv, when set, makes the tensor a value of a Vmap or forward-mode
	// level (BatchTrace, JVPTrace): its data lives in xv (see ad_xlevel.go).
	// Traced twins over such a value copy it.
	xv *xval
}

// rawData is a slice of any element type: its first element (nil for
// no storage), length and capacity.
type rawData struct {
	p    unsafe.Pointer
	n, c int
}

// raw returns s as a rawData.
func raw[E any](s []E) rawData { return rawData{unsafe.Pointer(unsafe.SliceData(s)), len(s), cap(s)} }

// rawAs returns d as a []E (nil if d holds no storage).
func rawAs[E any](d rawData) []E {
	if d.p == nil {
		return nil
	}
	return unsafe.Slice((*E)(d.p), d.c)[:d.n]
}

// f32 returns the storage of a Float32 tensor (nil for another dtype or
// no storage).
func (t *Tensor) f32() []float32 {
	if t.dtype != Float32 {
		return nil
	}
	return rawAs[float32](t.data)
}

// i32 is f32 for Int32.
func (t *Tensor) i32() []int32 {
	if t.dtype != Int32 {
		return nil
	}
	return rawAs[int32](t.data)
}

// b is f32 for Bool.
func (t *Tensor) b() []bool {
	if t.dtype != Bool {
		return nil
	}
	return rawAs[bool](t.data)
}

// u16 is f32 for the bits of BFloat16 and Float16.
func (t *Tensor) u16() []uint16 {
	if t.dtype != BFloat16 && t.dtype != Float16 {
		return nil
	}
	return rawAs[uint16](t.data)
}

// f64 is f32 for Float64.
func (t *Tensor) f64() []float64 {
	if t.dtype != Float64 {
		return nil
	}
	return rawAs[float64](t.data)
}

// i64 is f32 for Int64.
func (t *Tensor) i64() []int64 {
	if t.dtype != Int64 {
		return nil
	}
	return rawAs[int64](t.data)
}

// u8 is f32 for Uint8.
func (t *Tensor) u8() []uint8 {
	if t.dtype != Uint8 {
		return nil
	}
	return rawAs[uint8](t.data)
}

// setData makes s t's storage (the caller sets the matching dtype).
func setData[E any](t *Tensor, s []E) { t.data = raw(s) }

// local returns t's shard.Map block mark, nil if it has none.
func (t *Tensor) local() *Local {
	if t.ext == nil {
		return nil
	}
	return t.ext.local
}

// layout returns t's sharding layout, nil for a host tensor.
func (t *Tensor) layout() Layout {
	if t.ext == nil {
		return nil
	}
	return t.ext.layout
}

// axes returns t's logical axis names, nil if unset.
func (t *Tensor) axes() []string {
	if t.ext == nil {
		return nil
	}
	return t.ext.axes
}

// xv returns the Vmap or forward-mode value t is, nil if it is none.
func (t *Tensor) xv() *xval {
	if t.ext == nil {
		return nil
	}
	return t.ext.xv
}

// setExt gives t the rarely set fields e, sharing no record with another
// header, and none at all when every field of e is unset.
func (t *Tensor) setExt(e tensorExt) { t.ext = e.record() }

// record returns a record holding e: the mark's own (Local.rec,
// Local.recNamed) when e holds a mark and perhaps logical axes and
// nothing else, nil when e holds nothing, a new one otherwise.
func (e tensorExt) record() *tensorExt {
	switch {
	case e.layout != nil || e.xv != nil || e.local == nil && e.axes != nil:
		c := e // on the heap in this case alone
		return &c
	case e.local != nil && e.axes != nil:
		return e.local.recNamed(e.axes)
	case e.local != nil:
		return e.local.rec()
	}
	return nil
}

// keep returns the record of e's mark (if local) and logical axes (if
// axes) and of nothing else: e itself when it holds nothing else, the
// mark's own record (Local.rec) when it holds the mark alone.
func (e *tensorExt) keep(local, axes bool) *tensorExt {
	switch {
	case e == nil:
		return nil
	case e.layout == nil && e.xv == nil && (local || e.local == nil) && (axes || e.axes == nil):
		if e.axes == nil && e.local != nil {
			return e.local.rec() // the same, in no header's allocation
		}
		return e
	}
	var k tensorExt
	if local {
		k.local = e.local
	}
	if axes {
		k.axes = e.axes
	}
	return k.record()
}

// localExt returns the record of t's mark alone (see keep).
func (t *Tensor) localExt() *tensorExt { return t.ext.keep(true, false) }

// axesExt returns the record of t's logical axes alone (see keep).
func (t *Tensor) axesExt() *tensorExt { return t.ext.keep(false, true) }

// extOrZero returns a copy of t's rarely set fields.
func (t *Tensor) extOrZero() tensorExt {
	if t.ext == nil {
		return tensorExt{}
	}
	return *t.ext
}

// setLocal sets t's shard.Map block mark.
func (t *Tensor) setLocal(l *Local) {
	if t.local() == l {
		return
	}
	e := t.extOrZero()
	e.local = l
	t.setExt(e)
}

// setAxes sets t's logical axis names.
func (t *Tensor) setAxes(a []string) {
	if t.ext == nil && a == nil {
		return
	}
	e := t.extOrZero()
	e.axes = a
	t.setExt(e)
}

// numel returns the number of elements of shape.
func numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// maxElements bounds the number of elements of a tensor, so that its
// size in bytes (at most 8 an element) is an int.
const maxElements = math.MaxInt / 8

// checkShape panics naming op if shape has a negative dimension or more
// elements than maxElements (whose count would overflow an int).
func checkShape(op string, shape []int) {
	for _, d := range shape {
		if d < 0 {
			panic(fmt.Sprintf("%s: negative dimension in shape %v", op, slices.Clone(shape))) // a copy: shape stays on its caller's stack
		}
	}
	if tooManyElements(shape) {
		panic(fmt.Sprintf("%s: shape %v has more elements than fit in memory", op, slices.Clone(shape)))
	}
}

// tooManyElements reports whether the dimensions of shape multiply to more
// than maxElements; negative dimensions (Reshape's -1) count as 1.
func tooManyElements(shape []int) bool {
	n, over := 1, false
	for _, d := range shape {
		switch {
		case d == 0:
			return false
		case d < 0:
			continue
		}
		if n > maxElements/d {
			over = true
		} else {
			n *= d
		}
	}
	return over
}

// newTensor allocates a zeroed tensor. The shape slice is copied.
func newTensor(dt DType, shape []int) *Tensor {
	return newTensorOp("tensor", dt, shape)
}

// newTensorOp is newTensor for public constructors, whose panics name op.
func newTensorOp(op string, dt DType, shape []int) *Tensor {
	t := newHeader(dt, shape)
	t.allocData(op, numel(shape), true)
	return t
}

// allocData gives t storage for n elements of its dtype from the
// allocator cache (zeroed if zero says so; fresh storage is zero) and
// records it in t's holder count; an invalid dtype panics naming op.
func (t *Tensor) allocData(op string, n int, zero bool) {
	switch t.dtype {
	case Float32:
		setData(t, f32Cache.alloc(n, zero))
	case Int32:
		setData(t, i32Cache.alloc(n, zero))
	case Bool:
		setData(t, boolCache.alloc(n, zero))
	case BFloat16, Float16:
		setData(t, u16Cache.alloc(n, zero))
	case Float64:
		setData(t, f64Cache.alloc(n, zero))
	case Int64:
		setData(t, i64Cache.alloc(n, zero))
	case Uint8:
		setData(t, u8Cache.alloc(n, zero))
	default:
		panic(fmt.Sprintf("%s: invalid dtype %v", op, t.dtype))
	}
	t.setBuffer()
}

// FromFloat32 returns a float32 tensor of the given shape holding a copy of
// data. With no shape argument the tensor is 1-D of length len(data); an
// explicit empty shape, such as the Shape of a scalar passed as
// x.Shape()..., makes a scalar, so FromFloat32(d, x.Shape()...) always
// has x's shape. It panics if the shape does not hold len(data) elements.
func FromFloat32(data []float32, shape ...int) *Tensor {
	t := hostTensor("tensor.FromFloat32", Float32, raw(append([]float32(nil), data...)), shape)
	if t.f32() == nil {
		setData(t, []float32{})
	}
	return t
}

// FromFloat64 returns a float32 tensor holding data converted to float32,
// as jnp.asarray does with JAX's default configuration (jax_enable_x64
// off): float64 data from Go code becomes float32 parameters and inputs.
// Use FromFloat64s for a Float64 tensor.
func FromFloat64(data []float64, shape ...int) *Tensor {
	f := make([]float32, len(data))
	for i, v := range data {
		f[i] = float32(v)
	}
	return hostTensor("tensor.FromFloat64", Float32, raw(f), shape)
}

// FromInt32 returns an int32 tensor of the given shape holding a copy of data.
func FromInt32(data []int32, shape ...int) *Tensor {
	d := make([]int32, len(data))
	copy(d, data)
	return hostTensor("tensor.FromInt32", Int32, raw(d), shape)
}

// FromInts returns an int32 tensor holding data converted to int32.
func FromInts(data []int, shape ...int) *Tensor {
	var d []int32
	var box *hostBox
	if len(data) <= 8 {
		// Index tensors of a few elements (group sizes, counts per
		// device): the data in the header's allocation too.
		b := &struct {
			h hostBox
			d [8]int32
		}{}
		box, d = &b.h, b.d[:len(data):len(data)]
	} else {
		box, d = new(hostBox), make([]int32, len(data))
	}
	for i, v := range data {
		if v > math.MaxInt32 || v < math.MinInt32 {
			panic(fmt.Sprintf("tensor.FromInts: value %d at index %d overflows int32", v, i))
		}
		d[i] = int32(v)
	}
	return box.tensor("tensor.FromInts", Int32, raw(d), shape)
}

// FromBool returns a bool tensor of the given shape holding a copy of data.
func FromBool(data []bool, shape ...int) *Tensor {
	d := make([]bool, len(data))
	copy(d, data)
	return hostTensor("tensor.FromBool", Bool, raw(d), shape)
}

// WrapFloat32 returns a float32 tensor that uses data as its storage, without
// copying. The caller hands data over: it must not be changed afterwards.
func WrapFloat32(data []float32, shape ...int) *Tensor {
	if data == nil {
		data = []float32{}
	}
	return hostTensor("tensor.WrapFloat32", Float32, raw(data), shape)
}

// WrapInt32 is WrapFloat32 for int32 data.
func WrapInt32(data []int32, shape ...int) *Tensor {
	if data == nil {
		data = []int32{}
	}
	return hostTensor("tensor.WrapInt32", Int32, raw(data), shape)
}

// hostTensor returns a tensor of dtype dt over d (storage from elsewhere,
// which the allocator never recycles) of the given shape, 1-D of length
// d.n for a nil shape: with rank up to 4 the shape lies in the header's
// allocation. A shape that does not hold d.n elements panics naming op.
func hostTensor(op string, dt DType, d rawData, shape []int) *Tensor {
	return new(hostBox).tensor(op, dt, d, shape)
}

// hostBox is a host tensor's header with room for its shape.
type hostBox struct {
	t    Tensor
	dims [4]int
}

// tensor makes box's header what hostTensor returns.
func (box *hostBox) tensor(op string, dt DType, d rawData, shape []int) *Tensor {
	if shape != nil { // no shape arguments (x.Shape() is never nil)
		checkShape(op, shape)
		if numel(shape) != d.n {
			panic(fmt.Sprintf("%s: %d elements do not fit shape %v (%d elements)", op, d.n, slices.Clone(shape), numel(shape)))
		}
	}
	t := &box.t
	switch {
	case shape == nil:
		box.dims[0] = d.n
		t.shape = box.dims[:1:1]
	case len(shape) <= len(box.dims):
		k := copy(box.dims[:], shape)
		t.shape = box.dims[:k:k]
	default:
		t.shape = slices.Clone(shape)
	}
	t.dtype, t.data = dt, d
	return t
}

// Scalar returns a float32 scalar (shape []).
func Scalar(v float32) *Tensor {
	return &Tensor{dtype: Float32, shape: []int{}, data: raw([]float32{v})}
}

// ScalarInt returns an int32 scalar.
func ScalarInt(v int32) *Tensor { return &Tensor{dtype: Int32, shape: []int{}, data: raw([]int32{v})} }

// ScalarBool returns a bool scalar.
func ScalarBool(v bool) *Tensor { return &Tensor{dtype: Bool, shape: []int{}, data: raw([]bool{v})} }

// Zeros returns a tensor of zeros (false for Bool).
func Zeros(dt DType, shape ...int) *Tensor {
	checkShape("tensor.Zeros", shape)
	return newTensorOp("tensor.Zeros", dt, shape)
}

// Ones returns a tensor of ones (true for Bool).
func Ones(dt DType, shape ...int) *Tensor { return full("tensor.Ones", dt, 1, shape) }

// Full returns a tensor with every element v, converted to dt (for Bool,
// v != 0). It panics if v is not representable in an Int32 tensor.
func Full(dt DType, v float64, shape ...int) *Tensor { return full("tensor.Full", dt, v, shape) }

func full(op string, dt DType, v float64, shape []int) *Tensor {
	checkShape(op, shape)
	t := newTensorOp(op, dt, shape)
	switch dt {
	case Float32:
		f := float32(v)
		d := t.f32()
		for i := range d {
			d[i] = f
		}
	case Int32:
		if v != math.Trunc(v) || v > math.MaxInt32 || v < math.MinInt32 {
			panic(fmt.Sprintf("%s: %v is not an int32", op, v))
		}
		iv := int32(v)
		d := t.i32()
		for i := range d {
			d[i] = iv
		}
	case Bool:
		d := t.b()
		for i := range d {
			d[i] = v != 0
		}
	case BFloat16, Float16:
		fillHalf(t, v)
	default:
		fillWide(op, t, v)
	}
	return t
}

// ZerosLike returns zeros with the dtype and shape of x.
// A sharded x gives a tensor sharded the same way; a block inside
// shard.Map gives a block with the same mark.
func ZerosLike(x *Tensor) *Tensor {
	checkNil("tensor.ZerosLike", "x", x)
	return fullLike("tensor.ZerosLike", x, 0)
}

// OnesLike returns ones with the dtype, shape and placement of x (see
// ZerosLike).
func OnesLike(x *Tensor) *Tensor {
	checkNil("tensor.OnesLike", "x", x)
	return fullLike("tensor.OnesLike", x, 1)
}

// FullLike returns a tensor with the dtype, shape and placement of x (see
// ZerosLike) and every element v.
func FullLike(x *Tensor, v float64) *Tensor {
	checkNil("tensor.FullLike", "x", x)
	return fullLike("tensor.FullLike", x, v)
}

func fullLike(op string, x *Tensor, v float64) *Tensor {
	if x.layout() != nil {
		return x.layout().MapBlocks(x, func(b *Tensor) *Tensor { return fullLike(op, b, v) })
	}
	t := full(op, x.dtype, v, x.shape)
	t.ext = x.localExt()
	return t
}

// Arange returns the int32 vector [0, 1, ..., n-1], like jnp.arange(n).
func Arange(n int) *Tensor { return arange("tensor.Arange", 0, n, 1) }

// ArangeStep returns the int32 vector start, start+step, ... up to but not
// including stop. It panics if step is zero or a value overflows int32.
func ArangeStep(start, stop, step int) *Tensor { return arange("tensor.ArangeStep", start, stop, step) }

func arange(op string, start, stop, step int) *Tensor {
	if step == 0 {
		panic(op + ": step is 0")
	}
	n := 0
	if step > 0 && stop > start {
		n = (stop - start + step - 1) / step
	} else if step < 0 && stop < start {
		n = (start - stop - step - 1) / -step
	}
	if n > 0 {
		last := start + (n-1)*step
		if min(start, last) < math.MinInt32 || max(start, last) > math.MaxInt32 {
			panic(fmt.Sprintf("%s: values from %d to %d overflow int32", op, start, last))
		}
	}
	d := make([]int32, n)
	for i := range d {
		d[i] = int32(start + i*step)
	}
	return &Tensor{dtype: Int32, shape: []int{n}, data: raw(d)}
}

// DType returns the element type.
func (t *Tensor) DType() DType { return t.dtype }

// Shape returns a copy of the shape. It is never nil (a scalar's shape is
// an empty slice), so that constructors given x.Shape()... reproduce x's
// shape even for a scalar.
func (t *Tensor) Shape() []int { return append([]int{}, t.shape...) }

// BorrowShape returns the shape without copying it, for callers that only
// read it (comparisons, offsets in a loop): the slice must not be changed
// or kept. Shape returns a copy.
func (t *Tensor) BorrowShape() []int { return t.shape }

// Rank returns the number of dimensions.
func (t *Tensor) Rank() int { return len(t.shape) }

// Dim returns the size of dimension i; negative i counts from the end.
func (t *Tensor) Dim(i int) int {
	return t.shape[normAxis("Tensor.Dim", t, i)]
}

// Size returns the number of elements.
func (t *Tensor) Size() int { return numel(t.shape) }

// Bytes returns the size of the tensor's data in bytes (of the global array
// for a sharded tensor).
func (t *Tensor) Bytes() int { return t.Size() * t.dtype.Size() }

// host returns t itself, or, for a sharded tensor, the gathered host copy.
// It panics, naming op, if t is a shape-only placeholder.
func (t *Tensor) host(op string) *Tensor {
	t = t.hostLevel(op)
	t.mustHaveData(op)
	if t.layout() != nil {
		return t.layout().Gather(t)
	}
	return t
}

// placeholder reports whether t is a shape-only placeholder.
func (t *Tensor) placeholder() bool {
	if t.xv() != nil {
		return false
	}
	if t.layout() != nil {
		return shapeOnly(t.layout())
	}
	return t.data.p == nil && t.Size() > 0
}

// mustHaveData panics if t is a shape-only placeholder: a value that a VJP
// receives but that its op's Save mask did not keep (or an abstract value).
func (t *Tensor) mustHaveData(op string) {
	if t.IsDonated() {
		donatedPanic(op, "", t)
	}
	if t.xv() != nil {
		t.xv().lvl.noData(op, t) // panics
	}
	if t.placeholder() {
		panic(fmt.Sprintf("%s: %v is a shape-only placeholder with no data (an op's VJP may only read the inputs and outputs its Save mask keeps)", op, t))
	}
}

// Float32s returns a copy of the elements of a float32 tensor in row-major
// order. A sharded tensor is gathered first.
func (t *Tensor) Float32s() []float32 {
	t.mustDType("Tensor.Float32s", Float32)
	return append([]float32(nil), t.host("Tensor.Float32s").f32()...)
}

// Float64s returns the elements converted to float64, for any dtype (a
// copy of the elements of a Float64 tensor; an Int64 beyond 2^53 is
// rounded, use Int64s).
func (t *Tensor) Float64s() []float64 {
	t.mustNotBeNil("Tensor.Float64s")
	h := t.host("Tensor.Float64s")
	if h.dtype == Float64 {
		return append([]float64(nil), h.f64()...)
	}
	out := make([]float64, h.Size())
	for i := range out {
		out[i] = h.at(i)
	}
	return out
}

// Int32s returns a copy of the elements of an int32 tensor.
func (t *Tensor) Int32s() []int32 {
	t.mustDType("Tensor.Int32s", Int32)
	return append([]int32(nil), t.host("Tensor.Int32s").i32()...)
}

// Ints returns the elements of an int32 tensor as ints.
func (t *Tensor) Ints() []int {
	t.mustDType("Tensor.Ints", Int32)
	h := t.host("Tensor.Ints")
	out := make([]int, len(h.i32()))
	for i, v := range h.i32() {
		out[i] = int(v)
	}
	return out
}

// Bools returns a copy of the elements of a bool tensor.
func (t *Tensor) Bools() []bool {
	t.mustDType("Tensor.Bools", Bool)
	return append([]bool(nil), t.host("Tensor.Bools").b()...)
}

// mustRaw checks what every Raw accessor needs — the dtype, a host
// tensor with data — and pins the storage, which the caller is about to
// share.
func (t *Tensor) mustRaw(op string, d DType) {
	t.mustDType(op, d)
	t.mustHost(op)
	t.mustHaveData(op)
	t.pin()
}

// RawFloat32 returns the storage of a float32 host tensor without copying.
// The slice is read-only: changing it changes every tensor that shares it.
// It is meant for kernels and I/O inside this module and for callers who
// measure allocations; everyone else should use Float32s.
func (t *Tensor) RawFloat32() []float32 {
	t.mustRaw("Tensor.RawFloat32", Float32)
	return t.f32()
}

// RawInt32 is RawFloat32 for int32 tensors.
func (t *Tensor) RawInt32() []int32 {
	t.mustRaw("Tensor.RawInt32", Int32)
	return t.i32()
}

// RawBool is RawFloat32 for bool tensors.
func (t *Tensor) RawBool() []bool {
	t.mustRaw("Tensor.RawBool", Bool)
	return t.b()
}

// Item returns the single element of a tensor with one element, as float64.
func (t *Tensor) Item() float64 {
	t.mustNotBeNil("Tensor.Item")
	if t.Size() != 1 {
		panic(fmt.Sprintf("Tensor.Item: %v has %d elements, want 1", t, t.Size()))
	}
	return t.host("Tensor.Item").at(0)
}

// At returns the element at the given index, as float64 whatever the dtype.
// It panics if the index has the wrong length or is out of range.
func (t *Tensor) At(index ...int) float64 {
	t.mustNotBeNil("Tensor.At")
	if len(index) != len(t.shape) {
		panic(fmt.Sprintf("Tensor.At: %v indexed with %d indices", t, len(index)))
	}
	off := 0
	for i, ix := range index {
		if ix < 0 || ix >= t.shape[i] {
			panic(fmt.Sprintf("Tensor.At: index %v out of range for %v", index, t))
		}
		off = off*t.shape[i] + ix
	}
	return t.host("Tensor.At").at(off)
}

// at returns element i (flat) as float64.
func (t *Tensor) at(i int) float64 {
	switch t.dtype {
	case Float32:
		return float64(t.f32()[i])
	case Int32:
		return float64(t.i32()[i])
	case Bool:
		if t.b()[i] {
			return 1
		}
		return 0
	case BFloat16, Float16:
		return float64(halfAt(t, i))
	case Float64:
		return t.f64()[i]
	case Int64:
		return float64(t.i64()[i])
	case Uint8:
		return float64(t.u8()[i])
	}
	panic("tensor: invalid tensor")
}

// Layout returns the sharding layout of a global sharded tensor, or nil for
// a host tensor.
func (t *Tensor) Layout() Layout { return t.layout() }

// Local returns the shard.Map block mark, or nil outside shard.Map.
func (t *Tensor) Local() *Local { return t.local() }

// LogicalAxes returns the logical axis names set by WithLogicalAxes, or nil.
func (t *Tensor) LogicalAxes() []string { return append([]string(nil), t.axes()...) }

// BorrowLogicalAxes is LogicalAxes without the copy, for callers that only
// read the names (or pass them to WithLogicalAxes, which copies them): the
// slice must not be changed.
func (t *Tensor) BorrowLogicalAxes() []string { return t.axes() }

// WithLogicalAxes returns x annotated with logical axis names, one per
// dimension ("" for a dimension with no name), as Flax's with_partitioning
// does. The names are metadata for sharding rules: ops do not propagate them,
// but pytree maps and optimizer state keep them. x shares storage with the
// result.
func WithLogicalAxes(x *Tensor, names ...string) *Tensor {
	checkNil("tensor.WithLogicalAxes", "x", x)
	if len(names) != 0 && len(names) != len(x.shape) {
		panic(fmt.Sprintf("tensor.WithLogicalAxes: %d names %q for %v", len(names), slices.Clone(names), x))
	}
	e := x.extOrZero()
	e.axes = nil
	if len(names) != 0 {
		if e.local != nil && e.layout == nil && e.xv == nil {
			// The mark's record with these names, copied only if new.
			c := x.shallow()
			if c.ext = e.local.findNamed(names); c.ext == nil {
				c.ext = e.local.recNamed(slices.Clone(names))
			}
			return c
		}
		e.axes = append([]string(nil), names...)
	}
	return x.shallowExt(e)
}

// shallow returns a copy of the Tensor header, sharing data and marks.
func (t *Tensor) shallow() *Tensor {
	c := new(Tensor)
	t.shallowInto(c)
	return c
}

// shallowExt is shallow with the rarely set fields e in place of t's: a
// mark's own record when e holds a mark and perhaps names (see record),
// otherwise the header and its record in one allocation (WithLocal and
// WithLogicalAxes would otherwise make two).
func (t *Tensor) shallowExt(e tensorExt) *Tensor {
	if e.layout == nil && e.xv == nil && (e.axes == nil || e.local != nil) {
		c := t.shallow()
		c.ext = e.record() // the mark's own, or none
		return c
	}
	box := &struct {
		t Tensor
		e tensorExt
	}{e: e}
	t.shallowInto(&box.t)
	box.t.ext = &box.e
	return &box.t
}

// shallowInto makes c what shallow returns.
func (t *Tensor) shallowInto(c *Tensor) {
	*c = *t
	c.cot, c.cotShared = nil, false // a second header over the storage: neither owns it alone
	if t.node != nil {
		// A traced header is valid exactly as long as its primal (see
		// twin): it holds nothing, or nothing would drop that hold.
		return
	}
	c.hold()
	if bh, ok := t.layout().(BlockHolder); ok {
		bh.HoldBlocks() // one more header over a placed tensor's blocks
	} else if bd, ok := t.layout().(BlockDonator); ok {
		bd.ShareBlocks() // the same for a placed tensor's blocks
	}
}

// twin returns a copy of the header for a traced value over t: it shares
// t's storage without holding it, and is valid as long as t is (its
// primal).
func (t *Tensor) twin() *Tensor {
	c := new(Tensor)
	t.twinInto(c)
	return c
}

// twinInto makes c, a zero header, what twin returns. It stores t's
// fields one by one, skipping nil pointers and the cotangent's (a twin
// starts without): a struct copy stored every pointer word, each a write
// barrier while the collector marks. TestTwinIntoCopiesEveryField keeps
// the list complete.
func (t *Tensor) twinInto(c *Tensor) {
	c.dtype, c.donated, c.outIdx = t.dtype, t.donated, t.outIdx
	c.data.n, c.data.c = t.data.n, t.data.c
	if t.shape != nil {
		c.shape = t.shape
	}
	if t.data.p != nil {
		c.data.p = t.data.p
	}
	if t.node != nil {
		c.node = t.node
	}
	if t.primal != nil {
		c.primal = t.primal
	}
	if t.ext != nil {
		c.ext = t.ext
	}
	if t.rec != nil {
		c.rec = t.rec
	}
}

func (t *Tensor) mustDType(op string, dt DType) {
	t.mustNotBeNil(op)
	if t.dtype != dt {
		panic(fmt.Sprintf("%s: %v is %v, want %v", op, t, t.dtype, dt))
	}
}

// mustNotBeNil panics, naming op (a read-out method), if t is nil: a
// method call on a nil *Tensor would otherwise die in a nil dereference.
func (t *Tensor) mustNotBeNil(op string) {
	if t == nil {
		panic(op + ": the tensor is nil")
	}
}

func (t *Tensor) mustHost(op string) {
	if t.layout() != nil {
		panic(fmt.Sprintf("%s: %v is sharded over a mesh; gather it first (shard.Gather)", op, t))
	}
}

// IsTraced reports whether t is being differentiated (carries an autodiff node).
func (t *Tensor) IsTraced() bool { return t.node != nil }
