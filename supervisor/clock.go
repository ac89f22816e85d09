package supervisor

import "time"

// Clock is the loop's source of time and timers, so that a test can drive
// the loop's time rules without waiting; nil in Config means the real one.
type Clock interface {
	Now() time.Time
	NewTimer(d time.Duration) Timer
}

// Timer is a timer of a Clock.
type Timer interface {
	C() <-chan time.Time
	Stop() bool
	Reset(d time.Duration) bool
}

type realClock struct{}

func (realClock) Now() time.Time                 { return time.Now() }
func (realClock) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }

// timerSet holds the loop's timers, one per machine.Timer, and the
// once-a-second flush ticker.
type timerSet struct {
	t     [5]Timer
	flush Timer
}

// set arms timer k to fire at at.
func (ts *timerSet) set(c Clock, k int, at time.Time) {
	d := at.Sub(c.Now())
	if ts.t[k] == nil {
		ts.t[k] = c.NewTimer(d)
		return
	}
	ts.t[k].Stop()
	ts.t[k].Reset(d)
}

// clear stops timer k.
func (ts *timerSet) clear(k int) {
	if ts.t[k] != nil {
		ts.t[k].Stop()
		ts.t[k] = nil
	}
}

// c is timer k's channel, nil when it is not armed.
func (ts *timerSet) c(k int) <-chan time.Time {
	if ts.t[k] == nil {
		return nil
	}
	return ts.t[k].C()
}
