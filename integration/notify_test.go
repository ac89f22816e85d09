package integration

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/notify"
)

func (st status) session(id string) (s struct {
	ID, State, Turn, Phase, Tool, Reason string
	CrashCount                           int
	HasHeartbeat                         bool
}, ok bool) {
	for _, x := range st.Sessions {
		if x.ID == id {
			s.ID, s.State, s.Turn, s.Phase, s.Tool, s.Reason = x.ID, x.State, x.Turn, x.Phase, x.Tool, x.Reason
			s.CrashCount, s.HasHeartbeat = x.CrashCount, x.LastHeartbeat != nil
			return s, true
		}
	}
	return s, false
}

// Turn markers from the child appear in status --json.
func TestTurnMarkersAppearInStatus(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=turn-begin s1 t1 fix the tests; phase s1 tool bash; waiting s2 t9; " +
		"turn-begin s3 t3; turn-end s3 t3 completed; closed s4; barrier; hang")
	sv := e.run()
	e.waitEvent(1, "barrier-ok")
	st := e.status()
	for _, want := range []struct{ id, state, turn, phase, tool string }{
		{"s1", "in_turn", "t1", "tool", "bash"},
		{"s2", "waiting", "t9", "", ""},
		{"s3", "idle", "t3", "", ""},
		{"s4", "closed", "", "", ""},
	} {
		s, ok := st.session(want.id)
		if !ok {
			t.Errorf("session %s missing from status: %+v", want.id, st.Sessions)
			continue
		}
		if s.State != want.state || s.Turn != want.turn || s.Phase != want.phase || s.Tool != want.tool || !s.HasHeartbeat {
			t.Errorf("session %s = %+v, want %+v", want.id, s, want)
		}
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
	// Offline, from the journal: open sessions survive (s1 is stopped by
	// the requested stop from issue 4 on; here it must at least be there).
	if _, ok := e.status().session("s1"); !ok {
		t.Error("s1 not in the journal after the stop")
	}
}

// A barrier returns only after the marker is in the journal: kill -9 the
// supervisor right after the barrier returns, and the marker is there on
// reopen.
func TestBarrierMeansJournaled(t *testing.T) {
	for i := 0; i < 5; i++ {
		e := newEnv(t)
		turn := "t" + strconv.Itoa(i)
		e.set("TESTAGENT_SCRIPT=turn-begin s1 " + turn + "; barrier; hang")
		sv := e.run()
		e.waitEvent(1, "barrier-ok")
		sv.signal(syscall.SIGKILL)
		sv.wait(10 * time.Second)
		s, ok := e.status().session("s1") // offline: read from the journal
		if !ok || s.Turn != turn || s.State != "in_turn" {
			t.Fatalf("iteration %d: acknowledged marker missing after kill -9: %+v", i, s)
		}
	}
}

// A datagram from a process outside the child's tree is rejected.
func TestOutsiderRejected(t *testing.T) {
	requireLinuxBackend(t, "SCM_CREDENTIALS sender check; TestOutsiderHeardPortable checks the portable backend's documented weaker one")
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=turn-begin mine t1; barrier; hang")
	sv := e.run()
	e.waitEvent(1, "barrier-ok")
	sock := filepath.Join(e.stateDir, "notify", "notify.sock")
	c := &notify.Client{Socket: sock}
	// This test process is not in the tree: its marker must not land, and
	// its barrier is closed without confirmation.
	if err := c.TurnBegin(context.Background(), "intruder", "x", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(context.Background(), 5*time.Second); err == nil {
		t.Error("an outsider's barrier was confirmed")
	}
	st := e.status()
	if _, ok := st.session("intruder"); ok {
		t.Error("the outsider's marker was applied")
	}
	if _, ok := st.session("mine"); !ok {
		t.Error("the child's own marker is missing")
	}
	raw := e.statusRaw()
	if !strings.Contains(raw, `"sender": 2`) && !strings.Contains(raw, `"sender": 3`) {
		t.Errorf("sender drops not counted:\n%s", raw)
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// TestOutsiderHeardPortable pins down the weaker sender check that
// docs/macos.md documents for the portable backend: datagrams carry no
// sender pid, so a process of the same uid outside the agent's tree is
// heard while a run is live (its marker is applied and its barrier
// confirmed), as the agent's own are.
func TestOutsiderHeardPortable(t *testing.T) {
	if !portableBackend {
		t.Skip("the Linux backend refuses outsiders (TestOutsiderRejected); this pins the portable backend's weaker check")
	}
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=turn-begin mine t1; barrier; hang")
	sv := e.run()
	e.waitEvent(1, "barrier-ok")
	c := &notify.Client{Socket: filepath.Join(e.stateDir, "notify", "notify.sock")}
	defer c.Close()
	if err := c.TurnBegin(context.Background(), "outsider", "x", ""); err != nil {
		t.Fatal(err)
	}
	if err := c.Barrier(context.Background(), 5*time.Second); err != nil {
		t.Errorf("a same-uid outsider's barrier under the portable backend: %v, want confirmed", err)
	}
	st := e.status()
	if _, ok := st.session("outsider"); !ok {
		t.Error("the same-uid outsider's marker was not applied: docs/macos.md says it is")
	}
	if _, ok := st.session("mine"); !ok {
		t.Error("the child's own marker is missing")
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// A SIGSTOPped child is killed by the watchdog within the period plus a
// small margin, and the run's reason is watchdog.
func TestWatchdogKillsAHungChild(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=pinger 100ms; hang", "TESTAGENT_SCRIPT=pinger 100ms; hang")
	sv := e.run("--watchdog", "700ms", "--stop-timeout", "500ms")
	first := e.waitEvent(1, "hang")
	time.Sleep(1500 * time.Millisecond) // pings keep it alive past two periods
	if n := e.count("start"); n != 1 {
		t.Fatalf("a pinging child was killed (%d starts)", n)
	}
	stopped := time.Now()
	syscall.Kill(first.pid, syscall.SIGSTOP)
	e.waitEvent(2, "start")
	elapsed := time.Since(stopped)
	if elapsed > 700*time.Millisecond+1500*time.Millisecond {
		t.Errorf("hung child replaced after %v, want within the 700ms period plus a small margin", elapsed)
	}
	r := e.status().run(t, 1)
	if r.Reason != "watchdog" || !r.Dirty {
		t.Errorf("run 1 = %+v, want a dirty death with reason watchdog", r)
	}
	if !strings.Contains(sv.stderr(), "no WATCHDOG=1 within the watchdog period") {
		t.Errorf("log does not say why:\n%s", sv.stderr())
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// A flood of datagrams on the notify socket from an outsider (every one
// rejected) does not keep the watchdog from judging a silent agent. The
// bound on how long it waits for queued pings is TestWatchdogLook's: on
// these machines intake empties the socket between looks, so a flood from
// a test cannot keep it full at every look.
func TestWatchdogUnderFlood(t *testing.T) {
	requireLinuxBackend(t, "the flood's WATCHDOG=1 comes from outside the agent's tree, which only SCM_CREDENTIALS can tell")
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=pinger 100ms; hang", "TESTAGENT_SCRIPT=pinger 100ms; hang")
	sv := e.run("--watchdog", "700ms", "--stop-timeout", "500ms")
	first := e.waitEvent(1, "hang")
	sock := filepath.Join(e.stateDir, "notify", "notify.sock")
	stop := make(chan struct{})
	const senders = 8
	flooding := make(chan struct{}, senders)
	for range senders {
		go func() {
			defer func() { flooding <- struct{}{} }()
			c, err := net.DialUnix("unixgram", nil, &net.UnixAddr{Name: sock, Net: "unixgram"})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c.SetWriteDeadline(time.Now().Add(100 * time.Millisecond))
				c.Write([]byte("WATCHDOG=1"))
			}
		}()
	}
	waitFor(t, 10*time.Second, "the flood under way (outsiders' datagrams dropped)", func() bool {
		return statusNumber(e.statusRaw(), "sender") > 100
	})
	syscall.Kill(first.pid, syscall.SIGSTOP)
	// The flood goes on for 15 s: the silent agent must be replaced while
	// it lasts, not after.
	replaced := false
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) && !replaced {
		replaced = e.count("start") >= 2
		time.Sleep(10 * time.Millisecond)
	}
	close(stop)
	for range senders {
		<-flooding
	}
	if !replaced {
		syscall.Kill(first.pid, syscall.SIGCONT)
		t.Fatalf("a silent agent was not judged during a 15 s flood of the notify socket:\n%s", sv.stderr())
	}
	if r := e.status().run(t, 1); r.Reason != "watchdog" {
		t.Errorf("run 1 = %+v, want reason watchdog", r)
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// WATCHDOG=trigger asks for the watchdog action at once.
func TestWatchdogTrigger(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=trigger; hang", "TESTAGENT_SCRIPT=hang")
	sv := e.run("--stop-timeout", "300ms")
	e.waitEvent(2, "start")
	if r := e.status().run(t, 1); r.Reason != "watchdog" {
		t.Errorf("run 1 = %+v, want reason watchdog", r)
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// Every bad-input class is sent by the child; supervise keeps working and
// applies the next valid marker, and never acts on the garbage. The barrier
// after the garbage answers 0 (something since the last barrier was
// refused); the one after the valid marker answers 1.
func TestBadInputSurvived(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=pinger 100ms; badinput; barrier; turn-begin good t1; barrier; hang")
	sv := e.run("--watchdog", "2s")
	e.waitEvent(1, "badinput")
	e.waitEvent(1, "barrier-err")
	e.waitEvent(1, "barrier-ok")
	st := e.status()
	if s, ok := st.session("good"); !ok || s.State != "in_turn" {
		t.Errorf("the valid marker after the garbage was not applied: %+v", st.Sessions)
	}
	for _, bad := range []string{"evil", "s", "t"} {
		if _, ok := st.session(bad); ok {
			t.Errorf("garbage created session %q", bad)
		}
	}
	if !sv.running() || st.Child.Run != 1 {
		t.Errorf("supervise or the child did not survive the garbage: %+v", st.Child)
	}
	raw := e.statusRaw()
	for _, reason := range []string{"empty", "truncated", "nul", "utf8", "malformed", "protocol", "fds"} {
		if strings.Contains(raw, `"`+reason+`": 0`) {
			t.Errorf("drop reason %s not counted:\n%s", reason, raw)
		}
	}
	// An absurd WATCHDOG_USEC was ignored: the 2s watchdog still holds, so
	// the pinging child is still run 1 a few periods later.
	time.Sleep(500 * time.Millisecond)
	if e.count("start") != 1 {
		t.Error("the child was restarted after the garbage")
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// 100 000 heartbeats in a burst cost no journal transaction each and no
// false watchdog verdict.
func TestHeartbeatBurst(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=turn-begin s1 t1; barrier; log burst-start; burst 100000; pinger 100ms; log burst-end; hang")
	sv := e.run("--watchdog", "1s")
	e.waitLog(1, "burst-start")
	before := e.journalCommits()
	ev := e.waitEvent(1, "burst")
	e.waitLog(1, "burst-end")
	// Wait until supervise has taken in every heartbeat of the burst (its
	// ping counter), so that a commit per heartbeat, or per batch of them,
	// would have shown by now.
	waitFor(t, 20*time.Second, "every heartbeat of the burst taken in", func() bool {
		return statusNumber(e.statusRaw(), "pings") >= 100000
	})
	after := e.journalCommits()
	if !strings.HasPrefix(ev.arg, "sent=100000 ") {
		t.Errorf("burst: %s", ev.arg)
	}
	if after-before > 10 {
		t.Errorf("%d journal commits for a burst of 100000 heartbeats, want a handful", after-before)
	}
	if e.count("start") != 1 {
		t.Error("false watchdog verdict during the burst")
	}
	raw := e.statusRaw()
	if !strings.Contains(raw, `"pings": 1`) { // >= 100000, digits vary
		t.Errorf("pings not counted:\n%s", raw)
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
}

// The Python example agent, using only the standard library, works under
// supervise: its markers and barriers land.
func TestPythonAgent(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not on PATH: the Python example agent is not exercised")
	}
	e := newEnv(t)
	script, _ := filepath.Abs("../examples/python/agent.py")
	sv := e.start("run", "--restart", "never", "--", py, script, "script")
	if code := sv.wait(60 * time.Second); code != 0 {
		t.Fatalf("python agent run: exit %d\n%s", code, sv.stderr())
	}
	raw := e.statusAll()
	if !strings.Contains(raw, `"state": "idle"`) || !strings.Contains(raw, `"id": "`) {
		t.Fatalf("the Python agent's session is not in the journal:\n%s", raw)
	}
}

func (e *env) statusRaw() string {
	e.t.Helper()
	return e.statusOut("status", "--json", "--state-dir", e.stateDir)
}

func (e *env) statusAll() string {
	e.t.Helper()
	return e.statusOut("status", "--json", "--all", "--state-dir", e.stateDir)
}

func (e *env) statusOut(args ...string) string {
	e.t.Helper()
	cmd := exec.Command(superviseBin, args...)
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("status: %v", err)
	}
	return string(out)
}

func (e *env) journalCommits() int {
	raw := e.statusRaw()
	if !strings.Contains(raw, `"commits": `) {
		e.t.Fatalf("no journal commits in status:\n%s", raw)
	}
	return statusNumber(raw, "commits")
}

// statusNumber is the first number under key in status JSON, -1 if none.
func statusNumber(raw, key string) int {
	i := strings.Index(raw, `"`+key+`": `)
	if i < 0 {
		return -1
	}
	rest := raw[i+len(key)+4:]
	j := strings.IndexAny(rest, ",\n}")
	if j < 0 {
		return -1
	}
	n, err := strconv.Atoi(strings.TrimSpace(rest[:j]))
	if err != nil {
		return -1
	}
	return n
}

// EXTEND_TIMEOUT_USEC during a stop gives the agent more time to flush
// than --stop-timeout, so it exits by itself instead of being killed.
func TestExtendTimeoutDuringStop(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=term-extend 5000000 1s; hang")
	sv := e.run("--stop-timeout", "300ms")
	e.waitEvent(1, "hang")
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	if e.count("flushed") != 1 {
		t.Error("the agent was killed before it finished flushing")
	}
	if r := e.status().run(t, 1); r.Signal != 0 || r.ExitCode != 0 || r.Reason != "stopped" {
		t.Errorf("run 1 = %+v, want a clean exit 0 after the extension", r)
	}
}

// supervise notify, run by a shell hook inside the agent's tree with a hook
// payload on stdin, lands its markers before it returns.
func TestNotifyCommandFromHooks(t *testing.T) {
	e := newEnv(t)
	hook := fmt.Sprintf(`echo '{"session_id":"h1","prompt":"rename the module"}' | %[1]s notify turn-begin --hook-json --turn t7 &&
%[1]s notify phase --session h1 --phase tool --tool Bash &&
echo hooks-done >> %[2]s && exec sleep 1000`, superviseBin, e.logPath)
	sv := e.start("run", "--", "/bin/sh", "-c", hook)
	waitFor(t, 20*time.Second, "the hooks", func() bool {
		b, _ := os.ReadFile(e.logPath)
		return strings.Contains(string(b), "hooks-done")
	})
	s, ok := e.status().session("h1")
	if !ok || s.State != "in_turn" || s.Turn != "t7" || s.Tool != "Bash" {
		t.Errorf("session h1 = %+v (found %v)", s, ok)
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(20 * time.Second)
	// Outside supervise the command does nothing and succeeds.
	cmd := exec.Command(superviseBin, "notify", "turn-begin", "--session", "x")
	cmd.Env = []string{"PATH=/usr/bin:/bin"}
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "not running under supervise") {
		t.Errorf("outside supervise: %v %s", err, out)
	}
}
