//go:build workerstats

package workers

// With the workerstats build tag, Run and the workers time every region,
// and a goroutine prints, every second on stderr, what the last second's
// regions did (a diagnostic build, as docs/performance.md uses it:
// go test -tags workerstats ./examples/moe -bench ...):
//
//	WSTATS wall=1s regions=3656 in=812ms caller=759ms helpers=630ms joins=3326 eff=0.86 serial=188ms gap50=11µs wait=53ms late=21ms
//	  gaps (µs, powers of 2 from <1): [...]   join delays (µs): [...]
//
// in is the callers' time inside Run, caller the part they spent in the
// work, helpers the workers' time in the work, joins how many times a
// worker joined a region, eff (caller+helpers)/(2·in) (for 2 cores),
// serial the callers' time between one Run and the next (gaps under 50
// ms), gap50 its median, wait the callers' time in Run after their own
// work (waiting for a worker's last chunk), late the sum of the delays
// from a region's start to a worker joining it; the histograms count the
// serial gaps and the join delays, by powers of two of microseconds. On
// 2 cores the time lost in regions, 2·in - caller - helpers, is wait +
// late + the workers' own tails (idle after their last chunk while the
// caller computes, or regions they never joined).

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

type statRun struct{ t0, t1 time.Time }

type statMark struct{ t time.Time }

var stats struct {
	mu                 sync.Mutex
	lastExit           time.Time
	regions            int64
	in, caller, serial time.Duration
	gaps               []time.Duration
	wait               time.Duration
	helpers, joins     atomic.Int64
	late               atomic.Int64
	delays             [16]atomic.Int64
}

func init() { go report() }

// report prints the statistics of each second that had regions.
func report() {
	last := time.Now()
	for {
		time.Sleep(time.Second)
		now := time.Now()
		s := &stats
		s.mu.Lock()
		if s.regions > 0 {
			var gh, dh [16]int64
			for _, g := range s.gaps {
				gh[bucket(g)]++
			}
			for i := range s.delays {
				dh[i] = s.delays[i].Swap(0)
			}
			slices.Sort(s.gaps)
			med := time.Duration(0)
			if len(s.gaps) > 0 {
				med = s.gaps[len(s.gaps)/2]
			}
			h := time.Duration(s.helpers.Swap(0))
			late := time.Duration(s.late.Swap(0))
			fmt.Fprintf(os.Stderr, "WSTATS wall=%v regions=%d in=%v caller=%v helpers=%v joins=%d eff=%.2f serial=%v gap50=%v wait=%v late=%v\n",
				now.Sub(last).Round(time.Millisecond), s.regions, s.in.Round(time.Millisecond), s.caller.Round(time.Millisecond),
				h.Round(time.Millisecond), s.joins.Swap(0), float64(s.caller+h)/float64(2*s.in), s.serial.Round(time.Millisecond), med,
				s.wait.Round(time.Millisecond), late.Round(time.Millisecond))
			fmt.Fprintf(os.Stderr, "  gaps (µs, powers of 2 from <1): %v   join delays (µs): %v\n", gh, dh)
		}
		s.regions, s.in, s.caller, s.serial, s.wait, s.gaps = 0, 0, 0, 0, 0, s.gaps[:0]
		s.mu.Unlock()
		last = now
	}
}

// bucket is the histogram bucket of d: 0 under 1 µs, then one per power
// of two of microseconds, the last one open.
func bucket(d time.Duration) int {
	i := 0
	for ; d >= time.Microsecond && i < 15; d /= 2 {
		i++
	}
	return i
}

func statEnter() statRun { return statRun{t0: time.Now()} }

func (s *statRun) callerDone() { s.t1 = time.Now() }

func statExit(r statRun) {
	t2 := time.Now()
	s := &stats
	s.mu.Lock()
	if !s.lastExit.IsZero() {
		if g := r.t0.Sub(s.lastExit); g < 50*time.Millisecond {
			s.gaps = append(s.gaps, g)
			s.serial += g
		}
	}
	s.lastExit = t2
	s.regions++
	s.in += t2.Sub(r.t0)
	s.caller += r.t1.Sub(r.t0)
	s.wait += t2.Sub(r.t1)
	s.mu.Unlock()
}

func statJoinStart() statMark { return statMark{time.Now()} }

func statJoinEnd(m statMark, r *statRun) {
	stats.helpers.Add(int64(time.Since(m.t)))
	stats.joins.Add(1)
	stats.delays[bucket(m.t.Sub(r.t0))].Add(1)
	stats.late.Add(int64(m.t.Sub(r.t0)))
}
