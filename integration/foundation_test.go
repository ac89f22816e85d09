package integration

import (
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A child killed with kill -9 is relaunched, and its run is journaled as a
// dirty death by signal 9.
func TestKill9ChildIsRestartedAndJournaledDirty(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sv := e.run()
	first := e.waitEvent(1, "start")
	syscall.Kill(first.pid, syscall.SIGKILL)
	e.waitEvent(2, "start")
	st := e.status()
	r := st.run(t, 1)
	if !r.Dirty || r.Signal != 9 || r.ExitCode != 137 || r.Reason != "signal" || r.Ended == nil {
		t.Errorf("run 1 = %+v, want dirty, signal 9, exit 137, reason signal", r)
	}
	if st.Child.Run != 2 || st.Child.Restarts != 1 || st.Child.State != "running" || !st.Supervisor.Running {
		t.Errorf("child = %+v", st.Child)
	}
	if st.Child.LastExit == nil || st.Child.LastExit.Run != 1 {
		t.Errorf("last_exit = %+v", st.Child.LastExit)
	}
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Errorf("supervise exit code %d after SIGTERM", code)
	}
	e.noOverlap()
}

// A child that exits 0 under --restart on-failure ends supervise with 0.
func TestCleanExitEndsSupervisor(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=exit 0")
	sv := e.run("--restart", "on-failure")
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if n := e.count("start"); n != 1 {
		t.Errorf("agent started %d times, want 1", n)
	}
	st := e.status()
	if st.Supervisor.Running || !st.Supervisor.CleanShutdown {
		t.Errorf("supervisor = %+v, want stopped cleanly", st.Supervisor)
	}
	if r := st.run(t, 1); r.Dirty || r.ExitCode != 0 || r.Reason != "exit" {
		t.Errorf("run 1 = %+v", r)
	}
}

// --restart never passes the child's own status through.
func TestRestartNeverPassesStatusThrough(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=exit 7")
	if code := e.run("--restart", "never").wait(20 * time.Second); code != 7 {
		t.Errorf("exit code %d, want the child's 7", code)
	}
}

// SIGTERM to supervise reaches the child, supervise waits for it, records a
// clean stop, and leaves no process of the tree alive.
func TestSIGTERMStopsTreeCleanly(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=term-exit 0; grandchild; groupchild; hang")
	sv := e.run()
	gc := e.waitEvent(1, "grandchild")
	grp := e.waitEvent(1, "groupchild")
	e.waitEvent(1, "hang")
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0", code)
	}
	if e.count("got-term") != 1 {
		t.Error("the agent never received SIGTERM")
	}
	for _, ev := range []event{gc, grp} {
		pid, _ := strconv.Atoi(ev.arg)
		if alive(pid) {
			t.Errorf("%s %d survived the stop", ev.kind, pid)
		}
	}
	if left := e.tagged(); len(left) > 0 {
		t.Errorf("processes of the tree still alive: %v", left)
	}
	st := e.status()
	r := st.run(t, 1)
	if r.Dirty || r.Reason != "stopped" {
		t.Errorf("run 1 = %+v, want a clean stop", r)
	}
	if !st.Supervisor.CleanShutdown {
		t.Error("journal not marked clean")
	}
}

// A child that ignores SIGTERM is killed after the grace period; a second
// signal during the grace period kills at once.
func TestIgnoredSIGTERMKilledAfterGrace(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=ignore-term; hang")
	sv := e.run("--stop-timeout", "500ms")
	e.waitEvent(1, "hang")
	start := time.Now()
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d, want 0 (a requested stop)", code)
	}
	if d := time.Since(start); d < 500*time.Millisecond {
		t.Errorf("stopped after %v, before the grace period", d)
	}
	if r := e.status().run(t, 1); r.Signal != 9 || r.Dirty || r.Reason != "stopped" {
		t.Errorf("run 1 = %+v, want SIGKILL recorded as a clean stop", r)
	}
	if !strings.Contains(sv.stderr(), "did not stop within the grace period") {
		t.Errorf("log does not say why it killed:\n%s", sv.stderr())
	}

	e2 := newEnv(t)
	e2.set("TESTAGENT_SCRIPT=ignore-term; hang")
	sv = e2.run("--stop-timeout", "1h")
	e2.waitEvent(1, "hang")
	sv.signal(syscall.SIGTERM)
	waitFor(t, 10*time.Second, "the stop to begin", func() bool { return strings.Contains(sv.stderr(), "stopping the child") })
	sv.signal(syscall.SIGINT)
	if code := sv.wait(20 * time.Second); code != 128+int(syscall.SIGINT) {
		t.Errorf("forced stop exit code %d, want %d", code, 128+int(syscall.SIGINT))
	}
	if left := e2.tagged(); len(left) > 0 {
		t.Errorf("processes left after a forced stop: %v", left)
	}
}

// A grandchild that outlives its parent (even in its own session) is
// killed before the next child starts.
func TestOrphanedGrandchildIsKilled(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=grandchild; groupchild; exit 3", "TESTAGENT_SCRIPT=hang")
	sv := e.run()
	gc := e.waitEvent(1, "grandchild")
	grp := e.waitEvent(1, "groupchild")
	e.waitEvent(2, "start")
	for _, ev := range []event{gc, grp} {
		pid, _ := strconv.Atoi(ev.arg)
		if alive(pid) {
			t.Errorf("%s %d outlived its parent", ev.kind, pid)
		}
	}
	e.noOverlap()
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// A second supervise on the same state dir fails at once, naming the
// holder, and starts no agent.
func TestSecondInstanceFailsFast(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	first := e.run()
	e.waitEvent(1, "start")
	start := time.Now()
	second := e.run()
	code := second.wait(10 * time.Second)
	if code != 3 {
		t.Errorf("second supervise exit code %d, want 3", code)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("second supervise took %v to fail", d)
	}
	want := "in use by supervise pid " + strconv.Itoa(first.cmd.Process.Pid)
	if !strings.Contains(second.stderr(), want) {
		t.Errorf("message %q does not say %q", second.stderr(), want)
	}
	if n := e.count("start"); n != 1 {
		t.Errorf("%d agents started, want 1", n)
	}
	if !first.running() {
		t.Error("the first supervise was disturbed")
	}
	first.signal(syscall.SIGTERM)
	first.wait(20 * time.Second)
}

// A crash-looping child backs off: between the end of each quick run and
// the start of the next, the journal shows at least the backoff, doubling
// from --backoff-initial (less 10% jitter), never a hot loop.
func TestCrashLoopBacksOff(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=exit 1")
	sv := e.run("--backoff-initial", "100ms", "--backoff-max", "10s")
	e.waitEvent(5, "start")
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Errorf("exit code %d after SIGTERM during backoff", code)
	}
	st := e.status()
	backoff := 100 * time.Millisecond
	for n := 1; n <= 4; n++ {
		r, next := st.run(t, n), st.run(t, n+1)
		if r.Ended == nil {
			t.Fatalf("run %d has no end in the journal", n)
		}
		ended, err1 := time.Parse(time.RFC3339Nano, *r.Ended)
		started, err2 := time.Parse(time.RFC3339Nano, next.Started)
		if err1 != nil || err2 != nil {
			t.Fatalf("run times: %v %v", err1, err2)
		}
		if gap, least := started.Sub(ended), backoff*9/10; gap < least {
			t.Errorf("run %d started %v after run %d ended, want at least %v (backoff %v)", n+1, gap, n, least, backoff)
		}
		backoff *= 2
	}
	if !strings.Contains(sv.stderr(), "relaunch in") {
		t.Errorf("log does not announce the backoff:\n%s", sv.stderr())
	}
}

// A missing agent binary is a clear error, not a loop.
func TestMissingAgentIsAnError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sv := e.start("--", "/nonexistent/agent-binary")
	if code := sv.wait(10 * time.Second); code != 127 {
		t.Errorf("exit code %d, want 127", code)
	}
	if !strings.Contains(sv.stderr(), "could not be started") || !strings.Contains(sv.stderr(), "/nonexistent/agent-binary") {
		t.Errorf("unclear error:\n%s", sv.stderr())
	}
	if strings.Count(sv.stderr(), "could not be started") > 2 {
		t.Errorf("it retried:\n%s", sv.stderr())
	}
}

// kill -9 of supervise, then a new supervise: the orphaned tree is gone
// before the new child starts, and the lost run is recorded as dirty.
func TestKill9SupervisorThenRestart(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=grandchild; groupchild; hang")
	sv := e.run()
	first := e.waitEvent(1, "hang")
	gc := e.waitEvent(1, "grandchild")
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)

	sv2 := e.run()
	e.waitEvent(2, "hang")
	e.noOverlap()
	if alive(first.pid) {
		t.Errorf("the orphaned agent %d is still alive", first.pid)
	}
	if pid, _ := strconv.Atoi(gc.arg); alive(pid) {
		t.Errorf("the orphaned grandchild %d is still alive", pid)
	}
	r := e.status().run(t, 1)
	if !r.Dirty || r.Reason != "supervisor-died" {
		t.Errorf("run 1 = %+v, want dirty with reason supervisor-died", r)
	}
	sv2.signal(syscall.SIGTERM)
	sv2.wait(20 * time.Second)
}

// status answers while supervise runs (the journal is locked) and after.
func TestStatusLiveAndOffline(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	sv := e.run()
	e.waitEvent(1, "start")
	st := e.status()
	if !st.Supervisor.Running || st.Supervisor.PID != sv.cmd.Process.Pid || st.Child.PID == 0 {
		t.Errorf("live status = %+v", st)
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
	st = e.status()
	if st.Supervisor.Running || st.Child.State != "not-running" || len(st.Runs) != 1 {
		t.Errorf("offline status = %+v", st)
	}
}
