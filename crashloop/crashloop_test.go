package crashloop

import (
	"errors"
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

func run(start, lived time.Duration, dirty bool) Run {
	return Run{Started: t0.Add(start), Ended: t0.Add(start + lived), Dirty: dirty}
}

func TestParseRestart(t *testing.T) {
	for s, want := range map[string]Restart{"on-failure": OnFailure, "always": Always, "never": Never} {
		r, err := ParseRestart(s)
		if err != nil || r != want {
			t.Errorf("ParseRestart(%q) = %v, %v", s, r, err)
		}
	}
	if _, err := ParseRestart("sometimes"); !errors.Is(err, ErrBadRestart) {
		t.Errorf("ParseRestart(sometimes) err = %v, want ErrBadRestart", err)
	}
}

func TestNextActions(t *testing.T) {
	healthyDirty := run(0, time.Hour, true)
	healthyClean := run(0, time.Hour, false)
	for _, tc := range []struct {
		name    string
		restart Restart
		giveUp  int
		prior   int
		run     Run
		want    Action
	}{
		{"on-failure dirty relaunches", OnFailure, 0, 0, healthyDirty, Relaunch},
		{"on-failure clean exits", OnFailure, 0, 0, healthyClean, Exit},
		{"always clean relaunches", Always, 0, 0, healthyClean, Relaunch},
		{"never dirty exits", Never, 0, 0, healthyDirty, Exit},
		{"give-up reached", OnFailure, 3, 2, run(0, time.Millisecond, true), GiveUp},
		{"give-up not reached", OnFailure, 3, 1, run(0, time.Millisecond, true), Relaunch},
		{"healthy run never gives up", OnFailure, 1, 5, healthyDirty, Relaunch},
		{"clean exit beats give-up", OnFailure, 1, 5, run(0, time.Millisecond, false), Exit},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := DefaultPolicy()
			p.Restart, p.GiveUp = tc.restart, tc.giveUp
			d, _ := p.Next(State{Failures: tc.prior}, tc.run, 0.5)
			if d.Action != tc.want {
				t.Errorf("action = %v, want %v", d.Action, tc.want)
			}
		})
	}
}

// TestBackoffOverTime walks a crash loop through time: quick deaths double the
// delay up to the cap, a healthy run resets it, exec failures always back off.
func TestBackoffOverTime(t *testing.T) {
	p := DefaultPolicy()
	p.Jitter = 0
	type step struct {
		lived      time.Duration
		execFailed bool
		wantDelay  time.Duration
		wantFails  int
	}
	steps := []step{
		{10 * time.Millisecond, false, 250 * time.Millisecond, 1},
		{10 * time.Millisecond, false, 500 * time.Millisecond, 2},
		{999 * time.Millisecond, false, time.Second, 3},
		{0, false, 2 * time.Second, 4},
		{5 * time.Second, false, 4 * time.Second, 5}, // under the 10s default: still quick
		{10 * time.Second, false, 0, 0},              // healthy: immediate, reset
		{10 * time.Millisecond, false, 250 * time.Millisecond, 1},
		{time.Hour, true, 500 * time.Millisecond, 2}, // exec failure is never healthy
	}
	for i := 0; i < 20; i++ { // then the cap
		steps = append(steps, step{0, false, -1, -1})
	}
	var s State
	at := time.Duration(0)
	for i, st := range steps {
		r := run(at, st.lived, true)
		r.ExecFailed = st.execFailed
		d, next := p.Next(s, r, 0.5)
		if st.wantDelay >= 0 && d.Delay != st.wantDelay {
			t.Fatalf("step %d: delay %v, want %v", i, d.Delay, st.wantDelay)
		}
		if st.wantFails >= 0 && next.Failures != st.wantFails {
			t.Fatalf("step %d: failures %d, want %d", i, next.Failures, st.wantFails)
		}
		if d.Delay > p.Max {
			t.Fatalf("step %d: delay %v above cap %v", i, d.Delay, p.Max)
		}
		s = next
		at += st.lived + d.Delay
	}
	if d, _ := p.Next(s, run(at, 0, true), 0.5); d.Delay != p.Max {
		t.Errorf("capped delay = %v, want %v", d.Delay, p.Max)
	}
	if s.Reset().Failures != 0 {
		t.Error("Reset kept failures")
	}
}

// TestHealthyMeansProven: an agent that fails its first API call dies
// after about 1.4s, every time. Under the old 1s threshold each such run
// counted as healthy and the relaunch was immediate, forever; now the delay
// doubles to the cap. A run that completed a turn is healthy however short.
func TestHealthyMeansProven(t *testing.T) {
	p := DefaultPolicy()
	p.Jitter = 0
	var s State
	var d Decision
	at := time.Duration(0)
	want := 250 * time.Millisecond
	for i := 0; i < 12; i++ {
		d, s = p.Next(s, run(at, 1400*time.Millisecond, true), 0.5)
		if d.Action != Relaunch || d.Delay != want {
			t.Fatalf("death %d after 1.4s: %v in %v, want relaunch in %v", i+1, d.Action, d.Delay, want)
		}
		at += 1400*time.Millisecond + d.Delay
		want = min(2*want, p.Max)
	}
	if d.Delay != p.Max {
		t.Fatalf("the backoff never reached the cap: %v", d.Delay)
	}
	// A short run that completed a turn proved the agent works.
	r := run(at, 1400*time.Millisecond, true)
	r.Proven = true
	d, s = p.Next(s, r, 0.5)
	if d.Delay != 0 || s.Failures != 0 {
		t.Errorf("a run that completed a turn: delay %v, failures %d; want 0, 0", d.Delay, s.Failures)
	}
	// An exec failure is never proven.
	r = run(at, 0, true)
	r.ExecFailed, r.Proven = true, true
	if d, _ = p.Next(s, r, 0.5); d.Delay == 0 {
		t.Error("an exec failure counted as healthy")
	}
	if DefaultPolicy().Healthy != 10*time.Second {
		t.Errorf("default --healthy-after = %v, want 10s", DefaultPolicy().Healthy)
	}
}

func TestJitterBounds(t *testing.T) {
	p := DefaultPolicy() // 20% jitter: ±10%
	for _, rnd := range []float64{0, 0.25, 0.5, 0.999} {
		d, _ := p.Next(State{Failures: 2}, run(0, 0, true), rnd) // third quick death: 1s base
		lo, hi := 900*time.Millisecond, 1100*time.Millisecond
		if d.Delay < lo || d.Delay > hi {
			t.Errorf("rnd %v: delay %v outside [%v, %v]", rnd, d.Delay, lo, hi)
		}
	}
	a, _ := p.Next(State{}, run(0, 0, true), 0)
	b, _ := p.Next(State{}, run(0, 0, true), 0.9)
	if a.Delay == b.Delay {
		t.Error("jitter did not change the delay")
	}
}

func TestGuardChains(t *testing.T) {
	g := DefaultGuard()
	for _, tc := range []struct {
		name   string
		gaps   []time.Duration // gap before each death after the first
		open   bool
		chain  int
		period string
	}{
		{"fast loop trips", []time.Duration{10 * time.Second, 10 * time.Second}, true, 3, "10s"},
		{"slow loop trips too", []time.Duration{150 * time.Second, 150 * time.Second}, true, 3, "150s"},
		{"two deaths do not trip", []time.Duration{time.Second}, false, 2, ""},
		{"a long gap breaks the chain", []time.Duration{time.Second, 6 * time.Minute, time.Second}, false, 2, ""},
		{"gap exactly MaxGap chains", []time.Duration{5 * time.Minute, 5 * time.Minute}, true, 3, ""},
		{"stays open past trip", []time.Duration{time.Second, time.Second, time.Second}, true, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			at := t0
			s := g.Death(GuardState{}, at)
			for _, gap := range tc.gaps {
				at = at.Add(gap)
				s = g.Death(s, at)
			}
			if s.Open != tc.open || s.Chain != tc.chain {
				t.Errorf("state = %+v, want open=%v chain=%d", s, tc.open, tc.chain)
			}
		})
	}
}

func TestGuardClearing(t *testing.T) {
	g := DefaultGuard()
	var s GuardState
	for i := 0; i < 3; i++ {
		s = g.Death(s, t0.Add(time.Duration(i)*time.Second))
	}
	if !s.Open {
		t.Fatal("guard not open after 3 chained deaths")
	}
	// An open guard stays open across a long gap: only health clears it.
	if s2 := g.Death(s, t0.Add(time.Hour)); !s2.Open || s2.Chain != 1 {
		t.Errorf("after a long gap: %+v, want open with a new chain", s2)
	}
	if c := g.Healthy(s); c.Open || c.Chain != 0 {
		t.Errorf("Healthy left %+v", c)
	}
	if g.Proven(t0, t0.Add(g.MaxGap)) || !g.Proven(t0, t0.Add(g.MaxGap+time.Second)) {
		t.Error("Proven boundary wrong")
	}
	off := Guard{}
	if s := off.Death(GuardState{Chain: 5}, t0); s.Open || s.Chain != 0 {
		t.Errorf("disabled guard returned %+v", s)
	}
}
