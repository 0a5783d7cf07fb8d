package checkpoint

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gonox/gonox/shard"
)

// In a job of several processes (shard.Install, package shard/mpi) every
// process calls Save with the same arguments. Each writes the blocks of
// its own devices (process 0 also the host tensors) into one temporary
// directory that process 0 created, in parallel; the processes then
// exchange the sizes and checksums of what they wrote (which is also the
// barrier), and process 0 writes the manifest and renames the directory
// into place. dir must be on a file system all processes share.

// filled is what one process wrote of one shard entry.
type filled struct {
	T, S   int // indices in manifest.Tensors and its Shards
	File   string
	Pos    int64
	Size   int64
	Chunks []*chunkRecord
}

// report is one process's message in a distributed commit.
type report struct {
	Err    string
	Tmp    string
	Plan   uint32 // planFingerprint, in the first exchange
	Filled []filled
}

func exchangeReports(r report) ([]report, error) {
	b, err := json.Marshal(r)
	if err != nil {
		return nil, err
	}
	all := shard.AllGatherProcesses(b)
	out := make([]report, len(all))
	for i, a := range all {
		if err := json.Unmarshal(a, &out[i]); err != nil {
			return nil, fmt.Errorf("process %d sent a bad report: %w", i, err)
		}
	}
	return out, nil
}

// firstReportError returns the first process's error, naming it.
func firstReportError(rs []report) error {
	for i, r := range rs {
		if r.Err != "" {
			return fmt.Errorf("process %d: %s", i, r.Err)
		}
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// commitDistributed is commit for a job of several processes.
func (p *savePlan) commitDistributed(dir string) (err error) {
	fail := func(file string, e error) error {
		return &Error{Op: "save", Step: p.step, File: file, Err: e}
	}
	rank := shard.ProcessIndex()
	// Process 0 makes the temporary directory; everyone learns its name
	// and checks that all are saving the same plan.
	mine := report{Plan: p.fingerprint()}
	if rank == 0 {
		mine.Tmp, err = p.makeTmp(dir)
		mine.Err = errString(err)
	}
	rs, err := exchangeReports(mine)
	if err != nil {
		if rank == 0 && mine.Tmp != "" {
			p.dropTmp(mine.Tmp, err)
		}
		return fail("", err)
	}
	tmp := rs[0].Tmp
	if rank == 0 && tmp != "" {
		defer func() { p.dropTmp(tmp, err) }()
	}
	if err := firstReportError(rs); err != nil {
		return fail("", err)
	}
	for i, r := range rs {
		if r.Plan != rs[0].Plan {
			return fail("", fmt.Errorf("process %d saves another tree, sharding or metadata record than process 0: every process must call Save with the same arguments", i))
		}
	}
	// Everyone writes its blocks, then reports what it wrote.
	mine = report{Err: errString(p.writeAll(tmp))}
	if rank != 0 {
		for ti, e := range p.m.Tensors {
			for si, s := range e.Shards {
				if p.wrote(s) {
					mine.Filled = append(mine.Filled, filled{T: ti, S: si, File: s.File, Pos: s.Pos, Size: s.Size, Chunks: s.Chunks})
				}
			}
		}
	}
	rs, err = exchangeReports(mine)
	if err != nil {
		return fail("", err)
	}
	if err := firstReportError(rs); err != nil {
		return fail("", err)
	}
	// Process 0 completes the manifest and commits; then tells the others.
	if rank == 0 {
		for _, r := range rs[1:] {
			for _, f := range r.Filled {
				if f.T < 0 || f.T >= len(p.m.Tensors) || f.S < 0 || f.S >= len(p.m.Tensors[f.T].Shards) {
					err = fmt.Errorf("a process reported shard %d of tensor %d, which the plan does not have", f.S, f.T)
					break
				}
				s := p.m.Tensors[f.T].Shards[f.S]
				s.File, s.Pos, s.Size, s.Chunks = f.File, f.Pos, f.Size, f.Chunks
			}
		}
		if err == nil {
			err = p.publish(dir, tmp)
		}
		mine = report{Err: errString(err)}
	} else {
		mine = report{}
	}
	rs, xerr := exchangeReports(mine)
	if xerr != nil {
		return fail("", xerr)
	}
	if rank == 0 {
		return err
	}
	if e := firstReportError(rs); e != nil {
		return fail("", e)
	}
	return nil
}

// dropTmp forgets the temporary directory of a save of process 0, and
// removes it if the save failed.
func (p *savePlan) dropTmp(tmp string, err error) {
	if err != nil {
		os.RemoveAll(tmp)
	}
	inProgress.Lock()
	delete(inProgress.dirs, tmp)
	inProgress.Unlock()
}

// fingerprint is a checksum of what the plan saves, the same on every
// process of a job that saves the same thing: the step, the format, the
// metadata record, each tensor's path, dtype, shape, storage, mesh, spec
// and blocks. It leaves out what legitimately differs between processes:
// the time, the metrics (process 0's are saved) and which host file a
// host tensor goes to (GOMAXPROCS may differ).
func (p *savePlan) fingerprint() uint32 {
	type block struct {
		Offset, Shape []int
		Device        int
	}
	type tensor struct {
		Path, DType, Storage string
		Shape                []int
		Mesh                 *meshEntry
		Spec                 [][]string
		Blocks               []block
	}
	plan := struct {
		Step, Version, ChunkBytes int
		Metadata                  *metadataRecord
		Tensors                   []tensor
	}{Step: p.m.Step, Version: p.m.Version, ChunkBytes: p.m.ChunkBytes, Metadata: p.m.Metadata}
	for _, e := range p.m.Tensors {
		t := tensor{Path: e.Path, DType: e.DType, Storage: e.Storage, Shape: e.Shape, Mesh: e.Mesh, Spec: e.Spec}
		for _, s := range e.Shards {
			t.Blocks = append(t.Blocks, block{s.Offset, s.Shape, s.Device})
		}
		plan.Tensors = append(plan.Tensors, t)
	}
	b, err := json.Marshal(plan)
	if err != nil {
		return 0 // cannot happen: plain data
	}
	return checksum(b)
}

// wrote reports whether one of this process's writers wrote s.
func (p *savePlan) wrote(s *shardEntry) bool {
	for _, w := range p.writers {
		for _, j := range w.jobs {
			if j.entry == s {
				return true
			}
		}
	}
	return false
}

// makeTmp checks that the step may be written, removes leftovers and
// creates the temporary directory of the save.
func (p *savePlan) makeTmp(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	final := filepath.Join(dir, stepName(p.step))
	if _, err := os.Lstat(final); err == nil && !p.cfg.overwrite {
		return "", fmt.Errorf("%w: %s (use Overwrite to replace it)", ErrExists, final)
	}
	_ = cleanup(dir)
	tmp, err := os.MkdirTemp(dir, tmpPrefix+stepName(p.step)+"-")
	if err != nil {
		return "", err
	}
	inProgress.Lock()
	inProgress.dirs[tmp] = true
	inProgress.Unlock()
	return tmp, nil
}
