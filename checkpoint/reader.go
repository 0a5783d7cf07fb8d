package checkpoint

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"sync"

	"github.com/gonox/gonox/internal/box"
	"github.com/gonox/gonox/tensor"
)

// reader decodes the chunks a restore needs, each at most once however
// many target blocks use it, and drops it once the last one has copied it.
type reader struct {
	root   *os.Root
	m      *manifest
	step   int
	files  map[string]*os.File // opened while planning, read concurrently
	starts map[*shardEntry][]int64
	chunks map[chunkKey]*chunkEntry // built while planning, read-only after
}

type chunkKey struct {
	s *shardEntry
	k int
}

type chunkEntry struct {
	mu   sync.Mutex
	done bool
	refs int
	d    decoded
	err  error
}

// decoded holds one decoded chunk: 32-bit words (float32, int32, and
// float32 from 16-bit storage), 16-bit elements (bfloat16 and float16
// leaves) or bytes (bool); one of them is set.
type decoded struct {
	w []uint32
	h []uint16
	b []byte
}

// pieceJob copies the box [lo, lo+size) of one saved shard into a piece.
type pieceJob struct {
	p      *piece
	s      *shardEntry
	lo     []int
	size   []int
	k0, k1 int // chunks covering the box, inclusive
}

func (r *reader) close() {
	for _, f := range r.files {
		f.Close()
	}
}

func (r *reader) fail(path, file string, kind error, format string, args ...any) error {
	return &Error{Op: "restore", Step: r.step, Path: path, File: file, Err: errf(kind, format, args...)}
}

// open opens a data file once, refusing anything that leaves the step
// directory (os.Root refuses .. and symlinks pointing outside) or is not
// a regular file. The file type is checked before opening (a FIFO would
// block the open forever, a device could do anything), and again on the
// opened file.
func (r *reader) open(path, name string) (*os.File, error) {
	if f, ok := r.files[name]; ok {
		return f, nil
	}
	if !validFileName(name) {
		return nil, r.fail(path, name, ErrUnsafePath, "file name would leave the step directory")
	}
	fi, err := r.root.Lstat(name)
	if err == nil && fi.Mode()&fs.ModeSymlink != 0 {
		// Symlinks inside the directory are followed by os.Root; this
		// package never writes one, so a symlink is refused outright when
		// it leads outside, and what it leads to is checked below.
		if fi, err = r.root.Stat(name); err != nil && !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, fs.ErrPermission) {
			return nil, r.fail(path, name, ErrUnsafePath, "symlink leads outside the step directory: %v", err)
		}
	}
	if err != nil {
		return nil, r.openFailure(path, name, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, r.fail(path, name, ErrCorrupt, "%v", notRegular(fi.Mode()))
	}
	f, err := openRegular(r.root, name)
	if err != nil {
		return nil, r.openFailure(path, name, err)
	}
	r.files[name] = f
	return f, nil
}

// plan lists the copies that fill piece p, counting the uses of each chunk.
func (r *reader) plan(p *piece) ([]*pieceJob, error) {
	e := p.t.entry
	epc := r.m.ChunkBytes / e.storedSize()
	var jobs []*pieceJob
	for _, s := range e.Shards {
		lo, size, ok := box.Intersect(p.lo, p.size, s.Offset, s.Shape)
		if !ok {
			continue
		}
		first := flatIndex(lo, s.Offset, s.Shape)
		last := first
		if len(size) > 0 {
			end := make([]int, len(lo))
			for i := range lo {
				end[i] = lo[i] + size[i] - 1
			}
			last = flatIndex(end, s.Offset, s.Shape)
		}
		j := &pieceJob{p: p, s: s, lo: lo, size: size, k0: first / epc, k1: last / epc}
		if _, err := r.open(e.Path, s.File); err != nil {
			return nil, err
		}
		if _, ok := r.starts[s]; !ok {
			st := make([]int64, len(s.Chunks))
			pos := s.Pos
			for k, f := range s.Chunks {
				st[k] = pos
				pos += f.Size
			}
			r.starts[s] = st
		}
		for k := j.k0; k <= j.k1; k++ {
			key := chunkKey{s, k}
			c := r.chunks[key]
			if c == nil {
				c = &chunkEntry{}
				r.chunks[key] = c
			}
			c.refs++
		}
		jobs = append(jobs, j)
	}
	return jobs, nil
}

// flatIndex returns the row-major index, inside a block at off of shape,
// of the global position g.
func flatIndex(g, off, shape []int) int {
	i := 0
	for k := range g {
		i = i*shape[k] + g[k] - off[k]
	}
	return i
}

// openFailure is the error for a data file that could not be checked or
// opened: missing or not a regular file (the step is damaged), not
// readable (the environment: no sentinel, so SkipCorrupt does not skip
// it), or refused by os.Root (the name leads outside the step directory).
func (r *reader) openFailure(path, name string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return r.fail(path, name, ErrCorrupt, "data file is missing")
	case errors.Is(err, errNotRegular):
		return r.fail(path, name, ErrCorrupt, "%v", err)
	case errors.Is(err, fs.ErrPermission):
		return &Error{Op: "restore", Step: r.step, Path: path, File: name, Err: err}
	}
	return r.fail(path, name, ErrUnsafePath, "%v", err)
}

var scratchPool = sync.Pool{New: func() any { return new([]byte) }}

// chunk returns chunk k of shard s decoded, decoding it on first use.
func (r *reader) chunk(e *tensorEntry, s *shardEntry, k int) (decoded, error) {
	c := r.chunks[chunkKey{s, k}]
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.done {
		return c.d, c.err
	}
	c.done = true
	c.d, c.err = r.decode(e, s, k)
	return c.d, c.err
}

// release drops one use of chunk k of s, freeing it after the last.
func (r *reader) release(s *shardEntry, k int) {
	c := r.chunks[chunkKey{s, k}]
	c.mu.Lock()
	c.refs--
	if c.refs == 0 {
		c.d = decoded{}
	}
	c.mu.Unlock()
}

func (r *reader) decode(e *tensorEntry, s *shardEntry, k int) (decoded, error) {
	path := e.Path
	f := r.files[s.File]
	fr := s.Chunks[k]
	epc := int64(r.m.ChunkBytes / e.storedSize())
	total := int64(blockElems(s.Shape))
	n := min(epc, total-int64(k)*epc)
	buf := make([]byte, fr.Size)
	got, err := f.ReadAt(buf, r.starts[s][k])
	if int64(got) < fr.Size {
		if err == nil || errors.Is(err, io.EOF) {
			return decoded{}, r.fail(path, s.File, ErrCorrupt, "truncated: chunk %d needs bytes [%d, %d), the file has %d", k, r.starts[s][k], r.starts[s][k]+fr.Size, r.starts[s][k]+int64(got))
		}
		return decoded{}, r.fail(path, s.File, ErrCorrupt, "reading chunk %d: %v", k, err)
	}
	if sum := checksum(buf); sum != fr.CRC32C {
		return decoded{}, r.fail(path, s.File, ErrCorrupt, "checksum mismatch in chunk %d (crc32c %08x, manifest says %08x)", k, sum, fr.CRC32C)
	}
	sp := scratchPool.Get().(*[]byte)
	defer scratchPool.Put(sp)
	var d decoded
	switch {
	case isHalf(e.dtype):
		d.h = make([]uint16, n)
		*sp, err = decodeChunk16(buf, *sp, d.h)
	case e.dtype.Size() >= 4:
		d.w = make([]uint32, int(n)*wordsPerElem(e.dtype))
		*sp, err = decodeChunk(buf, *sp, e.storage, d.w, nil)
	case e.dtype == tensor.Uint8:
		d.b = make([]byte, n)
		*sp, err = decodeBytes(buf, *sp, d.b)
	default:
		d.b = make([]byte, n)
		*sp, err = decodeChunk(buf, *sp, e.storage, nil, d.b)
	}
	if err != nil {
		return decoded{}, r.fail(path, s.File, ErrCorrupt, "chunk %d: %v", k, err)
	}
	return d, nil
}

func blockElems(shape []int) int {
	n, _ := numel(shape)
	return n
}

// run copies one job's box from the saved shard into its piece's block.
func (r *reader) run(j *pieceJob) (err error) {
	p := j.p
	t := p.t
	var dst decoded
	if isHalf(t.blocks[p.blk].DType()) {
		dst.h = halves(t.blocks[p.blk])
	} else {
		dst.w, dst.b = words(t.blocks[p.blk])
	}
	doff := t.offsets[p.blk]
	dshape := t.shape
	epc := r.m.ChunkBytes / t.entry.storedSize()
	cur := -1
	var c decoded
	released := j.k0 // chunks below this have been released
	defer func() {
		for k := released; k <= j.k1; k++ {
			r.release(j.s, k)
		}
	}()
	from, to := t.entry.dtype, t.blocks[p.blk].DType() // float dtypes may differ
	wpe := wordsPerElem(to)
	// copyRun copies n elements starting at flat index si of the shard
	// to flat index di of the block, across chunk boundaries.
	copyRun := func(di, si, n int) error {
		for n > 0 {
			k := si / epc
			if k != cur {
				for ; released < k; released++ {
					r.release(j.s, released)
				}
				var err error
				c, err = r.chunk(t.entry, j.s, k)
				if err != nil {
					return err
				}
				cur = k
			}
			o := si - k*epc
			m := min(n, epc-o)
			switch {
			case dst.w != nil && c.w != nil:
				copy(dst.w[di*wpe:(di+m)*wpe], c.w[o*wpe:(o+m)*wpe])
			case dst.h != nil && c.h != nil && from == to:
				copy(dst.h[di:di+m], c.h[o:o+m])
			case dst.b != nil:
				copy(dst.b[di:di+m], c.b[o:o+m])
			default:
				convertRun(dst, di, to, c, o, from, m)
			}
			di, si, n = di+m, si+m, n-m
		}
		return nil
	}
	rank := len(j.size)
	if rank == 0 {
		return copyRun(0, 0, 1)
	}
	dstr, sstr := box.Strides(dshape), box.Strides(j.s.Shape)
	idx := make([]int, rank-1)
	run := j.size[rank-1]
	for {
		di, si := 0, 0
		for k := 0; k < rank; k++ {
			g := j.lo[k]
			if k < rank-1 {
				g += idx[k]
			}
			di += (g - doff[k]) * dstr[k]
			si += (g - j.s.Offset[k]) * sstr[k]
		}
		if err := copyRun(di, si, run); err != nil {
			return err
		}
		k := rank - 2
		for ; k >= 0; k-- {
			idx[k]++
			if idx[k] < j.size[k] {
				break
			}
			idx[k] = 0
		}
		if k < 0 {
			return nil
		}
	}
}

// convertRun writes m elements of the decoded chunk c (of the saved dtype
// from) from o on into dst (of dtype to) at di, for float dtypes that
// differ: widening to float32 is exact, narrowing rounds to nearest even
// (storage.go's rules), and bfloat16 and float16 go through float32.
func convertRun(dst decoded, di int, to tensor.DType, c decoded, o int, from tensor.DType, m int) {
	wide := func(i int) uint32 { // element o+i of c as float32 bits
		if c.w != nil {
			return c.w[o+i]
		}
		return widen16(storageOf(from), c.h[o+i])
	}
	if dst.w != nil {
		for i := range m {
			dst.w[di+i] = wide(i)
		}
		return
	}
	s := storageOf(to)
	for i := range m {
		dst.h[di+i] = widen16Inverse(s, wide(i))
	}
}
