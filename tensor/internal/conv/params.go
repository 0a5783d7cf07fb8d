package conv

import (
	"fmt"
	"strings"
)

// MaxDims is the largest number of spatial dimensions a convolution or a
// pooling window of this package may have.
const MaxDims = 3

// Params describes one convolution of a batch of channels-first images:
// input x is [N, C, In...], kernel w is [O, C/Groups, Kernel...] and
// output y is [N, O, Out...], all contiguous and row-major, with 1 to
// MaxDims spatial dimensions. Along each spatial dimension d the input is
// dilated (LhsDil[d]-1 zeros between neighbours), padded (PadLo[d] and
// PadHi[d] zeros; negative values crop), and the kernel, dilated by
// RhsDil[d], slides over it by Stride[d]:
//
//	y[n, o, t] = Σ_c Σ_k w[o, c, k] · x[n, g·C/G + c, i]   where i·LhsDil = t·Stride + k·RhsDil - PadLo
//
// for output channel o in group g = o/(O/G), summed over the taps k whose
// position i is a whole input index inside [0, In). This is
// lax.conv_general_dilated with feature_group_count = Groups, in NCHW
// layout. Nil Stride, LhsDil and RhsDil mean 1; nil pads mean 0.
type Params struct {
	N, C, O, Groups int
	In, Kernel      []int
	Stride          []int
	PadLo, PadHi    []int
	LhsDil, RhsDil  []int
}

// Out returns the output's spatial sizes: for each dimension
// floor((din + lo + hi - dk)/s) + 1, where din = (In-1)·LhsDil + 1 and
// dk = (Kernel-1)·RhsDil + 1, or 0 when the padded input is shorter than
// the dilated kernel. Params must be valid (see Check).
func (p *Params) Out() []int {
	g := p.geom()
	out := make([]int, len(p.In))
	for d := range out {
		out[d] = g.d[MaxDims-len(p.In)+d].out
	}
	return out
}

// Check reports what is inconsistent in p, or nil: the number of spatial
// dimensions, the per-dimension slices' lengths, non-positive sizes,
// strides or dilations, and channel counts the groups do not divide.
func (p *Params) Check() error {
	nd := len(p.In)
	var errs []string
	bad := func(format string, args ...any) { errs = append(errs, fmt.Sprintf(format, args...)) }
	if nd < 1 || nd > MaxDims {
		bad("%d spatial dimensions (want 1 to %d)", nd, MaxDims)
	}
	if len(p.Kernel) != nd {
		bad("kernel has %d spatial dimensions, input %d", len(p.Kernel), nd)
	}
	for _, s := range []struct {
		name string
		v    []int
	}{{"strides", p.Stride}, {"low paddings", p.PadLo}, {"high paddings", p.PadHi}, {"input dilations", p.LhsDil}, {"kernel dilations", p.RhsDil}} {
		if s.v != nil && len(s.v) != nd {
			bad("%d %s for %d spatial dimensions", len(s.v), s.name, nd)
		}
	}
	if p.N < 0 || p.C < 0 || p.O < 0 {
		bad("negative size N=%d C=%d O=%d", p.N, p.C, p.O)
	}
	if p.Groups < 1 {
		bad("feature groups %d < 1", p.Groups)
	} else if p.C%p.Groups != 0 || p.O%p.Groups != 0 {
		bad("%d feature groups do not divide %d input and %d output channels", p.Groups, p.C, p.O)
	}
	for d := 0; d < nd && len(errs) == 0; d++ {
		if p.In[d] < 0 {
			bad("negative input size %d in dimension %d", p.In[d], d)
		}
		if p.Kernel[d] < 1 {
			bad("kernel size %d in dimension %d", p.Kernel[d], d)
		}
		for _, s := range []struct {
			name string
			v    []int
		}{{"stride", p.Stride}, {"input dilation", p.LhsDil}, {"kernel dilation", p.RhsDil}} {
			if s.v != nil && s.v[d] < 1 {
				bad("%s %d in dimension %d", s.name, s.v[d], d)
			}
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("%s", strings.Join(errs, "; "))
	}
	return nil
}

// dim is the geometry of one spatial dimension.
type dim struct {
	in, k, out int
	s, lo      int // stride, low padding
	dl, dr     int // input (lhs) and kernel (rhs) dilation
}

// geom is a convolution normalised to MaxDims spatial dimensions: missing
// leading dimensions have size 1 everywhere.
type geom struct {
	n, c, o, groups int
	cg, og          int // channels per group
	d               [MaxDims]dim
	inSize          int // Π in
	outSize         int // Π out
	kSize           int // Π k
}

func at(v []int, d, def int) int {
	if v == nil {
		return def
	}
	return v[d]
}

// geom returns p normalised; p must be valid.
func (p *Params) geom() geom {
	g := geom{n: p.N, c: p.C, o: p.O, groups: p.Groups, cg: p.C / p.Groups, og: p.O / p.Groups}
	off := MaxDims - len(p.In)
	for d := 0; d < MaxDims; d++ {
		g.d[d] = dim{in: 1, k: 1, out: 1, s: 1, dl: 1, dr: 1}
	}
	for d := range p.In {
		g.d[off+d] = dim{
			in: p.In[d], k: p.Kernel[d],
			s: at(p.Stride, d, 1), lo: at(p.PadLo, d, 0),
			dl: at(p.LhsDil, d, 1), dr: at(p.RhsDil, d, 1),
		}
		e := &g.d[off+d]
		din := 0
		if e.in > 0 {
			din = (e.in-1)*e.dl + 1
		}
		span := din + e.lo + at(p.PadHi, d, 0) - ((e.k-1)*e.dr + 1)
		if span >= 0 {
			e.out = span/e.s + 1
		}
	}
	g.inSize, g.outSize, g.kSize = 1, 1, 1
	for _, e := range g.d {
		g.inSize *= e.in
		g.outSize *= e.out
		g.kSize *= e.k
	}
	return g
}

// mustGeom checks p and the lengths of the input, kernel and output
// operands (given in that order) and returns the geometry.
func mustGeom(op string, p *Params, nx, nw, ny int) *geom {
	if err := p.Check(); err != nil {
		panic("conv." + op + ": " + err.Error())
	}
	g := p.geom()
	want := [3]int{g.n * g.c * g.inSize, g.o * g.cg * g.kSize, g.n * g.o * g.outSize}
	for i, got := range [3]int{nx, nw, ny} {
		if got != want[i] {
			name := [3]string{"input", "kernel", "output"}[i]
			panic(fmt.Sprintf("conv.%s: %s of %d elements, want %d", op, name, got, want[i]))
		}
	}
	return &g
}

// srcIndex returns the input index that output position t reads through
// tap k of dimension e, or -1 when it reads padding or a dilation hole.
func (e *dim) srcIndex(t, k int) int {
	q := t*e.s + k*e.dr - e.lo
	if q < 0 || q%e.dl != 0 {
		return -1
	}
	if i := q / e.dl; i < e.in {
		return i
	}
	return -1
}
