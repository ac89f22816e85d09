package machine

import (
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// restarted asks for a restart and ends the run as the stop signal does.
func (r *rig) restarted() (asked, died []Effect) {
	r.t.Helper()
	asked = r.step(RestartRequested{})
	if rep, ok := find[Reply](asked); !ok || rep.Err != nil {
		r.t.Fatalf("restart: %#v", asked)
	}
	r.advance(100 * time.Millisecond)
	return asked, r.step(Exited{PID: 1000 + int(r.run), Code: 128 + sigTERM, Signal: sigTERM, Started: r.m.Run.Started, Ended: r.now})
}

// supervise restart: the run is stopped (the stop signal) and relaunched
// at once; the turn it interrupted is the next run's, a person's resume;
// no crash counted, the guard and the backoff untouched.
func TestRestartRelaunchesAndResumes(t *testing.T) {
	for _, task := range []bool{false, true} {
		cfg := testConfig()
		if task {
			cfg = taskConfig()
		}
		r := newRig(t, cfg)
		r.launch()
		r.begin("s1", "t1")
		r.m.Guard.Chain = 1
		backoff := r.m.Backoff
		asked, died := r.restarted()
		if s, ok := find[Signal](asked); !ok || s.Sig != sigTERM || s.Kill {
			t.Fatalf("task %v: restart sent %#v, want the stop signal", task, asked)
		}
		if r.m.LastExit.Reason != record.ReasonStopped || r.m.LastExit.Dirty {
			t.Errorf("task %v: the restart's run: %s dirty %v, want stopped, not dirty", task, r.m.LastExit.Reason, r.m.LastExit.Dirty)
		}
		s := r.sess("s1")
		if s.State != record.ResumePending || s.Resume == nil || !s.Resume.Manual || s.Resume.Reason != resume.ReasonRestart || s.CrashCount != 0 {
			t.Fatalf("task %v: s1 %+v, want a person's resume for the restart, no crash counted", task, s)
		}
		if r.m.Guard.Chain != 1 || r.m.Backoff != backoff {
			t.Errorf("task %v: guard %+v backoff %+v moved (was chain 1, %+v)", task, r.m.Guard, r.m.Backoff, backoff)
		}
		if _, ok := find[End](died); ok {
			t.Fatalf("task %v: the restart ended supervise: %#v", task, died)
		}
		if n := nextOf(t, died); !n.relaunch || n.delay != 0 {
			t.Fatalf("task %v: after the restart %+v, want a relaunch at once", task, n)
		}
		if l := r.launch(); len(l.IDs) != 1 || l.IDs[0] != "s1" || l.Task != task {
			t.Fatalf("task %v: the relaunch %+v, want s1 resumed", task, l)
		}
	}
}

// A stop asked during a restart wins: supervise ends 0. A task with no
// session to resume is not started again: the restart ends as a stop.
func TestRestartYieldsToAStop(t *testing.T) {
	r := newRig(t, testConfig())
	r.launch()
	r.begin("s1", "t1")
	r.step(RestartRequested{})
	r.step(StopRequested{Signal: sigTERM, Name: "terminated"})
	r.advance(time.Second)
	fx := r.step(Exited{PID: 1000 + int(r.run), Code: 143, Signal: sigTERM, Started: r.m.Run.Started, Ended: r.now})
	if n := nextOf(t, fx); !n.end || n.code != ExitOK {
		t.Fatalf("a stop during a restart: %+v, want the end with 0", n)
	}
	if s := r.sess("s1"); s.State != record.Stopped {
		t.Errorf("s1 %s, want stopped", s.State)
	}
	r = newRig(t, taskConfig())
	r.launch()
	_, died := r.restarted()
	if n := nextOf(t, died); !n.end || n.code != ExitOK {
		t.Fatalf("a task restarted with no session: %+v, want the end with 0 (the task is never started again)", n)
	}
}

// Between runs a restart launches now; during a stop it is refused.
func TestRestartBetweenRuns(t *testing.T) {
	cfg := testConfig()
	r := newRig(t, cfg)
	r.launch()
	r.begin("s1", "t1")
	if n := nextOf(t, r.killed(sigKILL)); !n.relaunch || n.delay == 0 {
		t.Fatalf("a quick death: %+v, want a backoff", n)
	}
	fx := r.step(RestartRequested{})
	if b, ok := find[Backoff](fx); !ok || b.Delay != 0 {
		t.Fatalf("restart during a backoff: %#v, want the launch now", fx)
	}
	r.launch()
	r.step(StopRequested{Signal: sigTERM, Name: "terminated"})
	if rep, _ := find[Reply](r.step(RestartRequested{})); rep.Err == nil {
		t.Fatal("a restart during a stop was taken")
	}
}
