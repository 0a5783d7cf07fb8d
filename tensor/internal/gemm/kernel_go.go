package gemm

import "unsafe"

// The portable kernels: 4×4 register-blocked scalar Go. They are used under
// the noasm build tag, on architectures without assembly kernels, and on
// amd64 machines without AVX2/FMA.

const goMR, goNR = 4, 4

var (
	goSet   = newGoSet[float32]()
	goSet64 = newGoSet[float64]()
)

func newGoSet[T elem]() *kernelSet[T] {
	return &kernelSet[T]{
		name: "go", mr: goMR, nr: goNR, nrHalf: goNR,
		kc: 256, nc: 512, directMaxM: 64,
		kern: [2][2][]kernFn[T]{
			{goKernels[T](flavC), goKernels[T](flavC)},
			{goKernels[T](flavR), goKernels[T](flavR)},
		},
		kernP:     [2][]kernFn[T]{goKernels[T](flavC), goKernels[T](flavC)},
		transpose: transposeGo[T],
		pools:     poolsOf[T](),
	}
}

func goKernels[T elem](fl int) []kernFn[T] {
	ks := make([]kernFn[T], goMR+1)
	for mr := 1; mr <= goMR; mr++ {
		ks[mr] = func(k int, a *T, as int, b *T, bs int, c *T, ldc int, alpha, beta T, nr int) {
			goKernel(fl, mr, k, a, as, b, bs, c, ldc, alpha, beta, nr)
		}
	}
	return ks
}

// goKernel implements kernFn for an mr×nr tile with mr, nr ≤ 4.
func goKernel[T elem](fl, mr, k int, a *T, as int, b *T, bs int, c *T, ldc int, alpha, beta T, nr int) {
	// Row/column strides of A: A(i,p) = av[i*ri + p*rp].
	ri, rp := 1, as
	if fl == flavR {
		ri, rp = as, 1
	}
	av := unsafe.Slice(a, (mr-1)*ri+(k-1)*rp+1)
	bv := unsafe.Slice(b, (k-1)*bs+goNR)
	cv := unsafe.Slice(c, (mr-1)*ldc+nr)
	var acc [goMR][goNR]T
	if mr == goMR {
		// Full-height tile: 16 accumulators in locals.
		var c00, c01, c02, c03, c10, c11, c12, c13 T
		var c20, c21, c22, c23, c30, c31, c32, c33 T
		for p := 0; p < k; p++ {
			bb := bv[p*bs : p*bs+4 : p*bs+4]
			b0, b1, b2, b3 := bb[0], bb[1], bb[2], bb[3]
			o := p * rp
			a0 := av[o]
			a1 := av[o+ri]
			a2 := av[o+2*ri]
			a3 := av[o+3*ri]
			c00 += a0 * b0
			c01 += a0 * b1
			c02 += a0 * b2
			c03 += a0 * b3
			c10 += a1 * b0
			c11 += a1 * b1
			c12 += a1 * b2
			c13 += a1 * b3
			c20 += a2 * b0
			c21 += a2 * b1
			c22 += a2 * b2
			c23 += a2 * b3
			c30 += a3 * b0
			c31 += a3 * b1
			c32 += a3 * b2
			c33 += a3 * b3
		}
		acc = [goMR][goNR]T{
			{c00, c01, c02, c03}, {c10, c11, c12, c13},
			{c20, c21, c22, c23}, {c30, c31, c32, c33},
		}
	} else {
		for i := 0; i < mr; i++ {
			var s0, s1, s2, s3 T
			for p := 0; p < k; p++ {
				bb := bv[p*bs : p*bs+4 : p*bs+4]
				ai := av[i*ri+p*rp]
				s0 += ai * bb[0]
				s1 += ai * bb[1]
				s2 += ai * bb[2]
				s3 += ai * bb[3]
			}
			acc[i] = [goNR]T{s0, s1, s2, s3}
		}
	}
	for i := 0; i < mr; i++ {
		row := cv[i*ldc : i*ldc+nr]
		if beta == 0 {
			for j := range row {
				row[j] = alpha * acc[i][j]
			}
		} else {
			for j := range row {
				row[j] = alpha*acc[i][j] + beta*row[j]
			}
		}
	}
}
