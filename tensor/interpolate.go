package tensor

import (
	"fmt"
	"math"
	"slices"
)

// InterpMode says how Interpolate computes a result element from the
// input: PyTorch's F.interpolate modes.
type InterpMode uint8

const (
	// InterpNearest copies the input element at ⌊i·scale⌋ (PyTorch's
	// legacy "nearest", OpenCV's INTER_NEAREST), with scale = in/out, or
	// 1/ScaleFactor when a scale factor is given, in float32 as PyTorch
	// computes it.
	InterpNearest InterpMode = iota
	// InterpNearestExact copies the element at ⌊(i+½)·scale⌋ (PyTorch's
	// "nearest-exact", Pillow's and scikit-image's nearest).
	InterpNearestExact
	// InterpLinear interpolates linearly along each spatial dimension
	// between the two nearest input elements: PyTorch's "linear",
	// "bilinear" and "trilinear" for one, two and three spatial
	// dimensions. Without AlignCorners result element i sits at input
	// position (i+½)·scale - ½ (clamped at 0); with it, at
	// i·(in-1)/(out-1), the corner elements of input and result aligned.
	InterpLinear
	// InterpCubic interpolates by cubic convolution (Keys' kernel with
	// a = -0.75) over the four nearest input elements along each spatial
	// dimension, the positions as InterpLinear's without the clamp at 0
	// and the elements past the edges replaced by the edge ones: PyTorch's
	// "bicubic" (here for any number of spatial dimensions).
	InterpCubic
	// InterpArea averages the input over adaptive windows: result element
	// i along a dimension is the mean of input elements ⌊i·in/out⌋ to
	// ⌈(i+1)·in/out⌉ - 1, PyTorch's "area" (AdaptivePool with
	// WindowMean).
	InterpArea
)

// String returns PyTorch's name of the mode ("linear" for InterpLinear,
// "bicubic" for InterpCubic).
func (m InterpMode) String() string {
	switch m {
	case InterpNearest:
		return "nearest"
	case InterpNearestExact:
		return "nearest-exact"
	case InterpLinear:
		return "linear"
	case InterpCubic:
		return "bicubic"
	case InterpArea:
		return "area"
	}
	return fmt.Sprintf("InterpMode(%d)", uint8(m))
}

// InterpSpec configures Interpolate: PyTorch's F.interpolate arguments
// other than the input. Exactly one of Size and ScaleFactor is given,
// with one value per spatial dimension or one for all.
type InterpSpec struct {
	Mode InterpMode
	// Size is the result's spatial size.
	Size []int
	// ScaleFactor multiplies the input's spatial size: the result has
	// ⌊in·ScaleFactor⌋ elements along a dimension, and unless
	// RecomputeScale the interpolation uses 1/ScaleFactor as its scale
	// (PyTorch's default recompute_scale_factor=None), not in/out.
	ScaleFactor []float64
	// RecomputeScale interpolates with scale in/out even when the size
	// comes from ScaleFactor (recompute_scale_factor=True).
	RecomputeScale bool
	// AlignCorners aligns the corner elements of the input and the result
	// (align_corners=True); InterpLinear and InterpCubic only.
	AlignCorners bool
}

// Interpolate resamples the spatial dimensions of x [N, C, spatial...]
// (channels first, the layout of Conv; one or more spatial dimensions)
// to the size spec gives, by nearest neighbours, linear or cubic
// interpolation or window means: PyTorch's F.interpolate (and
// nn.Upsample) in modes "nearest", "nearest-exact", "linear", "bilinear",
// "trilinear", "bicubic" and "area", with the same indices and weights. x is float32, float64 or half. A result of x's own
// size is x (PyTorch copies it). The gradient adds each result element's
// cotangent into the input elements it was computed from, with their
// weights.
func Interpolate(x *Tensor, spec InterpSpec) *Tensor {
	checkNil("tensor.Interpolate", "x", x)
	if !x.dtype.IsFloat() {
		panic(fmt.Sprintf("tensor.Interpolate: %v: not defined for %v", x, x.dtype))
	}
	if spec.Mode == InterpArea {
		size, _ := interpSizes("tensor.Interpolate", x, spec)
		if slices.Equal(size, x.shape[2:]) {
			return x
		}
		return AdaptivePool(x, WindowMean, size...)
	}
	p := interpParams("tensor.Interpolate", x, spec)
	if p == nil {
		return x
	}
	return resample(x, p)
}

// interpParams returns the maps of Interpolate for x, or nil when they are all identities.
func interpParams(fn string, x *Tensor, spec InterpSpec) *resampleParams {
	shape := x.shape
	size, scale := interpSizes(fn, x, spec)
	nd := len(shape) - 2
	axes := identityMaps(shape)
	for d := range nd {
		n, m := shape[d+2], size[d]
		var s float64
		if scale != nil {
			s = scale[d]
		}
		switch spec.Mode {
		case InterpNearest, InterpNearestExact:
			axes[d+2] = nearestMap(n, m, s, spec.Mode == InterpNearestExact)
		case InterpLinear:
			axes[d+2] = linearMap(n, m, s, spec.AlignCorners)
		case InterpCubic:
			axes[d+2] = cubicMap(n, m, s, spec.AlignCorners)
		}
	}
	if isIdentity(axes) {
		return nil
	}
	return &resampleParams{axes: axes}
}

// interpSizes checks spec for x and returns the result's spatial sizes
// and the scales of the interpolation (1/ScaleFactor; nil: in/out).
func interpSizes(fn string, x *Tensor, spec InterpSpec) (size []int, scale []float64) {
	shape := x.shape
	what := func() string {
		return fmt.Sprintf("%s: %v by %+v", fn, x, spec)
	}
	if len(shape) < 3 {
		panic(fmt.Sprintf("%s: want [N, C, spatial...] with one or more spatial dimensions", what()))
	}
	if spec.Mode > InterpArea {
		panic(fmt.Sprintf("%s: unknown mode", what()))
	}
	if spec.AlignCorners && spec.Mode != InterpLinear && spec.Mode != InterpCubic {
		panic(fmt.Sprintf("%s: AlignCorners is for linear and cubic interpolation", what()))
	}
	nd := len(shape) - 2
	switch {
	case spec.Size != nil && spec.ScaleFactor != nil:
		panic(fmt.Sprintf("%s: give Size or ScaleFactor, not both", what()))
	case spec.Size != nil:
		if len(spec.Size) != 1 && len(spec.Size) != nd {
			panic(fmt.Sprintf("%s: want 1 or %d sizes", what(), nd))
		}
		size = make([]int, nd)
		for d := range size {
			size[d] = spec.Size[min(d, len(spec.Size)-1)]
			if size[d] < 1 {
				panic(fmt.Sprintf("%s: sizes must be positive", what()))
			}
		}
	case spec.ScaleFactor != nil:
		if len(spec.ScaleFactor) != 1 && len(spec.ScaleFactor) != nd {
			panic(fmt.Sprintf("%s: want 1 or %d scale factors", what(), nd))
		}
		size, scale = make([]int, nd), make([]float64, nd)
		for d := range size {
			f := spec.ScaleFactor[min(d, len(spec.ScaleFactor)-1)]
			n := math.Floor(float64(shape[d+2]) * f)
			if !(f > 0) || math.IsInf(f, 0) || n < 1 || n > math.MaxInt32 {
				panic(fmt.Sprintf("%s: scale factor %v gives no valid size along spatial dimension %d", what(), f, d))
			}
			size[d] = int(n)
			if !spec.RecomputeScale {
				scale[d] = 1 / f
			}
		}
	default:
		panic(fmt.Sprintf("%s: give Size or ScaleFactor", what()))
	}
	for d := range nd {
		if shape[d+2] == 0 {
			panic(fmt.Sprintf("%s: spatial dimension %d is empty", what(), d))
		}
	}
	return size, scale
}

// nearestMap returns the map of nearest-neighbour interpolation from n to
// m elements with scale s (0: n/m), as PyTorch's nearest_idx and
// nearest_exact_idx compute it, in float32.
func nearestMap(n, m int, s float64, exact bool) axisMap {
	if !exact && m == n {
		return axisMap{n: n, m: m}
	}
	a := axisMap{n: n, m: m, k: 1, idx: make([]int, m)}
	scale := float32(n) / float32(m)
	if s > 0 {
		scale = float32(s)
	}
	for i := range a.idx {
		var j int
		switch {
		case exact:
			// (i + 0.5) is a double in PyTorch; floorf rounds the
			// product to float.
			j = int(math.Floor(float64(float32((float64(i) + 0.5) * float64(scale)))))
		case m == 2*n:
			j = i >> 1
		default:
			j = int(math.Floor(float64(float32(i) * scale)))
		}
		a.idx[i] = min(j, n-1)
	}
	return a
}

// sourceScale returns the step between the input positions of
// consecutive result elements when n elements become m, as PyTorch's
// area_pixel_compute_scale: (n-1)/(m-1) with the corners aligned (0 for
// one result element), else the given scale s if positive, else n/m.
func sourceScale(n, m int, s float64, alignCorners bool) float64 {
	switch {
	case alignCorners && m > 1:
		return float64(n-1) / float64(m-1)
	case alignCorners:
		return 0
	case s > 0:
		return s
	default:
		return float64(n) / float64(m)
	}
}

// linearMap returns the map of linear interpolation from n to m elements
// with scale s (0: n/m), as PyTorch's compute_source_index_and_lambda
// computes it: two taps, the second one position on (or the first again
// at the last element).
func linearMap(n, m int, s float64, alignCorners bool) axisMap {
	if m == n {
		return axisMap{n: n, m: m}
	}
	a := axisMap{n: n, m: m, k: 2, idx: make([]int, 2*m), w: make([]float64, 2*m)}
	scale := sourceScale(n, m, s, alignCorners)
	for i := range m {
		var pos float64
		if alignCorners {
			pos = scale * float64(i)
		} else {
			pos = max(scale*(float64(i)+0.5)-0.5, 0)
		}
		j := int(pos)
		next := j
		if j < n-1 {
			next = j + 1
		}
		l1 := pos - float64(j)
		a.idx[2*i], a.idx[2*i+1] = j, next
		a.w[2*i], a.w[2*i+1] = 1-l1, l1
	}
	return a
}

// cubicMap returns the map of cubic interpolation from n to m elements
// with scale s (0: n/m), as PyTorch 1.13's HelperInterpCubic computes it:
// four taps at ⌊pos⌋-1 to ⌊pos⌋+2, clamped to the input, weighted by the
// cubic convolution coefficients of pos - ⌊pos⌋.
func cubicMap(n, m int, s float64, alignCorners bool) axisMap {
	// Unlike linear interpolation, PyTorch's cubic does not copy a
	// dimension whose size is kept when a scale factor other than 1 is
	// given: it interpolates with that scale.
	if m == n && (alignCorners || s == 0 || s == 1) {
		return axisMap{n: n, m: m}
	}
	a := axisMap{n: n, m: m, k: 4, idx: make([]int, 4*m), w: make([]float64, 4*m)}
	scale := sourceScale(n, m, s, alignCorners)
	const A = -0.75
	conv1 := func(x float64) float64 { return ((A+2)*x-(A+3))*x*x + 1 }
	conv2 := func(x float64) float64 { return ((A*x-5*A)*x+8*A)*x - 4*A }
	for i := range m {
		pos := scale * float64(i)
		if !alignCorners {
			pos = scale*(float64(i)+0.5) - 0.5
		}
		j := math.Floor(pos)
		t := pos - j
		w := [4]float64{conv2(t + 1), conv1(t), conv1(1 - t), conv2(1 - t + 1)}
		for k := range 4 {
			a.idx[4*i+k] = min(max(int(j)-1+k, 0), n-1)
			a.w[4*i+k] = w[k]
		}
	}
	return a
}
