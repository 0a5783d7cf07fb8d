package shard

import (
	"sync"

	"github.com/gonox/gonox/pytree"
	"github.com/gonox/gonox/tensor"
)

// This file holds Prefetch: FSDP's gathers of the next layer's weights,
// started in the background while the current layer computes.

// Prefetch starts gathering whole, in the background, every leaf of tree
// that is split over a mesh spanning processes (a layer's parameters
// under FSDP), and returns at once. The first op that then gathers one of
// those arrays whole (a matmul of a weight FSDP splits, say) takes the
// prefetched blocks instead of exchanging them itself, and drops them
// after use, as it does its own gathers. Called at the start of layer i
// with layer i+1's parameters, it moves the next layer's weights while
// this one computes:
//
//	for i, b := range blocks {
//		if i+1 < len(blocks) {
//			shard.Prefetch(blocks[i+1])
//		}
//		x = b.Forward(x)
//	}
//
// Leaves that are host tensors, replicated, blocks inside shard.Map, or
// on a mesh of one process are left alone (in one process a gather is a
// copy, with nothing to hide), so the loop runs unchanged on one device,
// on one process and under mpirun. Prefetched arrays that no op gathered
// by the second Prefetch call after theirs are dropped.
//
// Prefetch is collective like the ops it serves: every process of the
// mesh calls it with the same trees, in the same order relative to the
// mesh's other operations. The gathers run on a communicator of the
// mesh's own, one Prefetch call after another, on a goroutine that ends
// when its call's gathers are done; a gather's failure (a process
// unreachable for GONOX_TIMEOUT) ends the job as a synchronous one does.
func Prefetch(tree any) {
	var meshes []*Mesh
	jobs := map[*Mesh][]*prefetchJob{}
	for _, x := range pytree.Leaves(tree) {
		if x == nil || x.Local() != nil {
			continue
		}
		l, _ := x.Layout().(*layout)
		if l == nil || len(l.partial) > 0 || l.sharding.IsReplicated() {
			continue
		}
		m := l.sharding.mesh
		if !m.spans() || m.net.prefetch == nil {
			continue
		}
		if _, ok := jobs[m]; !ok {
			meshes = append(meshes, m)
		}
		jobs[m] = append(jobs[m], &prefetchJob{src: l, dt: x.DType(), ready: make(chan struct{})})
	}
	for _, m := range meshes {
		m.net.pf.start(m, jobs[m])
	}
}

// prefetcher holds a mesh's prefetched gathers, by the layout they
// gather; gen numbers the Prefetch calls, last is closed when the
// gathers of the latest call are done.
type prefetcher struct {
	mu      sync.Mutex
	gen     int
	pending map[*layout]*prefetchJob
	last    chan struct{}
	taken   int // gathers served from prefetches (tests)
}

// prefetchJob is one array's gather: blocks are every local device's
// whole copy (shared by the devices of this process), set before ready
// is closed, or the panic of the gather in failed.
type prefetchJob struct {
	src     *layout
	dt      tensor.DType
	gen     int
	ready   chan struct{}
	blocks  []*tensor.Tensor
	failed  any
	dropped bool // no op took the blocks: the gather donates them
}

// start queues jobs behind the previous call's. Which jobs are pending
// and which are dropped follows from the order of the calls alone, never
// from timing, so every process takes the same gathers from prefetches.
func (p *prefetcher) start(m *Mesh, jobs []*prefetchJob) {
	p.mu.Lock()
	p.gen++
	if p.pending == nil {
		p.pending = map[*layout]*prefetchJob{}
	}
	for l, j := range p.pending {
		if j.gen <= p.gen-2 {
			delete(p.pending, l)
			j.drop()
		}
	}
	var queued []*prefetchJob
	for _, j := range jobs {
		if _, ok := p.pending[j.src]; ok {
			continue // already on its way
		}
		j.gen = p.gen
		p.pending[j.src] = j
		queued = append(queued, j)
	}
	prev, done := p.last, make(chan struct{})
	p.last = done
	p.mu.Unlock()
	net := m.net
	go func() {
		defer close(done)
		if prev != nil {
			<-prev
		}
		for _, j := range queued {
			j.run(net)
		}
	}()
}

// run gathers the job's array whole on the mesh's prefetch communicator.
func (j *prefetchJob) run(net *meshNet) {
	defer close(j.ready)
	defer func() {
		if r := recover(); r != nil {
			j.failed = r
		}
	}()
	m := j.src.sharding.mesh
	bs := reshardOn(net.prefetch, net.procs, net.pstream, j.src, j.dt, Replicated(m), false)
	// A layer's gathered weights, dropped to the collector once used,
	// are the garbage of an FSDP step: pace it layer by layer.
	tensor.PaceCollector()
	net.pf.mu.Lock()
	defer net.pf.mu.Unlock()
	if j.dropped {
		tensor.Donate(bs...)
		return
	}
	j.blocks = bs
}

// drop releases a job no op took (p.mu held): its blocks now, or when
// its gather ends.
func (j *prefetchJob) drop() {
	j.dropped = true
	if j.blocks != nil {
		tensor.Donate(j.blocks...)
		j.blocks = nil
	}
}

// takePrefetched returns the prefetched blocks of src gathered whole when
// dst asks for that, waiting for the gather to end, or nil. The caller
// owns them (they are copies made for it).
func takePrefetched(src *layout, dst Sharding) []*tensor.Tensor {
	m := src.sharding.mesh
	if m.net == nil || !dst.IsReplicated() || len(src.partial) > 0 || !dst.mesh.Equal(m) {
		return nil
	}
	p := &m.net.pf
	p.mu.Lock()
	j := p.pending[src]
	delete(p.pending, src)
	p.mu.Unlock()
	if j == nil {
		return nil
	}
	<-j.ready
	if j.failed != nil {
		panic(j.failed)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.taken++
	bs := j.blocks
	j.blocks = nil
	return bs
}

// PrefetchBackward returns x unchanged and, in the backward pass, starts
// Prefetch(tree) when x's cotangent arrives. Placed on the input of layer
// i with layer i-1's parameters, it starts their gathers as soon as layer
// i's backward is done, so that layer i-1's backward finds them under way
// (its matmuls gather their weights again to compute the input's
// gradient):
//
//	for i, b := range blocks {
//		if i+1 < len(blocks) {
//			shard.Prefetch(blocks[i+1]) // forward: the next block
//		}
//		if i > 0 {
//			x = shard.PrefetchBackward(x, blocks[i-1]) // backward: the previous one
//		}
//		x = b.Forward(x)
//	}
//
// On a host tensor, a block inside shard.Map or an array of a mesh of one
// process it returns x itself and does nothing. The same rules as
// Prefetch's apply: every process runs the same backward pass.
func PrefetchBackward(x *tensor.Tensor, tree any) *tensor.Tensor {
	l, _ := x.Layout().(*layout)
	if x.Local() != nil || l == nil || !l.sharding.mesh.spans() || len(l.partial) > 0 {
		return x
	}
	return keepAxes(tensor.Apply(prefetchMarkOp, prefetchMark{tree: tree}, x), x)
}

// prefetchMark is the marker's parameter: the tree its VJP prefetches.
type prefetchMark struct{ tree any }

// prefetchMarkOp is the identity on a placed array whose VJP starts a
// Prefetch before passing the cotangent on.
var prefetchMarkOp = &tensor.Op{
	Name:   "prefetch_backward",
	Traits: tensor.Traits{Placement: tensor.Distributed, Types: tensor.TypesAll},
	Impl: func(in []*tensor.Tensor, _ any) *tensor.Tensor {
		x := in[0]
		l := layoutOf("prefetch_backward", x)
		// Headers of its own over x's blocks: the result owns what it
		// holds, as a reshard's does.
		return tensor.NewSharded(x.DType(), x.Shape(), (&layout{sharding: l.sharding, geo: l.geo, blocks: ownCopies(l.blocks), owned: true}).number(false))
	},
	VJP: func(g *tensor.Tensor, _ []*tensor.Tensor, _ *tensor.Tensor, p any) []*tensor.Tensor {
		Prefetch(p.(prefetchMark).tree)
		return []*tensor.Tensor{g}
	},
}
