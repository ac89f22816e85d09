package supervisor

import (
	"os"
	"syscall"
	"testing"
	"time"
)

// The last resort's verdicts, on the loop's health as the watcher reads it:
// a stop signal the loop has not run since ends supervise after
// --stop-timeout plus the margin; a loop that ran since has it in hand; a
// loop that has not run for maxLoopStall is stuck whatever happened.
func TestLastResortStuck(t *testing.T) {
	s := newTestSupervisorWith(t, Config{Name: "t", Argv: []string{"true"}, StopTimeout: 2 * time.Second})
	at := func(d time.Duration) time.Time { return s.in.base.Add(d) }
	set := func(tick, asked time.Duration, looping bool) {
		s.health.tick.Store(int64(tick))
		s.health.stopAsked.Store(int64(asked))
		s.health.looping.Store(looping)
	}
	for _, c := range []struct {
		name        string
		tick, asked time.Duration
		looping     bool
		now         time.Duration
		stuck       bool
	}{
		{name: "healthy, no stop", tick: 10 * time.Second, looping: true, now: 11 * time.Second},
		{name: "stop asked, loop ran since", tick: 10 * time.Second, asked: 9 * time.Second, looping: true, now: 30 * time.Second},
		{name: "stop asked, loop silent, within grace+margin", tick: 5 * time.Second, asked: 6 * time.Second, looping: true, now: 12 * time.Second},
		{name: "stop asked, loop silent past grace+margin", tick: 5 * time.Second, asked: 6 * time.Second, looping: true, now: 14 * time.Second, stuck: true},
		{name: "loop silent 59s", tick: time.Second, looping: true, now: 60 * time.Second},
		{name: "loop silent past 60s", tick: time.Second, looping: true, now: 62 * time.Second, stuck: true},
		{name: "boot (loop not started) is not a stall", tick: time.Second, now: 100 * time.Second},
	} {
		set(c.tick, c.asked, c.looping)
		if why := s.stuck(at(c.now)); (why != "") != c.stuck {
			t.Errorf("%s: stuck %q, want stuck %v", c.name, why, c.stuck)
		}
	}
}

// Watch forwards the stop signals to the loop and ends when cancelled.
func TestWatchForwards(t *testing.T) {
	s := newTestSupervisor(t)
	sigc := make(chan os.Signal, 1)
	cancel := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.Watch(sigc, cancel, func(code int) { t.Errorf("exit(%d) with a healthy loop", code) })
	}()
	sigc <- syscall.SIGTERM
	if got := <-s.ch.sigc; got != syscall.SIGTERM {
		t.Errorf("forwarded %v, want SIGTERM", got)
	}
	close(cancel)
	if err := <-done; err != nil {
		t.Errorf("Watch returned %v", err)
	}
	if s.health.stopAsked.Load() == 0 {
		t.Error("the stop signal's time was not recorded")
	}
}
