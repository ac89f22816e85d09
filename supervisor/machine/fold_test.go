package machine

import (
	"testing"
	"time"
)

// A death whose relaunch follows at once records the delivery of the
// resumes it decides in its own commit: the launch then forks without a
// commit of its own.
func TestRuleFoldDelivery(t *testing.T) {
	r := newRig(t, testConfig())
	r.launch()
	r.begin("s1", "t1")
	r.advance(20e9) // a healthy run: the relaunch is immediate
	fx := r.killed(sigKILL)
	if n := nextOf(t, fx); !n.relaunch || n.delay != 0 {
		t.Fatalf("after the kill: %+v, want an immediate relaunch", n)
	}
	s := r.sess("s1")
	if s.Resume == nil || s.Resume.Run != 2 || s.Resume.Delivered != 1 {
		t.Fatalf("the death did not record the delivery to run 2: %+v", s.Resume)
	}
	if !savedBeforeCommit(fx, "s1") {
		t.Error("the folded delivery is not saved before the death's commit")
	}
	fx = r.step(LaunchDue{})
	l, _ := find[Launch](fx)
	fx = r.step(Delivered{Run: l.Run, IDs: l.IDs, Via: l.Via})
	if _, ok := find[Commit](fx); ok {
		t.Errorf("the launch committed again what the death's commit holds: %#v", fx)
	}
	if s := r.sess("s1"); s.Resume.Delivered != 1 || s.Resume.Run != 2 {
		t.Errorf("delivery counted twice: %+v", s.Resume)
	}
	r.step(Started{Run: l.Run, PID: 1002, At: r.now, Argv: l.Argv})
	r.run = l.Run
	// The resumed run dies too: the resume was handed to it, so it counts.
	r.advance(20e9)
	r.killed(sigKILL)
	if s := r.sess("s1"); s.CrashCount != 2 {
		t.Errorf("crash count %d after the handed resume's run died, want 2", s.CrashCount)
	}
}

// A delivery recorded by the death's commit and then not made is taken
// back: the resume file could not be written, or a stop came first.
func TestRuleFoldTakenBack(t *testing.T) {
	for _, c := range []struct {
		name string
		then func(r *rig) []Effect
	}{
		{"unsent", func(r *rig) []Effect {
			fx := r.step(LaunchDue{})
			l, _ := find[Launch](fx)
			return r.step(Delivered{Run: l.Run, Unsent: true})
		}},
		{"stopped", func(r *rig) []Effect {
			r.step(StopRequested{Signal: sigTERM, Name: "terminated"})
			return r.step(LaunchDue{})
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t, testConfig())
			r.launch()
			r.begin("s1", "t1")
			r.advance(20e9)
			r.killed(sigKILL)
			fx := c.then(r)
			s := r.sess("s1")
			if s.Resume == nil || s.Resume.Run != 0 || s.Resume.Delivered != 0 {
				t.Fatalf("the delivery was not taken back: %+v", s.Resume)
			}
			if !savedBeforeCommit(append(fx, Launch{}), "s1") {
				t.Errorf("taking it back is not committed: %#v", fx)
			}
		})
	}
}

// Found by the simulation (seeds 1 and 1796168986931166357): a manual resume between a death whose
// commit recorded the delivery (fold) and the launch that hands it over.
// The launch hands the manual resume, and its delivery must stay recorded
// for that run (it was taken back, so the run's death would not count
// against the session, nor an untaken resume be parked).
func TestRuleFoldThenManualResume(t *testing.T) {
	r := newRig(t, testConfig())
	r.launch()
	r.begin("s1", "t1")
	r.advance(20 * time.Second) // a healthy run: the relaunch is immediate, and folds
	fx := r.killed(9)
	if _, ok := find[Backoff](fx); !ok || r.sess("s1").Resume.Run == 0 {
		t.Fatalf("setup: the death's commit did not fold the delivery: %+v", r.sess("s1").Resume)
	}
	r.step(ManualResume{ID: "s1"})
	l := r.launch()
	if len(l.IDs) != 1 || l.IDs[0] != "s1" {
		t.Fatalf("launch %+v", l)
	}
	if res := r.sess("s1").Resume; res == nil || !res.Manual || res.Run != l.Run || res.Delivered != 1 {
		t.Fatalf("the manual resume handed to run %d is recorded as %+v", l.Run, res)
	}
}
