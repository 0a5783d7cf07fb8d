package checkpoint

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/shard"
	"github.com/gonox/gonox/tensor"
	"github.com/klauspost/compress/huff0"
)

// SaveOption configures Save.
type SaveOption func(*saveConfig)

type saveConfig struct {
	overwrite  bool
	metrics    map[string]float64
	chunkBytes int
	onUnsynced func(error)
	floats     FloatStorage
	meta       Schema // WithMetadata
	metaValue  any
	metaSet    bool
}

// StoreFloatsAs stores the float32 leaves rounded to bfloat16
// (AsBFloat16) or float16 (AsFloat16), as FloatStorage describes: half the
// raw bytes, and after byte shuffling and compression much less than half
// of float32 storage, since the sign and exponent byte compresses and
// float32's incompressible low mantissa bytes are gone. For N(0, 0.02)
// weights, BenchmarkStorageRatio measured 4 bytes of float32 stored in
// 1.34 bytes as bfloat16 (2.99x) and 1.69 as float16 (2.37x), against
// 3.34 for float32 storage (1.20x): go test ./checkpoint -run XXX -bench
// StorageRatio (Intel Xeon, Sapphire Rapids). The
// manifest records it; Restore widens the values back to float32 exactly,
// so a restored leaf holds the rounded values. Use it for weights to
// publish or to evaluate, not for a training state that must resume bit
// for bit (optimizer moments in particular lose precision). AsFloat32 is
// the default.
func StoreFloatsAs(s FloatStorage) SaveOption { return func(c *saveConfig) { c.floats = s } }

// OnUnsynced sets the function Save calls, instead of logging with
// log/slog at Warn level, when the step is complete and in place but the
// final fsync of dir (which makes the rename that published it durable)
// failed. The save has succeeded: the step is visible, and every file in
// it was synced before the rename, so readers and a restart of the
// process see it; only a power loss or kernel crash before the system
// writes the directory back could lose the rename and with it the step,
// leaving the earlier steps intact. Save returns nil in that case, since
// failing would tell the caller that the data is not there when it is; f
// gets an *Error (Op "save") naming the directory and the fsync error.
func OnUnsynced(f func(err error)) SaveOption { return func(c *saveConfig) { c.onUnsynced = f } }

// Overwrite lets Save replace a step that exists. The replacement is
// atomic: readers see the old checkpoint or the new one, never a mixture,
// and a crash leaves one of the two in place.
func Overwrite() SaveOption { return func(c *saveConfig) { c.overwrite = true } }

// WithMetrics stores metrics (a validation loss, an accuracy) in the
// step's manifest. A Manager uses them to keep the best steps; Metrics
// reads them back. Values must be finite.
func WithMetrics(metrics map[string]float64) SaveOption {
	return func(c *saveConfig) {
		c.metrics = make(map[string]float64, len(metrics))
		for k, v := range metrics {
			c.metrics[k] = v
		}
	}
}

// withChunkBytes sets the raw size of a chunk (tests use small
// chunks to exercise shards of several chunks).
func withChunkBytes(n int) SaveOption { return func(c *saveConfig) { c.chunkBytes = n } }

// Save writes the tensor leaves of tree as checkpoint step of dir (created
// if needed), in the directory dir/<step as 8 digits> (see the package
// documentation for the layout).
//
// The leaves are written in parallel, each distinct block of a sharded
// tensor once, by a goroutine of the device that holds it (replicas are
// not written again), host tensors as one block each. Each block is
// byte-shuffled and zstd-compressed in chunks that carry a CRC-32C in the
// manifest. Only tensors are saved: the rest of tree (ints, strings,
// funcs) is structure that Restore takes from its like argument, so keep
// counters that must survive (the step, a data loader's position, a PRNG
// key) as int32 tensors in the tree.
//
// Save is atomic: it writes into a temporary directory inside dir, syncs
// it to disk and renames it into place only when complete, so a crash at
// any point leaves the steps saved before intact; the next Save removes
// what an interrupted one left behind. Saving a step that exists is an
// error wrapping ErrExists unless Overwrite is given. One process at a
// time may save into dir; within it, Saves of different steps may run
// concurrently.
//
// WithMetrics stores metrics with the step, WithMetadata the program's
// record of what the step holds (its configuration), StoreFloatsAs a
// narrower storage for float32 leaves. A tree that holds no tensor is an
// error: there would be nothing to restore.
func Save(dir string, step int, tree any, opts ...SaveOption) error {
	if err := checkDir("save", step, dir); err != nil {
		return err
	}
	p, err := prepare(step, tree, opts)
	if err != nil {
		return err
	}
	return p.commit(dir)
}

// savePlan is a save whose tensors are chosen and referenced (tensors are
// immutable, so holding them is a snapshot) but not yet written.
type savePlan struct {
	step    int
	cfg     saveConfig
	m       *manifest
	writers []*writer
}

// writer writes one data file: the blocks of one device, or a share of
// the host tensors.
type writer struct {
	file  string
	jobs  []saveJob
	bytes int64
}

type saveJob struct {
	path    string
	entry   *shardEntry
	block   *tensor.Tensor // host tensor with the block's elements
	storage FloatStorage   // how float32 elements are stored
}

// prepare plans the save of tree: it takes references to every block to
// write and builds the manifest, leaving chunk sizes and checksums to the
// writers.
func prepare(step int, tree any, opts []SaveOption) (*savePlan, error) {
	cfg := saveConfig{chunkBytes: defaultChunkBytes}
	for _, o := range opts {
		o(&cfg)
	}
	fail := func(path string, format string, args ...any) error {
		return &Error{Op: "save", Step: step, Path: path, Err: fmt.Errorf(format, args...)}
	}
	if step < 0 {
		return nil, fail("", "step %d is negative", step)
	}
	if cfg.chunkBytes <= 0 || cfg.chunkBytes%8 != 0 || cfg.chunkBytes > maxChunkBytes {
		return nil, fail("", "chunk size %d is not a positive multiple of 8 up to %d", cfg.chunkBytes, maxChunkBytes)
	}
	if cfg.floats != AsFloat32 && cfg.floats != AsBFloat16 && cfg.floats != AsFloat16 {
		return nil, fail("", "checkpoints store floats as float32, bfloat16 or float16, not %v", cfg.floats)
	}
	for k, v := range cfg.metrics {
		if k == "" || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, fail("", "metric %q = %v: metrics need a name and a finite value", k, v)
		}
	}
	m := &manifest{
		Format: formatName, Version: formatVersion, Step: step,
		Time: time.Now().UTC().Format(time.RFC3339Nano), Codec: codecName,
		ChunkBytes: cfg.chunkBytes, Metrics: cfg.metrics, Tensors: []*tensorEntry{},
	}
	if cfg.metaSet {
		// Encoded now: the record is part of the snapshot a background
		// save writes, whatever the program changes afterwards.
		rec, err := newRecord(cfg.meta, cfg.metaValue)
		if err != nil {
			return nil, fail("", "%v", err)
		}
		m.Metadata, m.Version = rec, formatVersionMetadata
	}
	p := &savePlan{step: step, cfg: cfg, m: m}
	byFile := map[string]*writer{}
	var hostJobs []saveJob
	paths, leaves := pytree.LeavesWithPath(tree)
	if len(leaves) == 0 {
		return nil, fail("", "%T holds no tensor, so there is nothing to save (nil tensors, unexported fields and fields tagged pytree:\"static\" are not leaves)", tree)
	}
	for i, x := range leaves {
		path := paths[i].String()
		if x.Local() != nil {
			return nil, fail(path, "%v is a block inside shard.Map; save global tensors", x)
		}
		switch x.DType() {
		case tensor.Float32, tensor.Int32, tensor.Bool, tensor.BFloat16, tensor.Float16, tensor.Float64, tensor.Int64, tensor.Uint8:
		default:
			return nil, fail(path, "unsupported dtype %v", x.DType())
		}
		e := &tensorEntry{Path: path, DType: dtypeName(x.DType()), Shape: x.Shape(), Shards: []*shardEntry{}, dtype: x.DType()}
		if x.DType() == tensor.Float32 && cfg.floats != AsFloat32 {
			e.storage, e.Storage = cfg.floats, cfg.floats.manifestName()
			m.Version = max(m.Version, formatVersionStorage)
		}
		if isHalf(x.DType()) {
			m.Version = max(m.Version, formatVersionStorage)
		}
		if isWide(x.DType()) {
			m.Version = max(m.Version, formatVersionWide)
		}
		m.Tensors = append(m.Tensors, e)
		raw := func(b *tensor.Tensor) int64 { return int64(b.Size() * e.storedSize()) }
		s, sharded := shard.ShardingOf(x)
		if !sharded {
			if x.Layout() != nil {
				x = shard.Gather(x)
			}
			se := &shardEntry{Offset: make([]int, x.Rank()), Shape: x.Shape(), Device: -1, Raw: raw(x), Chunks: []*chunkRecord{}}
			e.Shards = append(e.Shards, se)
			if shard.ProcessIndex() == 0 { // in a job of several processes, process 0 writes host tensors
				hostJobs = append(hostJobs, saveJob{path: path, entry: se, block: x, storage: e.storage})
			}
			continue
		}
		mesh := s.Mesh()
		spec := s.Spec()
		e.Mesh = &meshEntry{Axes: mesh.AxisNames(), Shape: mesh.Shape()}
		for _, d := range mesh.Devices() {
			e.Mesh.Devices = append(e.Mesh.Devices, d.ID())
		}
		e.Spec = make([][]string, len(spec))
		for k, d := range spec {
			e.Spec[k] = append([]string{}, d...)
		}
		g := newGeometry(mesh, spec, x.Shape())
		blocks := shard.Blocks(x)
		seen := map[string]bool{}
		for d, dev := range mesh.Devices() {
			off := g.offset(d)
			key := fmt.Sprint(g.index(d)) // not the offset: blocks of an empty tensor share offsets
			if seen[key] {
				continue // a replica of a block written already
			}
			seen[key] = true
			file := fmt.Sprintf("d%04d.bin", dev.ID())
			se := &shardEntry{Offset: off, Shape: slices.Clone(g.block), Device: dev.ID(), File: file, Raw: int64(blockElems(g.block) * e.storedSize()), Chunks: []*chunkRecord{}}
			e.Shards = append(e.Shards, se)
			if blocks[d] == nil {
				continue // the block of another process's device: that process writes it
			}
			w := byFile[file]
			if w == nil {
				w = &writer{file: file}
				byFile[file] = w
				p.writers = append(p.writers, w)
			}
			w.jobs = append(w.jobs, saveJob{path: path, entry: se, block: blocks[d], storage: e.storage})
			w.bytes += se.Raw
		}
	}
	// Spread host tensors over GOMAXPROCS files, largest first onto the
	// least loaded, so they compress in parallel.
	if len(hostJobs) > 0 {
		n := min(len(hostJobs), runtime.GOMAXPROCS(0))
		hw := make([]*writer, n)
		for k := range hw {
			hw[k] = &writer{file: fmt.Sprintf("h%04d.bin", k)}
		}
		order := slices.Clone(hostJobs)
		sort.SliceStable(order, func(a, b int) bool { return order[a].entry.Raw > order[b].entry.Raw })
		for _, j := range order {
			w := slices.MinFunc(hw, func(a, b *writer) int { return int(a.bytes - b.bytes) })
			j.entry.File = w.file
			w.jobs = append(w.jobs, j)
			w.bytes += j.entry.Raw
		}
		// Keep each host file's tensors in tree order.
		idx := map[*shardEntry]int{}
		for k, j := range hostJobs {
			idx[j.entry] = k
		}
		for _, w := range hw {
			if len(w.jobs) == 0 {
				continue
			}
			sort.Slice(w.jobs, func(a, b int) bool { return idx[w.jobs[a].entry] < idx[w.jobs[b].entry] })
			p.writers = append(p.writers, w)
		}
	}
	return p, nil
}

// geometry is how a sharding cuts a tensor into blocks.
type geometry struct {
	mesh  *shard.Mesh
	spec  shard.Spec
	shape []int
	parts []int
	block []int
	axis  map[string]int // mesh axis name -> position
}

func newGeometry(mesh *shard.Mesh, spec shard.Spec, shape []int) geometry {
	g := geometry{mesh: mesh, spec: spec, shape: shape, parts: make([]int, len(shape)), block: make([]int, len(shape)), axis: map[string]int{}}
	for k, a := range mesh.AxisNames() {
		g.axis[a] = k
	}
	sizes := mesh.Shape()
	for i := range shape {
		g.parts[i] = 1
		if i < len(spec) {
			for _, a := range spec[i] {
				g.parts[i] *= sizes[g.axis[a]]
			}
		}
		g.block[i] = shape[i] / g.parts[i]
	}
	return g
}

// index returns, for each dimension, the number of the block that the
// device at mesh index d holds.
func (g geometry) index(d int) []int {
	c := g.mesh.Coords(d)
	sizes := g.mesh.Shape()
	idx := make([]int, len(g.shape))
	for i := range idx {
		if i < len(g.spec) {
			for _, a := range g.spec[i] {
				k := g.axis[a]
				idx[i] = idx[i]*sizes[k] + c[k]
			}
		}
	}
	return idx
}

// offset returns the global index of the first element of the block that
// the device at mesh index d holds.
func (g geometry) offset(d int) []int {
	off := g.index(d)
	for i := range off {
		off[i] *= g.block[i]
	}
	return off
}

// stepName is the directory name of a step: 8 digits, zero-padded, so
// that names sort like numbers (longer for steps beyond 99,999,999).
func stepName(step int) string { return fmt.Sprintf("%08d", step) }

// parseStepName returns the step a directory name stands for, accepting
// only names stepName writes.
func parseStepName(name string) (int, bool) {
	if len(name) < 8 {
		return 0, false
	}
	for _, c := range []byte(name) {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	n, err := strconv.Atoi(name)
	if err != nil || stepName(n) != name {
		return 0, false
	}
	return n, true
}

const (
	tmpPrefix = ".tmp-"
	oldPrefix = ".old-"
)

// inProgress holds the temporary directories of the saves running in this
// process, which cleanup must leave alone.
var inProgress = struct {
	sync.Mutex
	dirs map[string]bool
}{dirs: map[string]bool{}}

// commit writes the planned checkpoint and makes it visible atomically.
func (p *savePlan) commit(dir string) (err error) {
	if shard.ProcessCount() > 1 {
		return p.commitDistributed(dir)
	}
	fail := func(file string, e error) error {
		return &Error{Op: "save", Step: p.step, File: file, Err: e}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fail("", err)
	}
	final := filepath.Join(dir, stepName(p.step))
	if _, err := os.Lstat(final); err == nil && !p.cfg.overwrite {
		return fail("", fmt.Errorf("%w: %s (use Overwrite to replace it)", ErrExists, final))
	}
	// Leftovers are removed on a best-effort basis: one that cannot be
	// removed now must not stop training from saving.
	_ = cleanup(dir)
	tmp, err := os.MkdirTemp(dir, tmpPrefix+stepName(p.step)+"-")
	if err != nil {
		return fail("", err)
	}
	inProgress.Lock()
	inProgress.dirs[tmp] = true
	inProgress.Unlock()
	defer func() {
		if err != nil {
			os.RemoveAll(tmp)
		}
		inProgress.Lock()
		delete(inProgress.dirs, tmp)
		inProgress.Unlock()
	}()

	if err := p.writeAll(tmp); err != nil {
		return err
	}
	return p.publish(dir, tmp)
}

// publish writes the manifest into tmp and renames tmp into place as the
// plan's step of dir: the commit of a save, in one process or (on process
// 0) in a job of several. A failure to sync dir after the rename is
// reported through OnUnsynced, not returned: the step is in place.
func (p *savePlan) publish(dir, tmp string) error {
	fail := func(file string, e error) error {
		return &Error{Op: "save", Step: p.step, File: file, Err: e}
	}
	final := filepath.Join(dir, stepName(p.step))
	data, err := p.m.encode()
	if err != nil {
		return fail(manifestName, err)
	}
	if len(data) > maxManifestBytes {
		return fail(manifestName, fmt.Errorf("the manifest would take %d bytes, more than Restore reads (%d): save fewer tensors or larger chunks", len(data), maxManifestBytes))
	}
	if err := writeFileSync(filepath.Join(tmp, manifestName), data); err != nil {
		return fail(manifestName, err)
	}
	if err := syncDir(tmp); err != nil {
		return fail("", err)
	}
	if _, err := os.Lstat(final); err == nil {
		if !p.cfg.overwrite {
			return fail("", fmt.Errorf("%w: %s appeared during the save", ErrExists, final))
		}
		if err := replaceDir(tmp, final); err != nil {
			return fail("", err)
		}
	} else if err := os.Rename(tmp, final); err != nil {
		return fail("", err)
	}
	if err := syncDir(dir); err != nil {
		// The step is in place (see OnUnsynced): report, do not fail.
		e := &Error{Op: "save", Step: p.step, Dir: final, Err: fmt.Errorf("step saved, but syncing %s after the rename failed (it is durable once the system writes the directory back): %w", dir, err)}
		if p.cfg.onUnsynced != nil {
			p.cfg.onUnsynced(e)
		} else {
			slog.Warn(e.Error())
		}
	}
	return nil
}

// run compresses and writes the writer's blocks, filling in their chunks.
func (w *writer) run(tmp string, chunk, step int) (err error) {
	var cur string
	defer func() {
		if err != nil {
			err = &Error{Op: "save", Step: step, Path: cur, File: w.file, Err: err}
		}
	}()
	f, err := os.OpenFile(filepath.Join(tmp, w.file), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	bw := bufio.NewWriterSize(f, 1<<20)
	scratch := make([]byte, chunk)
	var hs huff0.Scratch
	out := make([]byte, 0, chunk+chunk/64+1024)
	var pos int64
	for _, j := range w.jobs {
		cur = j.path
		e := j.entry
		e.Pos = pos
		var ws []uint32
		var bs []byte
		var hs16 []uint16
		var n, esize int
		wpe := wordsPerElem(j.block.DType()) // 2 for the 8-byte dtypes
		if isHalf(j.block.DType()) {
			hs16 = halves(j.block)
			n, esize = len(hs16), 2
		} else {
			ws, bs = words(j.block)
			n, esize = len(bs), 1
			if ws != nil {
				n, esize = len(ws)/wpe, 4*wpe
			}
		}
		if j.storage != AsFloat32 {
			esize = j.storage.size()
		}
		epc := chunk / esize
		for k := 0; k < n; k += epc {
			hi := min(k+epc, n)
			if hs16 != nil {
				out = encodeChunk16(out[:0], scratch, &hs, hs16[k:hi])
			} else if j.storage != AsFloat32 {
				out = encodeChunkHalf(out[:0], scratch, &hs, j.storage, ws[k:hi])
			} else if ws != nil {
				float := j.block.DType() == tensor.Float32 || j.block.DType() == tensor.Float64
				out = encodeChunk(out[:0], scratch, &hs, float, ws[k*wpe:hi*wpe], nil)
			} else {
				out = encodeChunk(out[:0], scratch, &hs, false, nil, bs[k:hi])
			}
			if _, err := bw.Write(out); err != nil {
				return err
			}
			e.Chunks = append(e.Chunks, &chunkRecord{Size: int64(len(out)), CRC32C: checksum(out)})
			pos += int64(len(out))
		}
		e.Size = pos - e.Pos
	}
	cur = ""
	if err := bw.Flush(); err != nil {
		return err
	}
	return f.Sync()
}

func writeFileSync(name string, data []byte) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// syncDir flushes a directory's entries (new files, renames) to disk;
// tests replace it to inject failures.
var syncDir = syncDirectory

func syncDirectory(dir string) error {
	d, err := os.OpenFile(dir, os.O_RDONLY|oNonblock, 0)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}

// replaceDir atomically replaces the directory final by tmp, and removes
// the old contents.
func replaceDir(tmp, final string) error {
	if err := exchange(tmp, final); err == nil {
		// tmp now holds the old step. The new one is in place, so the
		// save has succeeded whatever happens next: what this removal
		// leaves (after a crash or an error) the next save's cleanup
		// removes.
		removeAll(tmp)
		return nil
	}
	// No atomic exchange here: move the old step aside under a name that
	// cleanup recognises and puts back if the second rename never happens.
	dir, base := filepath.Split(final)
	old, err := os.MkdirTemp(dir, oldPrefix+base+"-")
	if err != nil {
		return err
	}
	if err := os.Remove(old); err != nil {
		return err
	}
	if err := os.Rename(final, old); err != nil {
		return err
	}
	if err := os.Rename(tmp, final); err != nil {
		os.Rename(old, final)
		return err
	}
	removeAll(old) // as above: the save has succeeded; cleanup retries
	return nil
}

// cleanup removes what interrupted saves left in dir: temporary
// directories not in use by a save of this process, and old steps moved
// aside by an interrupted overwrite (put back if the new one never arrived).
func cleanup(dir string) error {
	ents, err := readDir(dir)
	if err != nil {
		return err
	}
	inProgress.Lock()
	defer inProgress.Unlock()
	var errs []error
	for _, e := range ents {
		name := e.Name()
		full := filepath.Join(dir, name)
		if inProgress.dirs[full] {
			continue
		}
		switch {
		case strings.HasPrefix(name, tmpPrefix):
			errs = append(errs, os.RemoveAll(full))
		case strings.HasPrefix(name, oldPrefix):
			rest := strings.TrimPrefix(name, oldPrefix)
			base, _, ok := strings.Cut(rest, "-")
			if _, isStep := parseStepName(base); ok && isStep {
				if _, err := os.Lstat(filepath.Join(dir, base)); errors.Is(err, fs.ErrNotExist) {
					errs = append(errs, os.Rename(full, filepath.Join(dir, base)))
					continue
				}
			}
			errs = append(errs, os.RemoveAll(full))
		}
	}
	return errors.Join(errs...)
}

// writeAll runs every writer of the plan into dir, each on its own
// goroutine: one per device holding blocks (the device's own "thread"),
// plus those sharing host tensors. It returns when all have finished.
func (p *savePlan) writeAll(dir string) error {
	errs := make([]error, len(p.writers))
	var wg sync.WaitGroup
	for i, w := range p.writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = w.run(dir, p.m.ChunkBytes, p.step)
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
