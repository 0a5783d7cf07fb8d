package vec

// Fused per-channel affine rows: the sweeps of a batch norm's
// normalisation (tensor's channel_affine) and of its input gradient
// (channel_affine2) over one row, in one pass instead of one call per
// operation, with the bits of those calls in turn.

// AffineRow sets dst[i] = x[i]·s + b, plus r[i] if r is not nil, then
// max(·, 0) if relu: the bits of MulVS, AddVS, AddVV and Relu in turn
// (each product and sum rounded, no fused multiply-add; a NaN stays NaN
// and -0 becomes +0 under relu, as Relu does). dst may be x or r.
func AffineRow(dst, x []float32, s, b float32, r []float32, relu bool) {
	x = x[:len(dst)]
	if r != nil {
		r = r[:len(dst)]
	}
	n := 0
	if useAVX512 {
		n = len(dst) &^ 15
		if n > 0 {
			var rn []float32
			if r != nil {
				rn = r[:n]
			}
			affineRowAVX512(dst[:n], x[:n], s, b, rn, relu)
		}
	}
	if n == len(dst) {
		return
	}
	d, xt := dst[n:], x[n:]
	MulVS(d, xt, s)
	AddVS(d, d, b)
	if r != nil {
		AddVV(d, d, r[n:])
	}
	if relu {
		Relu(d, d)
	}
}

// Affine2Row sets dst[i] = (gz[i]·a + x[i]·s) + b, with gz = g, or g where
// y > 0 and +0 elsewhere (a ReLU's gradient mask; NaN y gives 0) if y is
// not nil: the bits of ReluGradMul, MulVS, MulVS, AddVV and AddVS in turn
// (each product and sum rounded). dst may be g or x.
func Affine2Row(dst, g, y, x []float32, a, s, b float32) {
	g, x = g[:len(dst)], x[:len(dst)]
	if y != nil {
		y = y[:len(dst)]
	}
	n := 0
	if useAVX512 {
		n = len(dst) &^ 15
		if n > 0 {
			var yn []float32
			if y != nil {
				yn = y[:n]
			}
			affine2RowAVX512(dst[:n], g[:n], yn, x[:n], a, s, b)
		}
	}
	var t [256]float32
	for j := n; j < len(dst); j += len(t) {
		e := min(j+len(t), len(dst))
		d, xs := dst[j:e], t[:e-j]
		MulVS(xs, x[j:e], s) // first: dst may be x
		if y != nil {
			ReluGradMul(d, g[j:e], y[j:e])
			MulVS(d, d, a)
		} else {
			MulVS(d, g[j:e], a)
		}
		AddVV(d, d, xs)
		AddVS(d, d, b)
	}
}
