package shard

// This file holds the execution of a Map call: one goroutine per device,
// the rendezvous of the collectives (a slot per collective, in issue
// order), and the failure handling that releases every waiting device.

import (
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gonox/gonox/internal/devices"
	"github.com/gonox/gonox/tensor"
)

// run coordinates one parallel execution over a mesh: the forward pass of a
// Map call, or the backward pass of one. Each device runs on its own
// goroutine; collectives meet in slots numbered by the order in which each
// device issues them, so all devices must issue the same collectives in the
// same order (as SPMD programs do). Any failure — a panic on a device, a
// collective issued inconsistently, a device returning while others wait —
// aborts the run: every waiting device is released and the caller gets the
// first error.
type run struct {
	mesh *Mesh
	comm *Comm
	name string // "shard.Map" or "shard.Map (backward)"

	mu    sync.Mutex
	slots map[int]*slot
	done  []int // per device: collectives issued when fn returned; -1 while running
	err   error
	abort chan struct{}
	// nlocal devices of the mesh run in this process (all, in one
	// process); first is the first of them.
	nlocal, first int
	// pending is, per device, the asynchronous collectives started and
	// not yet waited for (async.go).
	pending [][]*inflight
	// tail is closed when the last cross-process exchange started on the
	// run's exchange goroutines (a started reduction's, coll_started.go)
	// is done; nil if none was started. Exchanges run one at a time in
	// the slots' order.
	tail chan struct{}
	// release is closed, and replaced, when a device waits for a started
	// reduction or issues a collective exchanged in the foreground: the
	// started exchanges that would spin wait for the one current when
	// they were started (run.exchange).
	release chan struct{}
}

// releaseStarted lets the started exchanges waiting for release run (there
// are none in one process).
func (r *run) releaseStarted() {
	if !r.mesh.spans() {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	close(r.release)
	r.release = make(chan struct{})
}

// abortSignal unwinds a device goroutine after another device failed.
type abortSignal struct{}

func newRun(m *Mesh, comm *Comm, name string) *run {
	r := &run{mesh: m, comm: comm, name: name, slots: map[int]*slot{}, abort: make(chan struct{}), release: make(chan struct{}), nlocal: m.nlocal(), first: m.firstLocal()}
	r.done = make([]int, m.Size())
	for i := range r.done {
		r.done[i] = -1
	}
	return r
}

// slot is the meeting point of the k-th collective of every device.
type slot struct {
	k        int
	calls    []*call
	arrived  int
	ready    chan struct{} // closed when every device has arrived consistently
	left     int           // devices that finished using the slot
	phase    int           // devices past the second barrier (cooperative ops)
	phaseEnd chan struct{}
	shared   sync.Map // per-group results shared by the devices of a group
	remote   sync.Map // group keys whose result came from other processes
	// groups holds, by group key (its member 0), the meetings of the
	// groups of a collective whose groups meet on their own
	// (call.members).
	groups map[int]*groupMeet
	// release, for a started collective's exchange, is closed once a
	// device waits for it (or issues another collective): the exchange
	// then stops polling (waitAll). Nil otherwise.
	release chan struct{}
}

// groupMeet is the meeting of one group of devices inside a slot, for a
// collective whose devices read only their own group's calls: the group
// goes on when its members have arrived, without waiting for the other
// groups (in one process; see call.members).
type groupMeet struct {
	arrived  int
	ready    chan struct{} // closed when every member has arrived consistently
	out      int           // members done reading (lastOutOf)
	phase    int           // members past the second meeting (barrier)
	phaseEnd chan struct{} // made by the first of them
}

// call is what one device brings to a collective.
type call struct {
	coll  *collective
	axes  []string
	x     *tensor.Tensor // the local block (untraced)
	extra string         // parameters that must agree across devices
	data  any            // per-device data that may differ (ragged sizes)
	p     *collParams    // the parameters, for the cross-process exchange
	// background: the cross-process exchange runs on a goroutine of its
	// own (a started reduction, coll_started.go).
	background bool
	// members, if set, are the mesh indices of the device's group over
	// axes (group.members), for a collective whose devices read only the
	// calls of their group's members: in one process each group meets on
	// its own (gm), so that a group whose members have all arrived goes
	// on while the devices of the other groups still compute; the slot as
	// a whole still checks every call once all have arrived.
	members []int
	gm      *groupMeet
}

func (c *call) String() string {
	s := fmt.Sprintf("%s(%v over %s", c.coll.kind, c.x, strings.Join(c.axes, ","))
	if c.extra != "" {
		s += ", " + c.extra
	}
	return s + ")"
}

// DeviceError is the failure of one device in a Map: a panic in fn (or in
// its backward pass), or an inconsistent collective.
type DeviceError struct {
	// Device is the failing device and Coords its mesh coordinates.
	Device *Device
	Coords []int
	// Value is the panic value (an error or a message).
	Value any
	// Stack is the device goroutine's stack at the panic.
	Stack string
	// Op names the Map call ("shard.Map" or "shard.Map (backward)").
	Op string
}

// Error describes the failure.
func (e *DeviceError) Error() string {
	return fmt.Sprintf("%s: device %d %v: %v", e.Op, e.Device.ID(), e.Coords, e.Value)
}

// Unwrap returns the panic value if it is an error.
func (e *DeviceError) Unwrap() error {
	err, _ := e.Value.(error)
	return err
}

// fail records the first failure and releases every waiting device.
func (r *run) fail(err error) {
	r.mu.Lock()
	r.failLocked(err)
	r.mu.Unlock()
}

func (r *run) failLocked(err error) {
	if r.err == nil {
		r.err = err
		close(r.abort)
	}
}

// exec runs body on every device concurrently and waits for all of them.
// It returns the first failure.
func (r *run) exec(envs []*devEnv, body func(dev int)) error {
	// Kernels without operands (random samplers) stay on the device
	// goroutine meanwhile.
	devices.Enter(len(envs))
	defer devices.Exit(len(envs))
	var wg sync.WaitGroup
	for dev := range envs {
		if !r.mesh.isLocal(dev) {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if p := recover(); p != nil {
					if _, ok := p.(abortSignal); ok {
						return
					}
					r.fail(&DeviceError{Device: r.mesh.devices[dev], Coords: r.mesh.Coords(dev), Value: p, Stack: string(debug.Stack()), Op: r.name})
				}
			}()
			envs[dev].seq = 0
			envs[dev].run = r
			body(dev)
			r.checkPending(dev)
			r.finish(dev, envs[dev].seq)
		}()
	}
	wg.Wait()
	if r.err == nil && r.tail != nil {
		<-r.tail // every started exchange was waited for: it has ended, or is ending
	}
	// Backward passes on the devices leave the collector's pacing to
	// here, where a cycle holds up no device.
	tensor.PaceDeferred()
	if r.err != nil && r.mesh.spans() {
		// The other processes wait for this one in its next collective:
		// end the job rather than leave them hanging.
		dist.t.Abort(fmt.Sprintf("gonox: process %d: %v", dist.rank, r.err))
	}
	return r.err
}

// finish records that a device returned after issuing n collectives, and
// fails the run if other devices wait in a collective it will never issue.
func (r *run) finish(dev, n int) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.done[dev] = n
	for k, s := range r.slots {
		if k >= n && s.arrived > 0 && s.arrived < r.nlocal {
			r.failLocked(r.missing(dev, n, s))
			return
		}
	}
}

func (r *run) missing(dev, n int, s *slot) error {
	for d, c := range s.calls {
		if c != nil {
			return &DeviceError{Device: r.mesh.devices[dev], Coords: r.mesh.Coords(dev), Op: r.name,
				Value: fmt.Sprintf("returned after %d collectives, but device %d waits in collective #%d %v", n, r.mesh.devices[d].ID(), s.k, c)}
		}
	}
	return nil
}

// meet brings the k-th collective of device dev to its slot and waits until
// every device has arrived. It panics with abortSignal if the run fails.
func (r *run) meet(e *devEnv, c *call) *slot {
	// The last device to arrive exchanges with the other processes.
	t0 := time.Now()
	s := r.arrive(e, c)
	r.await(e, s, t0)
	return s
}

// await waits until slot s is ready and counts the time since t0 as
// waited for a collective (Comm.Waited). It panics with abortSignal if
// the run fails.
func (r *run) await(e *devEnv, s *slot, t0 time.Time) {
	ready := s.ready
	if gm := s.calls[e.dev].gm; gm != nil {
		ready = gm.ready
	}
	select {
	case <-ready:
		r.comm.addWait(r.mesh.devices[e.dev], time.Since(t0))
	case <-r.abort:
		panic(abortSignal{})
	}
}

// arrive records the k-th collective c of device dev in its slot without
// waiting for the other devices (meet and post then wait as they need).
// The last local device to arrive checks that every device issued the
// same collective and, on a mesh spanning processes, runs the
// collective's cross-process exchange (c.coll.cross: a blocking one, or
// for a started collective one that posts the transfers); then s.ready
// is closed. It panics with abortSignal if the run has failed.
func (r *run) arrive(e *devEnv, c *call) *slot {
	k := e.seq
	e.seq++
	return r.arriveAt(e, c, k)
}

// arriveAt is arrive at slot k, which the device took earlier (reserve):
// the k-th collective it issued.
func (r *run) arriveAt(e *devEnv, c *call, k int) *slot {
	r.mu.Lock()
	if r.done[e.dev] >= 0 {
		r.mu.Unlock()
		panic(fmt.Sprintf("shard.Ctx: %v on %v after its %s call returned; a Ctx is valid only inside fn", c, r.mesh.devices[e.dev], r.name))
	}
	if r.err != nil {
		r.mu.Unlock()
		panic(abortSignal{})
	}
	s := r.slotLocked(k)
	s.calls[e.dev] = c
	s.arrived++
	for d, n := range r.done {
		if n >= 0 && n <= k {
			r.failLocked(r.missing(d, n, s))
		}
	}
	if c.members != nil && !r.mesh.spans() && len(c.members) < r.nlocal {
		r.arriveGroupLocked(s, c)
	}
	cross := false
	if s.arrived == r.nlocal && r.err == nil {
		if err := r.consistent(s); err != nil {
			r.failLocked(err)
		} else if r.mesh.spans() {
			cross = true
		} else {
			close(s.ready)
		}
	}
	prev := r.tail
	if cross && c.background {
		// A started reduction: exchanged on a goroutine of its own, after
		// the exchanges started before it, while this device goes on.
		done := make(chan struct{})
		r.tail = done
		go r.exchange(s, c, prev, done, r.release) // joined by exec
		cross = false
	}
	r.mu.Unlock()
	if cross {
		r.releaseStarted() // the started exchanges before this one must run now
		r.exchange(s, c, prev, nil, nil)
	}
	return s
}

// arriveGroupLocked records call c in its group's meeting in slot s, and
// releases the group once all its members have arrived with consistent
// calls. r.mu is held.
func (r *run) arriveGroupLocked(s *slot, c *call) {
	if s.groups == nil {
		s.groups = map[int]*groupMeet{}
	}
	key := c.members[0]
	gm := s.groups[key]
	if gm == nil {
		gm = &groupMeet{ready: make(chan struct{})}
		s.groups[key] = gm
	}
	c.gm = gm
	gm.arrived++
	if gm.arrived < len(c.members) || r.err != nil {
		return
	}
	if err := r.consistentAmong(s, c.members); err != nil {
		r.failLocked(err)
		return
	}
	close(gm.ready)
}

// slotLocked returns slot k, made on first use. r.mu is held.
func (r *run) slotLocked(k int) *slot {
	s := r.slots[k]
	if s == nil {
		s = &slot{k: k, calls: make([]*call, r.mesh.Size()), ready: make(chan struct{}), phaseEnd: make(chan struct{})}
		r.slots[k] = s
	}
	return s
}

// next returns the slot device e's next collective will meet in, before
// the device arrives there: a collective whose devices each write a part
// of a shared result (sharedResult) can write it first and meet once,
// when every part is in, instead of meeting, writing and meeting again
// (barrier). It panics with abortSignal if the run has failed.
func (r *run) next(e *devEnv) *slot {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err != nil {
		panic(abortSignal{})
	}
	return r.slotLocked(e.seq)
}

// reserve takes the slot of device e's next collective, which the device
// arrives at later (arriveAt) while the collectives it issues meanwhile
// take the slots after it: a collective whose shared result a producer
// writes into before the device arrives (GatherTarget). It panics with
// abortSignal if the run has failed.
func (r *run) reserve(e *devEnv) *slot {
	s := r.next(e)
	e.seq++
	return s
}

// exchange runs the cross-process part of slot s (c's collective) once
// the exchange of the collectives before it, prev, is done, and closes
// s.ready, or fails the run; then it closes done (if not nil). A started
// exchange that would spin first waits for release.
func (r *run) exchange(s *slot, c *call, prev, done, release chan struct{}) {
	if done != nil {
		defer close(done)
	}
	if prev != nil {
		select {
		case <-prev:
		case <-r.abort:
			return
		}
	}
	s.release = release
	if release != nil && (c.coll.quiet == nil || !c.coll.quiet(r, s)) {
		// A started exchange that would spin (a blocking MPI collective,
		// a shared-memory fence) waits until the device waits for it or
		// issues another collective: while the device computes, a
		// spinning thread takes the core it computes on (every core
		// computes on a host of one process per core), and costs more
		// than it hides.
		select {
		case <-release:
		case <-r.abort:
			return
		}
	}
	if err := c.coll.cross(r, s); err != nil {
		r.fail(err)
	} else {
		close(s.ready)
	}
}

// consistent checks that every device issued the same collective.
func (r *run) consistent(s *slot) error {
	return r.consistentAmong(s, nil)
}

// consistentAmong checks that the devices of members (mesh indices; all
// of them if nil) issued the same collective.
func (r *run) consistentAmong(s *slot, members []int) error {
	ref := r.first
	if members != nil {
		ref = members[0]
	}
	first := s.calls[ref]
	n := len(s.calls)
	if members != nil {
		n = len(members)
	}
	for i := range n {
		dev := i
		if members != nil {
			dev = members[i]
		}
		c := s.calls[dev]
		if c == nil || dev == ref {
			continue // another process's device, or the reference
		}
		if c.coll != first.coll || !slices.Equal(c.axes, first.axes) || c.extra != first.extra ||
			c.x.DType() != first.x.DType() || (!c.coll.rowsDiffer && !slices.Equal(c.x.BorrowShape(), first.x.BorrowShape())) {
			return &DeviceError{Device: r.mesh.devices[dev], Coords: r.mesh.Coords(dev), Op: r.name,
				Value: fmt.Sprintf("collective #%d mismatch: device %d called %v but device %d called %v",
					s.k, r.mesh.devices[ref].ID(), first, r.mesh.devices[dev].ID(), c)}
		}
	}
	return nil
}

// barrier is a second meeting inside slot s, for collectives whose devices
// cooperate on a shared result: it returns when every device has reached
// it (every member of device e's group, when the groups meet on their
// own: call.members).
func (r *run) barrier(e *devEnv, s *slot) {
	r.mu.Lock()
	end := s.phaseEnd
	if gm := s.calls[e.dev].gm; gm != nil {
		if gm.phaseEnd == nil {
			gm.phaseEnd = make(chan struct{})
		}
		end = gm.phaseEnd
		gm.phase++
		if gm.phase == len(s.calls[e.dev].members) {
			close(gm.phaseEnd)
		}
	} else {
		s.phase++
		if s.phase == r.nlocal {
			close(s.phaseEnd)
		}
	}
	r.mu.Unlock()
	select {
	case <-end:
	case <-r.abort:
		panic(abortSignal{})
	}
}

// lastOut counts a device done reading the other devices' operands in
// slot s, without waiting for them as barrier does (the slot's phase
// counter: a collective uses one or the other), and reports whether it
// was the last local device: the one to release the operands.
func (r *run) lastOut(s *slot) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	s.phase++
	return s.phase == r.nlocal
}

// lastOutOf is lastOut for the local members of device e's group in slot
// s, for a collective whose devices read only their group's calls: it
// reports whether e was the last of them done reading.
func (r *run) lastOutOf(e *devEnv, s *slot) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := s.calls[e.dev]
	if c.gm == nil {
		s.phase++
		return s.phase == r.nlocal
	}
	c.gm.out++
	return c.gm.out == len(c.members)
}

// leave marks that a device no longer needs slot s; the last one frees it.
func (r *run) leave(s *slot) {
	r.mu.Lock()
	s.left++
	if s.left == r.nlocal {
		delete(r.slots, s.k)
	}
	r.mu.Unlock()
}
