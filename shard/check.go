package shard

import (
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unicode/utf8"

	"github.com/gonox/gonox/tensor"
)

// Check asserts the shape and sharding of x against spec, a jaxtyping-style
// description of its dimensions with the mesh axes of each written after
// '@', as in JAX's type notation:
//
//	err := shard.Check(x, "batch@dp seq heads@tp d")
//
// It returns nil if x matches and otherwise an error saying which
// dimension differs and how:
//
//	shard.Check: float32[1024@dp,4096] against "batch@dp seq@tp": dim 1 (seq) is replicated, want sharded over tp
//
// Check uses a fresh Scope, so a name must have one size within this call
// only; use a Scope to check several tensors against each other.
//
// # Spec syntax
//
// A spec lists the dimensions separated by spaces (the empty spec is a
// scalar). Each dimension is one of
//
//	batch     a name: any size the first time the scope sees it, the same size afterwards
//	1024      a fixed size (digits may be grouped as 128_000)
//	rows=4    a fixed size with a name for documentation (jaxtyping)
//	_         any size, not bound
//	_batch    any size, not bound: a name for documentation (jaxtyping)
//	*batch    any number of dimensions (zero or more), bound as a tuple of sizes
//	* or ...  any number of dimensions, not bound (also *_ or *_name)
//
// At most one dimension may be variadic (* or ...). Names are letters,
// digits and underscores, not starting with a digit.
//
// A dimension other than a variadic one may be followed by the mesh axes
// it must be split over: @dp for one axis, @(dp,tp) for several, major to
// minor, exactly as the tensor's type prints them. A dimension without @
// must be replicated. So "batch@dp d" matches float32[1024@dp,4096] but
// not float32[1024@dp,4096@tp] or float32[1024@(dp,tp),4096]; dimensions
// matched by a variadic entry must be replicated too. Sizes are global
// sizes (1024, not the 256 rows a device holds).
//
// Host tensors, and blocks inside Map (whose shapes are per device), are
// checked for shape only: any @ in the spec is then an error, since they
// are not split over a mesh. A mesh axis may appear once per spec, as in
// a PartitionSpec.
//
// jaxtyping's other modifiers (# for broadcasting, ? for sizes varying
// within a pytree) and symbolic sizes (dim-1) are not supported; the
// parser reports them as syntax errors. Bad specs are errors naming the
// byte offset of the problem.
func Check(x *tensor.Tensor, spec string) error {
	var s Scope
	return s.Check(x, spec)
}

// MustCheck is Check that panics with the error's message instead of
// returning it. It returns x, so it can wrap an expression:
//
//	h := shard.MustCheck(tensor.MatMul(x, w), "batch@dp mlp@tp")
func MustCheck(x *tensor.Tensor, spec string) *tensor.Tensor {
	if err := Check(x, spec); err != nil {
		panic(err.Error())
	}
	return x
}

// Scope holds the sizes that the names of dimension specs are bound to,
// so that several checks agree, as jaxtyping checks the arguments of one
// call together:
//
//	var s shard.Scope
//	s.MustCheck(x, "batch@dp seq d")
//	s.MustCheck(w, "d heads@tp")          // d must be x's last size
//	s.MustCheck(y, "batch@dp seq heads@tp")
//
// A name is bound by the first successful check that uses it; a check that
// fails binds nothing. Plain names and variadic names (*batch) are
// separate. The zero Scope is empty and ready to use; a Scope is safe for
// concurrent use (the devices of a Map may share one).
type Scope struct {
	mu   sync.Mutex
	dims map[string]int   // name -> size
	vars map[string][]int // variadic name -> sizes
}

// NewScope returns an empty scope.
func NewScope() *Scope { return &Scope{} }

// Dim returns the size a name is bound to, and whether it is bound.
func (s *Scope) Dim(name string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n, ok := s.dims[name]
	return n, ok
}

// Dims returns the sizes a variadic name (without its '*') is bound to,
// and whether it is bound.
func (s *Scope) Dims(name string) ([]int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	v, ok := s.vars[name]
	return slices.Clone(v), ok
}

// String lists the bindings: "Scope{batch=1024, d=4096, *lead=[2 3]}".
func (s *Scope) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var parts []string
	for n, v := range s.dims {
		parts = append(parts, fmt.Sprintf("%s=%d", n, v))
	}
	sort.Strings(parts)
	var vars []string
	for n, v := range s.vars {
		vars = append(vars, fmt.Sprintf("*%s=%v", n, v))
	}
	sort.Strings(vars)
	return "Scope{" + strings.Join(append(parts, vars...), ", ") + "}"
}

// MustCheck is Check that panics with the error's message instead of
// returning it. It returns x.
func (s *Scope) MustCheck(x *tensor.Tensor, spec string) *tensor.Tensor {
	if err := s.Check(x, spec); err != nil {
		panic(err.Error())
	}
	return x
}

// Check asserts the shape and sharding of x against spec (see the package
// function Check for the syntax), with names bound in s: a name the scope
// has seen must have the size it was bound to, and new names are bound
// if the check succeeds.
func (s *Scope) Check(x *tensor.Tensor, spec string) error {
	cs, err := parseCheckSpecCached(spec)
	if err != nil {
		return err
	}
	if x == nil {
		return fmt.Errorf("shard.Check: nil tensor against %q", spec)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.match(x, spec, cs)
}

// match checks x against the parsed spec, committing new bindings only if
// everything matches. s.mu is held.
func (s *Scope) match(x *tensor.Tensor, spec string, cs *checkSpec) error {
	shape := x.Shape()
	rank := len(shape)
	fail := func(format string, args ...any) error {
		return fmt.Errorf("shard.Check: %s against %q: %s", x.Type(), spec, fmt.Sprintf(format, args...))
	}
	n := len(cs.dims)
	if cs.variadic < 0 && rank != n {
		return fail("rank %d, want %d %s", rank, n, pluralize(n, "dimension"))
	}
	if cs.variadic >= 0 && rank < n-1 {
		return fail("rank %d, want at least %d %s", rank, n-1, pluralize(n-1, "dimension"))
	}
	sh, sharded := ShardingOf(x)
	notSharded := "not sharded (a host tensor)"
	if x.Local() != nil {
		notSharded = "a per-device block (inside shard.Map)"
	}
	// New bindings, with the dimension that made them.
	newDims := map[string]int{}
	newBy := map[string]int{}
	var newVar []int
	checkAxes := func(i int, label string, want DimSpec) error {
		if !sharded {
			if len(want) > 0 {
				return fail("dim %d%s is %s, want sharded over %s", i, label, notSharded, axesLabel(want))
			}
			return nil
		}
		got := sh.spec.dim(i)
		if slices.Equal(got, want) {
			return nil
		}
		note := ""
		for _, a := range want {
			if !slices.Contains(sh.mesh.names, a) {
				note = fmt.Sprintf(" (mesh %v has no axis %s)", sh.mesh, a)
				break
			}
		}
		switch {
		case len(got) == 0:
			return fail("dim %d%s is replicated, want sharded over %s%s", i, label, axesLabel(want), note)
		case len(want) == 0:
			return fail("dim %d%s is sharded over %s, want replicated", i, label, axesLabel(got))
		default:
			return fail("dim %d%s is sharded over %s, want sharded over %s%s", i, label, axesLabel(got), axesLabel(want), note)
		}
	}
	extra := rank - (n - 1) // dimensions the variadic entry covers
	i := 0                  // tensor dimension
	for _, d := range cs.dims {
		if d.kind == dimVariadic {
			sizes := shape[i : i+extra]
			label := " (" + d.label + ")"
			if d.name != "" {
				if bound, ok := s.vars[d.name]; ok && !slices.Equal(bound, sizes) {
					return fail("%s (%s) is %v, but *%s was bound to %v by an earlier check", d.text, dimRangeText(i, extra), sizes, d.name, bound)
				}
				newVar = sizes
			}
			for k := i; k < i+extra; k++ {
				if err := checkAxes(k, label, nil); err != nil {
					return err
				}
			}
			i += extra
			continue
		}
		size := shape[i]
		label := ""
		if d.label != "" {
			label = " (" + d.label + ")"
		}
		switch d.kind {
		case dimFixed:
			if size != d.size {
				return fail("dim %d%s is %d, want %d", i, label, size, d.size)
			}
		case dimNamed:
			if bound, ok := s.dims[d.name]; ok {
				if size != bound {
					return fail("dim %d%s is %d, but %s was bound to %d by an earlier check", i, label, size, d.name, bound)
				}
			} else if bound, ok := newDims[d.name]; ok {
				if size != bound {
					return fail("dim %d%s is %d, but %s is %d in dim %d", i, label, size, d.name, bound, newBy[d.name])
				}
			} else {
				newDims[d.name], newBy[d.name] = size, i
			}
		}
		if err := checkAxes(i, label, d.axes); err != nil {
			return err
		}
		i++
	}
	if len(newDims) > 0 && s.dims == nil {
		s.dims = map[string]int{}
	}
	for k, v := range newDims {
		s.dims[k] = v
	}
	if cs.variadic >= 0 && cs.dims[cs.variadic].name != "" {
		name := cs.dims[cs.variadic].name
		if _, ok := s.vars[name]; !ok {
			if s.vars == nil {
				s.vars = map[string][]int{}
			}
			s.vars[name] = slices.Clone(newVar)
		}
	}
	return nil
}

func pluralize(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// dimRangeText names n dimensions from start: "no dims", "dim 2", "dims 0-1".
func dimRangeText(start, n int) string {
	switch n {
	case 0:
		return "no dims"
	case 1:
		return "dim " + strconv.Itoa(start)
	}
	return fmt.Sprintf("dims %d-%d", start, start+n-1)
}

// The parsed form of a spec.

type dimKind uint8

const (
	dimNamed    dimKind = iota + 1 // a bound name
	dimFixed                       // an integer (possibly with a documentation name)
	dimAny                         // _ or _name
	dimVariadic                    // *name, *, *_name or ...
)

type checkDim struct {
	kind  dimKind
	name  string  // bound name (dimNamed, dimVariadic); "" if anonymous
	label string  // how messages name the dimension ("" for none)
	text  string  // the dimension as written, without its axes
	size  int     // dimFixed
	axes  DimSpec // mesh axes after '@'; nil if replicated
}

type checkSpec struct {
	dims     []checkDim
	variadic int // index of the variadic dimension, or -1
}

// String returns the spec in canonical form: dimensions separated by one
// space, axes as @a or @(a,b).
func (c *checkSpec) String() string {
	parts := make([]string, len(c.dims))
	for i, d := range c.dims {
		parts[i] = d.text
		if len(d.axes) > 0 {
			parts[i] += "@" + axesLabel(d.axes)
		}
	}
	return strings.Join(parts, " ")
}

// Parsed specs are cached: checks run in training loops with a handful of
// constant specs. The cache stops growing at checkCacheMax entries so that
// specs built at run time cannot exhaust memory.
const checkCacheMax = 4096

var (
	checkCache     sync.Map // string -> *checkSpec
	checkCacheSize atomic.Int64
)

func parseCheckSpecCached(spec string) (*checkSpec, error) {
	if v, ok := checkCache.Load(spec); ok {
		return v.(*checkSpec), nil
	}
	cs, err := parseCheckSpec(spec)
	if err != nil {
		return nil, err
	}
	if checkCacheSize.Load() < checkCacheMax {
		if _, loaded := checkCache.LoadOrStore(spec, cs); !loaded {
			checkCacheSize.Add(1)
		}
	}
	return cs, nil
}

// specRune returns the character at byte offset i of s, for messages.
func specRune(s string, i int) rune {
	r, _ := utf8.DecodeRuneInString(s[i:])
	return r
}

func isSpecSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func isSpecDigit(c byte) bool { return '0' <= c && c <= '9' }

func isSpecIdent(c byte) bool {
	return c == '_' || isSpecDigit(c) || ('a' <= c && c <= 'z') || ('A' <= c && c <= 'Z')
}

// parseCheckSpec parses a Check spec.
func parseCheckSpec(spec string) (*checkSpec, error) {
	p := &specParser{spec: spec, axisAt: map[string]int{}}
	cs := &checkSpec{variadic: -1}
	i := 0
	for {
		for i < len(spec) && isSpecSpace(spec[i]) {
			i++
		}
		if i >= len(spec) {
			break
		}
		start := i
		d, j, err := p.dim(i)
		if err != nil {
			return nil, err
		}
		i = j
		d.text = spec[start:i]
		if d.kind == dimVariadic {
			if cs.variadic >= 0 {
				return nil, p.bad(start, "second variadic dimension %s (at most one * or ... per spec)", d.text)
			}
			cs.variadic = len(cs.dims)
			if d.label == "" {
				d.label = "in " + d.text
			}
		}
		if i < len(spec) && spec[i] == '@' {
			if d.kind == dimVariadic {
				return nil, p.bad(i, "variadic dimension %s cannot be sharded; write its dimensions out", d.text)
			}
			if d.axes, i, err = p.meshAxes(i + 1); err != nil {
				return nil, err
			}
		}
		if i < len(spec) && !isSpecSpace(spec[i]) {
			return nil, p.bad(i, "unexpected %q after dimension %s; separate dimensions with spaces", specRune(spec, i), spec[start:i])
		}
		cs.dims = append(cs.dims, d)
	}
	return cs, nil
}

// specParser holds the state of parseCheckSpec.
type specParser struct {
	spec   string
	axisAt map[string]int // mesh axis -> offset of first use
}

func (p *specParser) bad(off int, format string, args ...any) error {
	return fmt.Errorf("shard.Check: bad spec %q: offset %d: %s", p.spec, off, fmt.Sprintf(format, args...))
}

// ident returns the end of the identifier starting at i.
func (p *specParser) ident(i int) int {
	for i < len(p.spec) && isSpecIdent(p.spec[i]) {
		i++
	}
	return i
}

// number parses digits with single underscores between them, starting
// at i; it returns the value and the end.
func (p *specParser) number(i int) (int, int, error) {
	spec := p.spec
	start := i
	v := 0
	for i < len(spec) {
		c := spec[i]
		switch {
		case isSpecDigit(c):
			if v > (1<<31-1)/10 {
				return 0, 0, p.bad(start, "size %s is too large", spec[start:p.ident(i)])
			}
			v = v*10 + int(c-'0')
		case c == '_' && i+1 < len(spec) && isSpecDigit(spec[i+1]) && i > start:
		default:
			if isSpecIdent(c) {
				return 0, 0, p.bad(i, "unexpected %q in size %s", specRune(spec, i), spec[start:p.ident(i)])
			}
			return v, i, nil
		}
		i++
	}
	return v, i, nil
}

// dim parses the dimension starting at i (without its mesh axes) and
// returns it and its end.
func (p *specParser) dim(i int) (checkDim, int, error) {
	spec := p.spec
	c := spec[i]
	switch {
	case strings.HasPrefix(spec[i:], "..."):
		return checkDim{kind: dimVariadic}, i + 3, nil
	case c == '*':
		j := p.ident(i + 1)
		name := spec[i+1 : j]
		if name != "" && isSpecDigit(name[0]) {
			return checkDim{}, 0, p.bad(i+1, "variadic name %q starts with a digit", name)
		}
		d := checkDim{kind: dimVariadic}
		if name != "" && name[0] != '_' {
			d.name = name
		}
		return d, j, nil
	case c == '_':
		j := p.ident(i)
		d := checkDim{kind: dimAny}
		if j > i+1 {
			d.label = spec[i:j]
		}
		return d, j, nil
	case isSpecDigit(c):
		v, j, err := p.number(i)
		return checkDim{kind: dimFixed, size: v}, j, err
	case isSpecIdent(c):
		j := p.ident(i)
		name := spec[i:j]
		if j < len(spec) && spec[j] == '=' {
			if j+1 >= len(spec) || !isSpecDigit(spec[j+1]) {
				return checkDim{}, 0, p.bad(j+1, "want a size after %s=", name)
			}
			v, k, err := p.number(j + 1)
			return checkDim{kind: dimFixed, size: v, label: name}, k, err
		}
		return checkDim{kind: dimNamed, name: name, label: name}, j, nil
	case c == '#' || c == '?':
		return checkDim{}, 0, p.bad(i, "jaxtyping's %q modifier is not supported", specRune(spec, i))
	}
	return checkDim{}, 0, p.bad(i, "unexpected %q; want a dimension (name, size, _, *name or ...)", specRune(spec, i))
}

// meshAxes parses the mesh axes after an @ at i-1 (one name, or names in
// parentheses) and returns them and their end.
func (p *specParser) meshAxes(i int) (DimSpec, int, error) {
	spec := p.spec
	if i >= len(spec) || spec[i] != '(' {
		j := p.ident(i)
		if j == i {
			if i >= len(spec) {
				return nil, 0, p.bad(i, "want a mesh axis name after @")
			}
			return nil, 0, p.bad(i, "want a mesh axis name after @, got %q", specRune(spec, i))
		}
		if err := p.use(i, j); err != nil {
			return nil, 0, err
		}
		return DimSpec{spec[i:j]}, j, nil
	}
	i++
	var axes DimSpec
	for {
		for i < len(spec) && isSpecSpace(spec[i]) {
			i++
		}
		j := p.ident(i)
		if j == i {
			if i >= len(spec) {
				return nil, 0, p.bad(i, "unclosed ( in mesh axes")
			}
			return nil, 0, p.bad(i, "want a mesh axis name, got %q", specRune(spec, i))
		}
		if err := p.use(i, j); err != nil {
			return nil, 0, err
		}
		axes = append(axes, spec[i:j])
		i = j
		for i < len(spec) && isSpecSpace(spec[i]) {
			i++
		}
		if i >= len(spec) {
			return nil, 0, p.bad(i, "unclosed ( in mesh axes")
		}
		if spec[i] == ')' {
			return axes, i + 1, nil
		}
		if spec[i] != ',' {
			return nil, 0, p.bad(i, "want , or ) in mesh axes, got %q", specRune(spec, i))
		}
		i++
	}
}

// use records the mesh axis spec[i:j], which a spec may name once.
func (p *specParser) use(i, j int) error {
	if first, dup := p.axisAt[p.spec[i:j]]; dup {
		return p.bad(i, "mesh axis %s used twice (first at offset %d)", p.spec[i:j], first)
	}
	p.axisAt[p.spec[i:j]] = i
	return nil
}
