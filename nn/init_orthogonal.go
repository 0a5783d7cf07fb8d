package nn

import (
	"fmt"
	"slices"

	"gonum.org/v1/gonum/mat"

	"github.com/gonox/gonox/tensor"
)

// Orthogonal returns an initializer of (semi-)orthogonal weights,
// multiplied by scale, as jax.nn.initializers.orthogonal(scale,
// column_axis=-1): the weight, seen as a matrix whose columns run along
// the last axis and whose rows are every other axis flattened, has
// orthonormal columns (when there are at least as many rows as columns)
// or orthonormal rows (otherwise). It draws a standard normal matrix with
// key in JAX's shape (the larger dimension first), takes its QR
// decomposition (in float64, with gonum) and fixes the signs of Q's
// columns by those of R's diagonal, as JAX does, so that the result is
// uniform over orthogonal matrices and, from the same normal draws, JAX's
// up to rounding. It panics on a scale that is negative or not finite; the
// initializer panics on a shape with fewer than two dimensions.
func Orthogonal(scale float64) Initializer {
	return OrthogonalAxis(scale, -1)
}

// OrthogonalAxis is Orthogonal with the columns along columnAxis
// (negative counts from the end), JAX's column_axis.
func OrthogonalAxis(scale float64, columnAxis int) Initializer {
	checkScale("nn.Orthogonal", "scale", scale)
	return func(k tensor.Key, shape ...int) *tensor.Tensor {
		r := len(shape)
		if r < 2 {
			panic(fmt.Sprintf("nn.Orthogonal: shape %v: an orthogonal initializer needs at least 2 dimensions", shape))
		}
		ax := columnAxis
		if ax < 0 {
			ax += r
		}
		if ax < 0 || ax >= r {
			panic(fmt.Sprintf("nn.Orthogonal: shape %v: column axis %d out of range", shape, columnAxis))
		}
		cols := shape[ax]
		rows := 1
		for i, d := range shape {
			if i != ax {
				rows *= d
			}
		}
		if rows*cols == 0 {
			return tensor.Zeros(tensor.Float32, shape...)
		}
		q := orthogonalMatrix(k, rows, cols) // [rows, cols]
		// The rows are the other axes in order, the columns last: move
		// the last axis to the column axis.
		moved := append(slices.Delete(slices.Clone(shape), ax, ax+1), cols)
		w := tensor.Reshape(tensor.FromFloat64(q, rows, cols), moved...)
		perm := make([]int, 0, r)
		for i := range r - 1 {
			if i == ax {
				perm = append(perm, r-1)
			}
			perm = append(perm, i)
		}
		if ax == r-1 {
			perm = append(perm, r-1)
		}
		return tensor.MulScalar(tensor.Transpose(w, perm...), float32(scale))
	}
}

// orthogonalMatrix returns, row-major, a rows×cols matrix with orthonormal
// columns (rows >= cols) or rows: JAX's Q of the QR decomposition of a
// normal matrix of shape (max, min), with signs fixed by R's diagonal,
// transposed when rows < cols.
func orthogonalMatrix(k tensor.Key, rows, cols int) []float64 {
	m, n := rows, cols
	if rows < cols {
		m, n = cols, rows
	}
	a := mat.NewDense(m, n, tensor.Normal(k, m, n).Float64s())
	var qr mat.QR
	qr.Factorize(a)
	var q, r mat.Dense
	qr.QTo(&q)
	qr.RTo(&r)
	out := make([]float64, rows*cols)
	for i := range m {
		for j := range n {
			v := q.At(i, j)
			if d := r.At(j, j); d < 0 {
				v = -v
			} else if d == 0 {
				v = 0 // JAX's sign(0) = 0
			}
			if rows >= cols {
				out[i*cols+j] = v
			} else {
				out[j*cols+i] = v
			}
		}
	}
	return out
}

// DeltaOrthogonal returns the initializer of convolution kernels
// jax.nn.initializers.delta_orthogonal(scale) makes (Xiao et al., "Dynamical
// isometry and a mean field theory of CNNs", 2018): zero everywhere but at
// the spatial centre, where it holds Orthogonal(scale) of shape [in, out].
// As in JAX the kernel is laid out spatial dimensions first, [k..., in,
// out] with 1 to 3 spatial dimensions, and in <= out. It panics on a scale
// that is negative or not finite; the initializer panics on other shapes.
func DeltaOrthogonal(scale float64) Initializer {
	checkScale("nn.DeltaOrthogonal", "scale", scale)
	ortho := Orthogonal(scale)
	return func(k tensor.Key, shape ...int) *tensor.Tensor {
		r := len(shape)
		if r < 3 || r > 5 {
			panic(fmt.Sprintf("nn.DeltaOrthogonal: shape %v: want a kernel [k..., in, out] with 1 to 3 spatial dimensions", shape))
		}
		in, out := shape[r-2], shape[r-1]
		if in > out {
			panic(fmt.Sprintf("nn.DeltaOrthogonal: shape %v: in %d must be at most out %d", shape, in, out))
		}
		w := ortho(k, in, out).Float32s()
		data := make([]float32, tensorSize(shape))
		// The centre (k-1)/2 of every spatial dimension.
		off := 0
		for _, d := range shape[:r-2] {
			off = off*d + (d-1)/2
		}
		copy(data[off*in*out:], w)
		return tensor.FromFloat32(data, shape...)
	}
}

func tensorSize(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}
