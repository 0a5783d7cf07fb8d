package shard

import (
	"os"
	"slices"
	"sync"
	"time"

	"github.com/gonox/gonox/tensor"
)

// asyncKey keys a slot's asyncExchange in slot.shared.
type asyncKey struct{}

// asyncExchange is the transfers between processes of one started
// collective. A goroutine tests them every ProgressEnv interval until they
// are done (MPI libraries move a large message only while some MPI call
// runs); the first local device to wait completes them.
type asyncExchange struct {
	once sync.Once
	desc string
	reqs []Request
	done chan struct{} // closed when the progress goroutine ends
	err  any           // a panic of the progress goroutine
}

// ProgressEnv is the environment variable with the interval at which
// started collectives between processes are driven while the devices
// compute (a Go duration from 0 to MaxProgress; default 100µs). "0"
// leaves them to Wait: the transfers then overlap only as far as the MPI
// library progresses them on its own.
const ProgressEnv = "GONOX_ASYNC_PROGRESS"

var progressInterval = sync.OnceValue(func() time.Duration {
	d, err := parseProgress(os.Getenv(ProgressEnv))
	if err != nil {
		panic(err.Error()) // refused earlier, by the device pool or Install
	}
	return d
})

// progress tests the requests every interval until all are done or the
// run fails.
func (x *asyncExchange) progress(abort <-chan struct{}, every time.Duration) {
	defer close(x.done)
	defer func() { x.err = recover() }()
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		all := true
		for _, q := range x.reqs {
			if !q.Test() {
				all = false
			}
		}
		if all {
			return
		}
		select {
		case <-abort:
			return
		case <-t.C:
			t.Reset(every)
		}
	}
}

func (x *asyncExchange) wait(r *run) {
	x.once.Do(func() {
		stop := watchdog(r.name+": "+x.desc, r.mesh.ownerProcs())
		defer stop()
		if x.done != nil {
			select {
			case <-x.done:
			case <-r.abort:
				panic(abortSignal{})
			}
			if x.err != nil {
				panic(x.err)
			}
		}
		for _, q := range x.reqs {
			q.Wait()
		}
	})
	select {
	case <-r.abort: // the device that completed them failed
		panic(abortSignal{})
	default:
	}
}

// waitAll completes the requests. Until release is closed (never, if
// nil) it polls those that can (PollingRequest) every ProgressEnv
// interval, sleeping in between, so that the device computing meanwhile
// keeps its core; once the device waits for them (release), Wait
// completes them at once (shard/mpi's tests without pause for a while,
// then with short sleeps in between).
func waitAll(reqs []Request, release <-chan struct{}) {
	every := progressInterval()
	for _, q := range reqs {
		if p, ok := q.(PollingRequest); ok && every > 0 && release != nil && pollUntil(p, every, release) {
			continue
		}
		q.Wait()
	}
}

// pollUntil polls p every interval until it is done (true) or release is
// closed (false).
func pollUntil(p PollingRequest, every time.Duration, release <-chan struct{}) bool {
	for !p.Poll(every, time.Millisecond) {
		select {
		case <-release:
			return false
		default:
		}
	}
	return true
}

// exchangeAsync posts, for an asynchronous ppermute on a mesh spanning
// processes, a non-blocking send of every local block that a remote
// device receives and a non-blocking receive of every remote block that a
// local device receives (into a fresh block in s.calls). Groups whose
// Group is not an AsyncGroup exchange synchronously now.
func exchangeAsync(r *run, s *slot) (err error) {
	m := r.mesh
	first := s.calls[r.first]
	e := &devEnv{mesh: m, dev: r.first, coords: m.Coords(r.first)}
	axesMask := e.maskOf("shard", first.axes)
	desc := first.describe(s.k)
	defer func() {
		if p := recover(); p != nil {
			err = &DeviceError{Device: m.devices[e.dev], Coords: e.coords, Op: r.name, Value: p}
		}
	}()
	for _, members := range m.partitionOf(axesMask) {
		if _, ok := m.net.groups[procsKey(m.procsOf(members))].(AsyncGroup); !ok {
			procs := m.procsOf(members)
			if len(procs) >= 2 && slices.Contains(procs, dist.rank) {
				return r.eachGroup(s, (*crossGroup).parts) // every group at once, synchronously
			}
		}
	}
	x := &asyncExchange{desc: desc}
	tag := s.k % 32768  // MPI guarantees tags up to 32767
	var agreed []string // process sets
	for _, members := range m.partitionOf(axesMask) {
		procs := m.procsOf(members)
		if len(procs) < 2 || !slices.Contains(procs, dist.rank) {
			continue
		}
		g := m.net.groups[procsKey(procs)]
		if k := procsKey(procs); !slices.Contains(agreed, k) {
			stop := watchdog(r.name+": "+desc, procs)
			agree(g, procs, r.name, m.net.stream, m.net.groupOps[k].Add(1), desc)
			stop()
			agreed = append(agreed, k)
		}
		ag := g.(AsyncGroup)
		ge := &devEnv{mesh: m, dev: members[0], coords: m.Coords(members[0])}
		gr := ge.group("shard", first.axes)
		for _, pr := range first.p.perm {
			src := gr.members[slices.Index(gr.meshRank, pr[0])]
			dst := gr.members[slices.Index(gr.meshRank, pr[1])]
			ps, pd := m.devices[src].proc, m.devices[dst].proc
			switch {
			case ps == pd:
			case ps == dist.rank:
				x.reqs = append(x.reqs, ag.IsendBytes(rawBytes(s.calls[src].x), slices.Index(procs, pd), tag))
			case pd == dist.rank:
				buf := tensor.Zeros(first.x.DType(), first.x.Shape()...)
				x.reqs = append(x.reqs, ag.IrecvBytes(rawBytes(buf), slices.Index(procs, ps), tag))
				s.calls[src] = &call{coll: first.coll, axes: first.axes, x: buf, extra: first.extra, p: first.p}
			}
		}
	}
	if every := progressInterval(); every > 0 && len(x.reqs) > 0 {
		x.done = make(chan struct{})
		go x.progress(r.abort, every) // joined by wait, or ended by the run's failure
	}
	s.shared.Store(asyncKey{}, x)
	return nil
}
