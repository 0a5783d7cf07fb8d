//go:build !workerstats

package workers

// Without the workerstats build tag the statistics hooks are empty and
// compile to nothing (stats_on.go has them).

type statRun struct{}

type statMark struct{}

func statEnter() statRun             { return statRun{} }
func (statRun) callerDone()          {}
func statExit(statRun)               {}
func statJoinStart() statMark        { return statMark{} }
func statJoinEnd(statMark, *statRun) {}
