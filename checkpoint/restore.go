package checkpoint

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/gonox/gonox/internal/filekind"
	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
)

// Placement says where Restore puts each restored leaf: on the host, or
// on a mesh with some sharding. OnHost, AsLike and OnMesh cover the usual
// cases; implement it to place leaves on different meshes.
type Placement interface {
	// ShardingFor returns the sharding of the leaf at path (a path of the
	// like tree, so relative to a Subtree prefix), or sharded = false for
	// a host tensor. like is the leaf of the like tree there.
	ShardingFor(path pytree.Path, like *tensor.Tensor) (s shard.Sharding, sharded bool, err error)
}

type hostPlacement struct{}

func (hostPlacement) ShardingFor(pytree.Path, *tensor.Tensor) (shard.Sharding, bool, error) {
	return shard.Sharding{}, false, nil
}

// OnHost restores every leaf as a host tensor (unsharded). A nil Placement
// means the same.
func OnHost() Placement { return hostPlacement{} }

type likePlacement struct{}

func (likePlacement) ShardingFor(_ pytree.Path, like *tensor.Tensor) (shard.Sharding, bool, error) {
	s, ok := shard.ShardingOf(like)
	return s, ok, nil
}

// AsLike restores each leaf where the like tree's leaf is: with its
// sharding if it is sharded, on the host otherwise. Restoring into the
// model being trained, already placed, is then one call.
func AsLike() Placement { return likePlacement{} }

type meshPlacement struct {
	mesh  *shard.Mesh
	specs shard.SpecTree
}

func (p meshPlacement) ShardingFor(path pytree.Path, like *tensor.Tensor) (shard.Sharding, bool, error) {
	spec, err := p.specs.SpecFor(path, like)
	if err != nil {
		return shard.Sharding{}, false, err
	}
	if msg := checkSpec(p.mesh, spec, like.Shape()); msg != "" {
		return shard.Sharding{}, false, errors.New(msg)
	}
	return shard.NewSharding(p.mesh, spec), true, nil
}

// OnMesh places every leaf on mesh with the spec specs gives it (a Spec
// for all, Specs by path prefix, a SpecFunc or Rules, as shard.FilterShard
// takes; shard.P() replicates every leaf). The mesh may differ from the
// one the checkpoint was saved on, in shape and in number of devices: each
// block is assembled from the saved blocks it overlaps. A nil mesh or nil
// specs is a programmer error: OnMesh panics.
func OnMesh(mesh *shard.Mesh, specs shard.SpecTree) Placement {
	if mesh == nil {
		panic("checkpoint.OnMesh: nil mesh (checkpoint.OnHost() restores onto the host)")
	}
	if specs == nil {
		panic("checkpoint.OnMesh: nil specs (shard.P() replicates every leaf on " + mesh.String() + ")")
	}
	return meshPlacement{mesh: mesh, specs: specs}
}

// checkSpec returns why spec cannot shard a tensor of shape on mesh, or "".
func checkSpec(mesh *shard.Mesh, spec shard.Spec, shape []int) string {
	if len(spec) > len(shape) {
		return fmt.Sprintf("spec %v has more entries than the %d dimensions", spec, len(shape))
	}
	names := mesh.AxisNames()
	sizes := mesh.Shape()
	used := map[string]bool{}
	for d, axes := range spec {
		n := 1
		for _, a := range axes {
			k := slices.Index(names, a)
			if k < 0 {
				return fmt.Sprintf("spec %v: mesh %v has no axis %q", spec, mesh, a)
			}
			if used[a] {
				return fmt.Sprintf("spec %v uses mesh axis %q twice", spec, a)
			}
			used[a] = true
			n *= sizes[k]
		}
		if shape[d]%n != 0 {
			return fmt.Sprintf("spec %v: dimension %d (%d) is not divisible by %d devices", spec, d, shape[d], n)
		}
	}
	return ""
}

// RestoreOption configures Restore, RestoreLatest and (Subtree, Partial
// and MapNames) ImportSafetensors.
type RestoreOption func(*restoreConfig)

type restoreConfig struct {
	prefix  string
	partial bool
	rules   []Rule     // MapNames
	meta    *metaCheck // CheckMetadata
	skip    bool       // SkipCorrupt
	skipped func(step int, err error)
}

// Subtree restores the subtree of the saved tree at prefix (a path such as
// "Params" or "Layers[0]"): like is that subtree, and its leaf at path p is
// the saved leaf at prefix.p. Use it to load the parameters of a saved
// training state into a bare model.
func Subtree(prefix string) RestoreOption { return func(c *restoreConfig) { c.prefix = prefix } }

// Partial lets like hold fewer leaves than the checkpoint (a tree filtered
// with pytree.Filter, say): saved leaves like does not have are skipped
// instead of being an error. Leaves like has must still be in the
// checkpoint.
func Partial() RestoreOption { return func(c *restoreConfig) { c.partial = true } }

// Restore reads step of dir into a tree of like's type and structure.
//
// like supplies everything but the tensor values: the structure, the
// static data, and for each leaf the shape and dtype the saved one must
// have (its values are not read, so zeros, a freshly initialised model or
// the model being trained all do). A float leaf may have another float
// dtype than the saved one: float32, bfloat16 and float16 convert as
// tensor.Convert does (widening is exact; narrowing rounds to nearest,
// ties to even, NaN stays NaN; bfloat16 to float16 goes through float32),
// so a bf16 model restores from its float32 master weights and the other
// way round. Restore checks the manifest, that the
// saved paths are like's (see Subtree and Partial for subsets), shapes and
// dtypes, and each chunk's checksum, and returns an error wrapping
// ErrNotFound, ErrCorrupt, ErrMismatch or ErrUnsafePath naming the tensor
// and file otherwise. It only reads: a failed restore changes nothing on
// disk.
//
// to places the leaves (nil: on the host). On a mesh, each device's block
// is assembled from the saved blocks that overlap it, decoding only the
// chunks it needs, by one goroutine per device, so a tensor is never
// gathered whole on the host unless it is restored there.
func Restore[T any](dir string, step int, like T, to Placement, opts ...RestoreOption) (T, error) {
	var zero T
	leaves, st := pytree.Flatten(like)
	paths := pytree.Paths(like)
	out, err := restoreLeaves(dir, step, paths, leaves, to, opts)
	if err != nil {
		return zero, err
	}
	return pytree.Unflatten[T](st, out), nil
}

// readManifest opens a step directory and parses its manifest. Errors
// name the step directory. Nothing that is not a regular file is opened:
// the step directory must be a directory (not a symlink to one: Steps
// does not list those either, see isStep), and manifest.json a regular
// file of at most maxManifestBytes, both checked with Lstat, so a FIFO or
// a device there fails at once instead of blocking the open or the read.
func readManifest(dir string, step int) (root *os.Root, m *manifest, err error) {
	if err := checkDir("restore", step, dir); err != nil {
		return nil, nil, err
	}
	stepDir := filepath.Join(dir, stepName(step))
	fail := func(file string, err error) error {
		return &Error{Op: "restore", Step: step, Dir: stepDir, File: file, Err: err}
	}
	if step < 0 {
		return nil, nil, &Error{Op: "restore", Step: step, Err: fmt.Errorf("%w: negative step %d", ErrNotFound, step)}
	}
	fi, err := os.Lstat(stepDir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil, fail("", fmt.Errorf("%w: no step %d in %s (%s)", ErrNotFound, step, dir, stepsHint(dir)))
	case err != nil:
		return nil, nil, fail("", err)
	case fi.Mode()&fs.ModeSymlink != 0:
		// The step directory itself is the file at fault: File names it
		// (and Error does not print it twice).
		target, _ := os.Readlink(stepDir)
		return nil, nil, fail(stepDir, fmt.Errorf("%w: the step directory is a symlink to %s (this package never writes one; restoring it would read outside %s)", ErrUnsafePath, target, dir))
	case !fi.IsDir():
		return nil, nil, fail(stepDir, fmt.Errorf("%w: the step directory is not a directory: it is %s", ErrCorrupt, filekind.Of(fi.Mode())))
	}
	r, err := os.OpenRoot(stepDir)
	if err != nil {
		return nil, nil, fail("", err)
	}
	defer func() {
		if err != nil {
			r.Close()
		}
	}()
	root = r
	if err := checkManifestFile(root); err != nil {
		return nil, nil, fail(manifestName, err)
	}
	f, err := openRegular(root, manifestName)
	if err != nil {
		return nil, nil, fail(manifestName, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	// The limit holds even if the file grew since the Lstat.
	data, err := io.ReadAll(io.LimitReader(f, maxManifestBytes+1))
	f.Close()
	if err != nil {
		return nil, nil, fail(manifestName, fmt.Errorf("%w: %v", ErrCorrupt, err))
	}
	m, err = parseManifest(data)
	if err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Op, e.Step, e.Dir = "restore", step, stepDir
		}
		return nil, nil, err
	}
	if m.Step != step {
		return nil, nil, fail(manifestName, fmt.Errorf("%w: manifest is of step %d", ErrCorrupt, m.Step))
	}
	return root, m, nil
}

// stepsHint says which steps dir has, for an error about one it lacks:
// "its steps are 100, 200", the last few of many, or why there are none.
func stepsHint(dir string) string {
	steps, err := Steps(dir)
	switch {
	case err != nil:
		return err.Error()
	case len(steps) == 0:
		if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
			return "the directory does not exist"
		}
		return "it has no step"
	case len(steps) == 1:
		return fmt.Sprintf("its one step is %d", steps[0])
	}
	var b strings.Builder
	b.WriteString("its steps are ")
	if len(steps) > 5 {
		fmt.Fprintf(&b, "%d, ..., ", steps[0])
		steps = steps[len(steps)-4:]
	}
	for i, s := range steps {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(s))
	}
	return b.String()
}

// checkManifestFile checks, without opening it, that the manifest of the
// step directory root is a regular file of a size this package reads.
func checkManifestFile(root *os.Root) error {
	fi, err := root.Lstat(manifestName)
	switch {
	case err != nil:
		return fmt.Errorf("%w: %v", ErrCorrupt, err)
	case !fi.Mode().IsRegular():
		return fmt.Errorf("%w: %v", ErrCorrupt, notRegular(fi.Mode()))
	case fi.Size() > maxManifestBytes:
		return fmt.Errorf("%w: %d bytes is too large for a manifest (limit %d)", ErrCorrupt, fi.Size(), maxManifestBytes)
	}
	return nil
}

// matchLeaves finds the saved entry of each like path. names maps the
// saved paths (parsed) to entries; it returns the entries in like order.
func matchLeaves[E any](op string, step int, saved []pytree.Path, entries []E, likePaths []pytree.Path, cfg restoreConfig) ([]E, error) {
	fail := func(path string, format string, args ...any) error {
		return &Error{Op: op, Step: step, Path: path, Err: errf(ErrMismatch, format, args...)}
	}
	prefix, err := pytree.ParsePath(cfg.prefix)
	if err != nil {
		return nil, &Error{Op: op, Step: step, Err: fmt.Errorf("Subtree(%q): %v", cfg.prefix, err)}
	}
	byPath := map[string]int{}
	for i, p := range saved {
		if len(p) >= len(prefix) && p[:len(prefix)].Equal(prefix) {
			byPath[p[len(prefix):].String()] = i
		}
	}
	if len(prefix) > 0 && len(byPath) == 0 {
		return nil, fail("", "nothing saved under %q (%s)", cfg.prefix, topLevel(saved))
	}
	out := make([]E, len(likePaths))
	used := make(map[int]bool, len(likePaths))
	for i, lp := range likePaths {
		full := append(slices.Clone(prefix), lp...).String()
		k, ok := byPath[lp.String()]
		if !ok {
			return nil, fail(full, "the tree to restore into has a tensor here, the checkpoint does not")
		}
		out[i] = entries[k]
		used[k] = true
	}
	if !cfg.partial && len(used) < len(byPath) {
		var extra []string
		for _, k := range byPath {
			if !used[k] {
				extra = append(extra, append(slices.Clone(prefix), saved[k][len(prefix):]...).String())
			}
		}
		sort.Strings(extra)
		return nil, fail(extra[0], "the checkpoint has a tensor here, the tree to restore into does not (%d such; use Partial to skip them)", len(extra))
	}
	return out, nil
}

// topLevel lists the first elements of the saved paths, for an error
// about a Subtree prefix that matches none: "saved under Params, Opt,
// Step".
func topLevel(saved []pytree.Path) string {
	var names []string
	seen := map[string]bool{}
	for _, p := range saved {
		if len(p) == 0 {
			continue
		}
		n := p[:1].String()
		if !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return "the saved tree has no path under a root"
	}
	if len(names) > 8 {
		names = append(names[:8], "...")
	}
	return "saved under " + strings.Join(names, ", ")
}

// target is where one restored leaf goes.
type target struct {
	entry   *tensorEntry
	like    *tensor.Tensor
	sharded bool
	sh      shard.Sharding
	geo     geometry
	blocks  []*tensor.Tensor // unique blocks (host: one), by block number
	owner   []int            // mesh index of each block's first holder
	ofDev   []int            // block number of each device (sharded)
	need    []bool           // blocks some device of this process holds (sharded)
	offsets [][]int          // each block's global offset
	shape   []int            // block shape
}

// piece is a box of one target block that one worker fills.
type piece struct {
	t      *target
	blk    int   // block number in t.blocks
	lo     []int // global box
	size   []int
	worker int
}

func restoreLeaves(dir string, step int, likePaths []pytree.Path, likes []*tensor.Tensor, to Placement, opts []RestoreOption) ([]*tensor.Tensor, error) {
	var cfg restoreConfig
	for _, o := range opts {
		o(&cfg)
	}
	if to == nil {
		to = OnHost()
	}
	if len(cfg.rules) > 0 {
		return nil, &Error{Op: "restore", Step: step, Err: errors.New("MapNames applies to safetensors files; checkpoints are read by tree path")}
	}
	if cfg.skip {
		return nil, &Error{Op: "restore", Step: step, Err: errors.New("SkipCorrupt applies to RestoreLatest, which chooses the step")}
	}
	root, m, err := readManifest(dir, step)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	if cfg.meta != nil {
		if err := cfg.meta.run(dir, m); err != nil {
			return nil, err
		}
	}
	out, err := restoreFrom(root, m, step, likePaths, likes, to, cfg)
	return out, inDir(err, filepath.Join(dir, stepName(step)))
}

func restoreFrom(root *os.Root, m *manifest, step int, likePaths []pytree.Path, likes []*tensor.Tensor, to Placement, cfg restoreConfig) ([]*tensor.Tensor, error) {
	saved := make([]pytree.Path, len(m.Tensors))
	for i, e := range m.Tensors {
		saved[i] = e.path
	}
	entries, err := matchLeaves("restore", step, saved, m.Tensors, likePaths, cfg)
	if err != nil {
		return nil, err
	}
	mismatch := func(path string, format string, args ...any) error {
		return &Error{Op: "restore", Step: step, Path: path, Err: errf(ErrMismatch, format, args...)}
	}
	targets := make([]*target, len(likes))
	for i, e := range entries {
		x := likes[i]
		// Converted: see Restore (float64 only as it is).
		floats := e.dtype.IsFloat() && x.DType().IsFloat() && e.dtype != tensor.Float64 && x.DType() != tensor.Float64
		if (e.dtype != x.DType() && !floats) || !slices.Equal(e.Shape, x.Shape()) {
			// The saved dtype and shape are what the manifest records:
			// name it, since that is what a program changed since the
			// save, or what was edited, disagrees with.
			err := mismatch(e.Path, "the manifest records %s, the tree to restore into has %s", typeString(e.dtype.Abbrev(), e.Shape), typeString(x.DType().Abbrev(), x.Shape()))
			err.(*Error).File = manifestName
			return nil, err
		}
		t := &target{entry: e, like: x}
		s, sharded, err := placeLeaf(to, likePaths[i], x)
		if err != nil {
			return nil, mismatch(e.Path, "placement: %v", err)
		}
		t.sharded, t.sh = sharded, s
		if sharded {
			t.geo = newGeometry(s.Mesh(), s.Spec(), x.Shape())
			t.shape = t.geo.block
			seen := map[string]int{}
			for d := range s.Mesh().Devices() {
				off := t.geo.offset(d)
				key := fmt.Sprint(t.geo.index(d))
				b, ok := seen[key]
				if !ok {
					b = len(t.offsets)
					seen[key] = b
					t.offsets = append(t.offsets, off)
					t.owner = append(t.owner, d)
				}
				t.ofDev = append(t.ofDev, b)
			}
			// In a job of several processes, read only the blocks of this
			// process's devices, each by its first local holder.
			t.need = make([]bool, len(t.offsets))
			for d, dev := range s.Mesh().Devices() {
				if b := t.ofDev[d]; dev.IsLocal() && !t.need[b] {
					t.need[b], t.owner[b] = true, d
				}
			}
		} else {
			t.shape = x.Shape()
			t.offsets = [][]int{make([]int, x.Rank())}
			t.owner = []int{-1}
		}
		t.blocks = make([]*tensor.Tensor, len(t.offsets))
		for b := range t.blocks {
			if !sharded || t.need[b] {
				t.blocks[b] = tensor.Zeros(x.DType(), t.shape...)
			}
		}
		targets[i] = t
	}

	// Split the work into pieces: each sharded block goes to the device
	// that owns it; host tensors are cut into row slabs shared by
	// GOMAXPROCS host workers.
	hostWorkers := runtime.GOMAXPROCS(0)
	var pieces []*piece
	next := 0
	for _, t := range targets {
		if t.sharded {
			devs := t.sh.Mesh().Devices()
			for b, off := range t.offsets {
				if !t.need[b] {
					continue // another process's
				}
				pieces = append(pieces, &piece{t: t, blk: b, lo: off, size: t.shape, worker: devs[t.owner[b]].ID()})
			}
			continue
		}
		for _, box := range splitRows(t.shape, t.like.DType().Size(), hostWorkers) {
			pieces = append(pieces, &piece{t: t, blk: 0, lo: box[0], size: box[1], worker: -1 - next%hostWorkers})
			next++
		}
	}
	r := &reader{root: root, m: m, step: step, files: map[string]*os.File{}, starts: map[*shardEntry][]int64{}, chunks: map[chunkKey]*chunkEntry{}}
	defer r.close()
	work := map[int][]*pieceJob{}
	var workers []int
	for _, p := range pieces {
		jobs, err := r.plan(p)
		if err != nil {
			return nil, err
		}
		if _, ok := work[p.worker]; !ok {
			workers = append(workers, p.worker)
		}
		work[p.worker] = append(work[p.worker], jobs...)
	}
	errs := make([]error, len(workers))
	var wg sync.WaitGroup
	for i, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, j := range work[w] {
				if err := r.run(j); err != nil {
					errs[i] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	if err := firstError(errs, entries); err != nil {
		return nil, err
	}
	return assemble(targets)
}

// firstError returns the error about the earliest tensor of the tree, so
// that which error a broken checkpoint reports does not depend on timing.
func firstError(errs []error, entries []*tensorEntry) error {
	rank := map[string]int{}
	for i, e := range entries {
		rank[e.Path] = i
	}
	var best error
	bestRank := len(entries) + 1
	for _, err := range errs {
		if err == nil {
			continue
		}
		r := len(entries)
		var e *Error
		if errors.As(err, &e) {
			if k, ok := rank[e.Path]; ok {
				r = k
			}
		}
		if r < bestRank {
			best, bestRank = err, r
		}
	}
	return best
}

func placeLeaf(to Placement, path pytree.Path, x *tensor.Tensor) (s shard.Sharding, sharded bool, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("%v", r)
		}
	}()
	s, sharded, err = to.ShardingFor(path, x)
	if err != nil || !sharded {
		return s, sharded, err
	}
	if s.Mesh() == nil {
		return s, false, errors.New("zero Sharding")
	}
	if msg := checkSpec(s.Mesh(), s.Spec(), x.Shape()); msg != "" {
		return s, false, errors.New(msg)
	}
	return s, true, nil
}

// splitRows cuts a tensor of shape into at most n boxes of whole rows
// along its first dimension, each of at least 4 MiB; it returns [lo, size]
// pairs.
func splitRows(shape []int, esize, n int) [][2][]int {
	whole := [][2][]int{{make([]int, len(shape)), slices.Clone(shape)}}
	total, _ := numel(shape)
	if len(shape) == 0 || shape[0] < 2 || n < 2 {
		return whole
	}
	n = min(n, shape[0], max(1, total*esize/(4<<20)))
	if n < 2 {
		return whole
	}
	var out [][2][]int
	for k := 0; k < n; k++ {
		a, b := k*shape[0]/n, (k+1)*shape[0]/n
		lo := make([]int, len(shape))
		lo[0] = a
		size := slices.Clone(shape)
		size[0] = b - a
		out = append(out, [2][]int{lo, size})
	}
	return out
}

// assemble turns the filled blocks into the restored leaves: host tensors
// as they are, sharded ones put together on their meshes.
func assemble(targets []*target) ([]*tensor.Tensor, error) {
	out := make([]*tensor.Tensor, len(targets))
	for i, t := range targets {
		if !t.sharded {
			out[i] = t.blocks[0]
		} else {
			blocks := make([]*tensor.Tensor, t.sh.Mesh().Size())
			for d, dev := range t.sh.Mesh().Devices() {
				if dev.IsLocal() {
					blocks[d] = t.blocks[t.ofDev[d]]
				}
			}
			x, err := shard.FromBlocks(t.sh, t.like.Shape(), blocks)
			if err != nil {
				return nil, &Error{Op: "restore", Step: -1, Err: err}
			}
			out[i] = x
		}
		if axes := t.like.LogicalAxes(); len(axes) > 0 {
			out[i] = tensor.WithLogicalAxes(out[i], axes...)
		}
	}
	return out, nil
}
