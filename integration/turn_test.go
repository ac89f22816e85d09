package integration

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// turnSession is a session of `supervise status --json` with the fields of
// deadlines, waits and fingerprints.
type turnSession struct {
	ID         string `json:"id"`
	State      string `json:"state"`
	CrashCount int    `json:"crash_count"`
	Reason     string `json:"reason"`
	Wait       string `json:"wait"`
	Deadline   *struct {
		Kind     string    `json:"kind"`
		Limit    string    `json:"limit"`
		At       time.Time `json:"at"`
		Since    time.Time `json:"since"`
		Extended bool      `json:"extended"`
	} `json:"deadline"`
	Fingerprint *struct {
		Sum   string `json:"sum"`
		Files []struct {
			Path   string `json:"path"`
			Size   int64  `json:"size"`
			SHA256 string `json:"sha256"`
		} `json:"files"`
	} `json:"fingerprint"`
}

// turnSession returns session id from status (live, or from the journal).
func (e *env) turnSession(id string) (turnSession, bool) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, superviseBin, "status", "--json", "--state-dir", e.stateDir).Output()
	if err != nil {
		e.t.Fatalf("supervise status: %v", err)
	}
	var st struct {
		Sessions []turnSession `json:"sessions"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		e.t.Fatalf("status JSON: %v\n%s", err, out)
	}
	for _, s := range st.Sessions {
		if s.ID == id {
			return s, true
		}
	}
	return turnSession{}, false
}

// A heartbeating agent stuck in a turn: --turn-timeout stops it (the
// process watchdog stays happy), the turn is resumed once, and the resumed
// turn, stuck again, is parked at the second timeout.
func TestTurnTimeoutResumesOnceThenParks(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=pinger 50ms; turn-begin s1 t1 stream the answer; barrier; log in-turn; hang",
		"TESTAGENT_SCRIPT_2=pinger 50ms; take-resumes; log took-all; hang",
		"TESTAGENT_SCRIPT_3=pinger 50ms; log idle; hang")
	sv := e.run("--turn-timeout", "1s", "--watchdog", "10s", "--stop-timeout", "2s", "--backoff-initial", "10ms")
	e.waitLog(1, "in-turn")
	if s, _ := e.turnSession("s1"); s.Deadline == nil || s.Deadline.Kind != "turn" || s.Deadline.Limit != "1s" {
		t.Errorf("status of the open turn: deadline %+v, want a 1s turn deadline", s.Deadline)
	}
	e.waitLog(3, "idle")
	st := e.status()
	for _, n := range []int{1, 2} {
		if r := st.run(t, n); r.Reason != "turn-timeout" || !r.Dirty || r.Signal != int(syscall.SIGTERM) {
			t.Errorf("run %d: reason %q dirty %v signal %d, want turn-timeout, dirty, SIGTERM", n, r.Reason, r.Dirty, r.Signal)
		}
	}
	if got := e.took(0); len(got) != 1 || got[0] != "s1 attempt=1" {
		t.Errorf("resumes taken: %v, want exactly [s1 attempt=1]", got)
	}
	if msg := e.tookMessage(2, "s1"); !strings.Contains(msg, "deadline") {
		t.Errorf("continuation does not say the turn ran past its deadline: %s", msg)
	}
	s, _ := e.turnSession("s1")
	if s.State != "parked" || s.CrashCount != 2 || !strings.Contains(s.Reason, "2 consecutive dirty deaths") {
		t.Errorf("after the second timeout: %+v, want parked at 2 consecutive dirty deaths", s)
	}
	if !strings.Contains(sv.stderr(), "turn deadline passed") {
		t.Errorf("the log does not say which deadline passed:\n%s", sv.stderr())
	}
	e.stop(sv)
	e.noOverlap()
}

// --phase-timeout: a model phase longer than the tool deadline but under
// its own goes on; a stuck tool is stopped.
func TestPhaseTimeoutToolNotModel(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=pinger 50ms; turn-begin s1 t1; phase s1 model; barrier; sleep 2s; log model-done; phase s1 tool bash; barrier; log in-tool; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; log took-all; hang")
	sv := e.run("--phase-timeout", "model=1m,tool=1s", "--stop-timeout", "2s", "--backoff-initial", "10ms")
	e.waitLog(1, "in-tool")
	if s, _ := e.turnSession("s1"); s.Deadline == nil || s.Deadline.Kind != "tool phase" {
		t.Errorf("status in the tool phase: deadline %+v, want the tool phase's", s.Deadline)
	}
	e.waitLog(2, "took-all")
	if r := e.status().run(t, 1); r.Reason != "turn-timeout" || !r.Dirty {
		t.Errorf("run 1: reason %q dirty %v, want turn-timeout (the tool phase), dirty", r.Reason, r.Dirty)
	}
	if msg := e.tookMessage(2, "s1"); !strings.Contains(msg, `"bash"`) {
		t.Errorf("continuation does not name the stuck tool: %s", msg)
	}
	if !strings.Contains(sv.stderr(), "deadline=\"tool phase\"") {
		t.Errorf("the log does not name the tool phase's deadline:\n%s", sv.stderr())
	}
	e.stop(sv)
}

// EXTEND_TIMEOUT_USEC during a turn moves its deadline, capped at twice
// --turn-timeout; a heartbeat does not.
func TestExtendTimeoutCapped(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=pinger 50ms; turn-begin s1 t1; extend 4000000 s1; barrier; log extended; sleep 3500ms; log survived; extend 60000000 s1; barrier; log capped; hang",
		"TESTAGENT_SCRIPT_2=log second; hang")
	sv := e.run("--turn-timeout", "3s", "--stop-timeout", "2s", "--resume", "off")
	e.waitLog(1, "extended")
	s, _ := e.turnSession("s1")
	if s.Deadline == nil || !s.Deadline.Extended {
		t.Fatalf("after EXTEND_TIMEOUT_USEC: deadline %+v, want extended", s.Deadline)
	}
	if d := s.Deadline.At.Sub(s.Deadline.Since); d <= 3*time.Second || d > 6*time.Second {
		t.Errorf("extended deadline %s after the turn's start, want past 3s and at most 6s", d)
	}
	// The agent lived past its unextended deadline.
	e.waitLog(1, "survived")
	e.waitLog(1, "capped")
	s, _ = e.turnSession("s1")
	if s.Deadline == nil || s.Deadline.At.Sub(s.Deadline.Since) != 6*time.Second {
		t.Errorf("after asking for 60s more: deadline %+v, want capped at 6s (twice --turn-timeout)", s.Deadline)
	}
	e.waitLog(2, "second")
	if r := e.status().run(t, 1); r.Reason != "turn-timeout" {
		t.Errorf("run 1 reason %q, want turn-timeout at the capped deadline", r.Reason)
	}
	e.stop(sv)
}

// A session waiting for reconnect (the agent retries the model API) is
// resumed after a dirty death; one waiting for approval stays parked.
func TestWaitingReconnectResumedApprovalParked(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin r1 t1 summarise; wait-for r1 reconnect; turn-begin a1 t2 delete the branch; wait-for a1 approval; barrier; hang",
		"TESTAGENT_SCRIPT_2=take-resumes; log took-all; hang")
	sv := e.run()
	e.waitEvent(1, "barrier-ok")
	if r, _ := e.turnSession("r1"); r.State != "waiting" || r.Wait != "reconnect" {
		t.Errorf("r1 before the kill: %+v, want waiting for reconnect", r)
	}
	if a, _ := e.turnSession("a1"); a.State != "waiting" || a.Wait != "approval" {
		t.Errorf("a1 before the kill: %+v, want waiting for approval", a)
	}
	e.killChildOf(1, "barrier-ok")
	e.waitLog(2, "took-all")
	if got := e.took(0); len(got) != 1 || got[0] != "r1 attempt=1" {
		t.Errorf("resumes taken: %v, want exactly [r1 attempt=1]", got)
	}
	if a, _ := e.turnSession("a1"); a.State != "parked" || !strings.Contains(a.Reason, "waiting for input") {
		t.Errorf("a1 after the death: %+v, want parked (a person's wait)", a)
	}
	if r, _ := e.turnSession("r1"); r.State != "in_turn" || r.CrashCount != 1 {
		t.Errorf("r1 after resumed: %+v, want in_turn with crash_count 1", r)
	}
	e.stop(sv)
}

func fileSHA(t *testing.T, path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// replaceBinary installs a new build of the agent at path as an upgrade
// does: a different file renamed over the old one.
func replaceBinary(t *testing.T, path string) {
	b, err := os.ReadFile(agentBin)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b, []byte("\nupgraded build\n")...)
	tmp := path + ".new"
	if err := os.WriteFile(tmp, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// A session parked by the breaker records the agent's fingerprint; the
// next launch of a changed agent lifts the park once; parked again under
// the new agent, it stays parked.
func TestFingerprintLiftsParkOnce(t *testing.T) {
	e := newEnv(t)
	agent := filepath.Join(e.dir, "agent")
	replaceBinary(t, agent) // a private copy the test may replace
	oldSHA := fileSHA(t, agent)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 fix the build; barrier; exit 3",
		"TESTAGENT_SCRIPT_2=take-resumes; exit 3",
		"TESTAGENT_SCRIPT_3=log idle3; hang",
		"TESTAGENT_SCRIPT_4=take-resumes; log took4; exit 3",
		"TESTAGENT_SCRIPT_5=take-resumes; exit 3",
		"TESTAGENT_SCRIPT_6=log idle6; hang",
		"TESTAGENT_SCRIPT_7=log idle7; hang")
	sv := e.start("run", "--guard-trip", "0", "--backoff-initial", "10ms", "--", agent)
	e.waitLog(3, "idle3")
	s, _ := e.turnSession("s1")
	if s.State != "parked" || s.Fingerprint == nil || len(s.Fingerprint.Files) == 0 {
		t.Fatalf("after two deaths mid-turn: %+v, want parked with the agent's fingerprint", s)
	}
	if f := s.Fingerprint.Files[0]; f.Path != agent || f.SHA256 != oldSHA {
		t.Errorf("fingerprint names %s sha256 %s, want %s sha256 %s", f.Path, f.SHA256, agent, oldSHA)
	}
	oldSum := s.Fingerprint.Sum

	// The upgrade: the next launch runs a different agent.
	b, _ := os.ReadFile(agent)
	if err := os.WriteFile(agent+".new", append(b, "second build\n"...), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(agent+".new", agent); err != nil {
		t.Fatal(err)
	}
	e.killChildOf(3, "log")
	e.waitLog(4, "took4")
	if got := e.took(4); len(got) != 1 || got[0] != "s1 attempt=1" {
		t.Errorf("run 4 took %v, want [s1 attempt=1] (the lifted park)", got)
	}
	if !strings.Contains(e.tookMessage(4, "s1"), "agent has changed") {
		t.Errorf("continuation of the lifted park: %s", e.tookMessage(4, "s1"))
	}
	// Dying again under the new agent: one more resume (crash_count
	// started at limit-1), then parked under the new fingerprint.
	e.waitLog(6, "idle6")
	if got := e.took(5); len(got) != 1 || got[0] != "s1 attempt=1" {
		t.Errorf("run 5 took %v, want [s1 attempt=1] (crash_count 1 after the lift)", got)
	}
	s, _ = e.turnSession("s1")
	if s.State != "parked" || s.Fingerprint == nil || s.Fingerprint.Sum == oldSum {
		t.Fatalf("after dying under the new agent: %+v, want parked under the new fingerprint", s)
	}
	// Same agent: the park does not lift again.
	e.killChildOf(6, "log")
	e.waitLog(7, "idle7")
	if got := e.took(7); len(got) != 0 {
		t.Errorf("run 7 took %v: the park lifted twice", got)
	}
	if s, _ := e.turnSession("s1"); s.State != "parked" {
		t.Errorf("after a launch of the same agent: %s, want still parked", s.State)
	}
	if n := strings.Count(sv.stderr(), "park lifted"); n != 1 {
		t.Errorf("%d lifts logged, want 1:\n%s", n, sv.stderr())
	}
	e.stop(sv)
}
