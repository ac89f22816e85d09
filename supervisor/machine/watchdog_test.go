package machine

import (
	"testing"
	"time"
)

// The watchdog's verdict on a silent agent: wait for queued datagrams, but
// not forever; give a frozen supervise one more period, once.
func TestWatchdogLook(t *testing.T) {
	const period = 700 * time.Millisecond
	now := time.Now()
	busy := true
	idle := false

	t.Run("pinged in time", func(t *testing.T) {
		w := WatchdogState{Period: period, due: now, deferred: 3, graced: true}
		v, next := w.look(now, 200*time.Millisecond, busy)
		if v != wdWait || next != 500*time.Millisecond || w.deferred != 0 || w.graced {
			t.Errorf("got %v %v %+v, want a look again in 500ms with the deferrals and grace reset", v, next, w)
		}
	})
	t.Run("silent, nothing queued", func(t *testing.T) {
		w := WatchdogState{Period: period, due: now}
		if v, _ := w.look(now, period, idle); v != wdKill {
			t.Errorf("got %v, want kill", v)
		}
	})
	t.Run("silent under a flood that never empties the socket", func(t *testing.T) {
		w := WatchdogState{Period: period, due: now}
		looks := 0
		for {
			v, next := w.look(now, period+time.Duration(looks)*watchdogDeferral, busy)
			if v == wdKill {
				break
			}
			if v != wdDefer || next != watchdogDeferral {
				t.Fatalf("look %d: got %v %v, want a short deferral", looks, v, next)
			}
			now = now.Add(next)
			w.due = now
			looks++
			if looks > 1000 {
				t.Fatal("the verdict was postponed forever")
			}
		}
		if looks != maxWatchdogDeferrals {
			t.Errorf("judged after %d deferrals, want %d", looks, maxWatchdogDeferrals)
		}
	})
	t.Run("a ping found in the queue resets the deferrals", func(t *testing.T) {
		w := WatchdogState{Period: period, due: now}
		for range maxWatchdogDeferrals - 1 {
			w.look(now, period, busy)
		}
		w.look(now, 10*time.Millisecond, busy) // the queued ping was read
		if v, _ := w.look(now, period, busy); v != wdDefer {
			t.Errorf("got %v, want a fresh deferral after a ping", v)
		}
	})
	t.Run("supervise was frozen", func(t *testing.T) {
		w := WatchdogState{Period: period, due: now.Add(-3 * time.Second)}
		v, next := w.look(now, 4*time.Second, idle)
		if v != wdFrozen || next != period {
			t.Errorf("got %v %v, want one more period", v, next)
		}
		w.due = now.Add(-3 * time.Second) // frozen again before the agent spoke
		if v, _ := w.look(now, 8*time.Second, idle); v != wdKill {
			t.Errorf("got %v, want kill: the grace is given once", v)
		}
	})
	t.Run("supervise was frozen while the socket filled", func(t *testing.T) {
		w := WatchdogState{Period: period, due: now.Add(-3 * time.Second)}
		if v, next := w.look(now, 4*time.Second, busy); v != wdDefer {
			t.Fatalf("got %v %v, want a deferral", v, next)
		}
		now := now.Add(watchdogDeferral)
		w.due = now // the deferral re-armed the timer
		if v, next := w.look(now, 4*time.Second, idle); v != wdFrozen || next != period {
			t.Errorf("got %v %v, want one more period: supervise was frozen before the deferral", v, next)
		}
	})
}
