package integration

import (
	"context"
	"encoding/json"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// limitStatus is what these tests read of `supervise status --json`: a
// session's wait and its reset, and the runs.
type limitStatus struct {
	Sessions []struct {
		ID       string     `json:"id"`
		State    string     `json:"state"`
		Wait     string     `json:"wait"`
		RetryAt  *time.Time `json:"retry_at"`
		ParkedBy string     `json:"parked_by"`
		Reason   string     `json:"reason"`
	} `json:"sessions"`
	Runs []runStatus `json:"runs"`
}

func limitStatusOf(t *testing.T, stateDir string, all bool) (limitStatus, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	args := []string{"status", "--json", "--state-dir", stateDir}
	if all {
		args = append(args, "--all")
	}
	out, err := exec.CommandContext(ctx, superviseBin, args...).Output()
	if err != nil && len(out) == 0 {
		return limitStatus{}, false
	}
	var st limitStatus
	if json.Unmarshal(out, &st) != nil {
		return limitStatus{}, false
	}
	return st, true
}

// limitCLIs are the stand-ins of the three CLIs with their shipped hooks
// and documented templates (examples/*/README.md).
var limitCLIs = []struct {
	name    string
	install map[string]string
	example string
	argv    []string
}{
	{"claude", map[string]string{"claude-code/settings.json": ".claude/settings.json"}, "claude-code", []string{"claude", "-p"}},
	{"codex", map[string]string{"codex/hooks.json": ".codex/hooks.json", "codex/config.toml": ".codex/config.toml"}, "codex", []string{"codex", "exec"}},
	{"gemini", map[string]string{"gemini/settings.json": ".gemini/settings.json"}, "gemini", []string{"gemini", "-p"}},
}

// A usage limit ends the task's turn, in each CLI's own words (Claude's on
// stdout): the session is waiting with wait limit and a retry_at at (or
// just after) the reset the words name, nothing is launched before it,
// and at it the same session is resumed by id with a continuation that
// says a limit interrupted it; the resumed turn completes and supervise
// exits 0. The reset is 5 s away; Claude and Codex name it to the minute,
// so their wait runs to the end of that minute (up to a minute).
func TestLimitWaitedOutFakeCLI(t *testing.T) {
	t.Parallel()
	for _, c := range limitCLIs {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			a := newAdapterEnv(t)
			for src, dst := range c.install {
				a.install(src, dst)
			}
			a.set("FAKECLI_LIMIT_RUN=1", "FAKECLI_LIMIT_RESET=5s")
			tmpl := resumeTemplate(t, c.example)
			sv := a.start(append([]string{"run", "--resume-exec", tmpl, "--"}, append(c.argv, "rename the parser")...)...)
			reset, err := time.Parse(time.RFC3339, a.waitEvent(1, "limit").arg)
			if err != nil {
				t.Fatal(err)
			}
			session := a.waitEvent(1, "session").arg
			retryAt := waitLimitWait(t, a.stateDir, session)
			// Gemini names the wait to a tenth of a second, rounded ("retry in
			// 5.1s" for 5.14): supervise counts it from the death, so its
			// retry_at may be up to that tenth before the fake's reset.
			if retryAt.Before(reset.Add(-100*time.Millisecond)) || retryAt.After(reset.Add(2*time.Minute)) {
				t.Errorf("retry_at %s, want at or after the CLI's reset %s (within its minute and the jitter)", retryAt, reset)
			}
			if code := sv.wait(3 * time.Minute); code != 0 {
				t.Fatalf("supervise exited %d, want 0 after the resumed turn; stderr:\n%s", code, sv.stderr())
			}
			var argv []string
			if err := json.Unmarshal([]byte(a.waitEvent(2, "start").arg), &argv); err != nil {
				t.Fatal(err)
			}
			joined := strings.Join(argv, " ")
			if !strings.Contains(joined, session) || !strings.Contains(joined, "limit") {
				t.Errorf("run 2 argv %q: want the session %s resumed with a limit's continuation", argv, session)
			}
			st, _ := limitStatusOf(t, a.stateDir, true)
			for _, r := range st.Runs {
				if r.Run == 1 && (r.Reason != "limit" || r.Dirty) {
					t.Errorf("run 1: reason %q dirty %v, want limit, not dirty", r.Reason, r.Dirty)
				}
				if r.Run == 2 {
					started, err := time.Parse(time.RFC3339Nano, r.Started)
					if err != nil || started.Before(retryAt) {
						t.Errorf("run 2 started %s (%v), before retry_at %s", r.Started, err, retryAt)
					}
				}
			}
			if n := a.count("start"); n != 2 {
				t.Errorf("%d runs, want 2 (the task and its resume after the limit)", n)
			}
		})
	}
}

// --limit-wait off: the task ends 75 (EX_TEMPFAIL) at once, with the
// reset time on stderr and in status.
func TestLimitWaitOffExits75(t *testing.T) {
	t.Parallel()
	a := newAdapterEnv(t)
	a.install("claude-code/settings.json", ".claude/settings.json")
	a.set("FAKECLI_LIMIT_RUN=1", "FAKECLI_LIMIT_RESET=2h")
	sv := a.start("run", "--limit-wait", "off", "--resume-exec", "claude -p -r {session} {message}", "--", "claude", "-p", "rename the parser")
	if code := sv.wait(60 * time.Second); code != 75 {
		t.Fatalf("supervise exited %d, want 75; stderr:\n%s", code, sv.stderr())
	}
	session := a.waitEvent(1, "session").arg
	st, _ := limitStatusOf(t, a.stateDir, false)
	var retry *time.Time
	for _, s := range st.Sessions {
		if s.ID == session && s.State == "waiting" && s.Wait == "limit" {
			retry = s.RetryAt
		}
	}
	if retry == nil {
		t.Fatalf("status %+v: want session %s waiting for its limit with a retry_at", st.Sessions, session)
	}
	if !strings.Contains(sv.stderr(), retry.UTC().Format(time.RFC3339)) {
		t.Errorf("stderr does not give the reset %s:\n%s", retry.UTC().Format(time.RFC3339), sv.stderr())
	}
	if a.count("start") != 1 {
		t.Errorf("%d runs, want 1", a.count("start"))
	}
}

// A limit that never lifts: the stand-in (Gemini's words, a reset 2 s
// away) meets it at every run; after --limit-resumes 2 resumes the
// session is parked naming the limit, and the task ends 5, with no loop.
func TestLimitNeverLiftsParks(t *testing.T) {
	t.Parallel()
	a := newAdapterEnv(t)
	a.install("gemini/settings.json", ".gemini/settings.json")
	a.set("FAKECLI_LIMIT_RUN=1,2,3,4,5,6", "FAKECLI_LIMIT_RESET=2s")
	sv := a.start("run", "--limit-resumes", "2", "--resume-exec", "gemini -r {session} -p {message}", "--", "gemini", "-p", "rename the parser")
	if code := sv.wait(2 * time.Minute); code != 5 {
		t.Fatalf("supervise exited %d, want 5 (parked); stderr:\n%s", code, sv.stderr())
	}
	session := a.waitEvent(1, "session").arg
	st, _ := limitStatusOf(t, a.stateDir, false)
	found := false
	for _, s := range st.Sessions {
		if s.ID == session {
			found = true
			if s.State != "parked" || s.ParkedBy != "limit" || !strings.Contains(s.Reason, "--limit-resumes") {
				t.Errorf("session %+v, want parked by the limit, naming --limit-resumes", s)
			}
		}
	}
	if !found {
		t.Errorf("session %s not in status: %+v", session, st.Sessions)
	}
	if n := a.count("start"); n != 3 {
		t.Errorf("%d runs, want 3 (the task and 2 resumes after the limit)", n)
	}
	if !strings.Contains(sv.stderr(), "supervise resume") {
		t.Errorf("stderr gives no command that resumes it:\n%s", sv.stderr())
	}
}

// --start-timeout: a CLI that hangs at start (no hook, no output, no model
// request: claude-code #75613's shape) is stopped as hung, reason
// start-timeout, and the task, which had no session yet, is started again
// once; that run goes through, and supervise exits 0.
func TestStartTimeoutFakeCLI(t *testing.T) {
	t.Parallel()
	a := newAdapterEnv(t)
	a.install("claude-code/settings.json", ".claude/settings.json")
	a.set("FAKECLI_HANG_START_RUN=1")
	sv := a.start("run", "--start-timeout", "3s", "--resume-exec", "claude -p -r {session} {message}", "--", "claude", "-p", "rename the parser")
	a.waitEvent(1, "hang-start")
	if code := sv.wait(90 * time.Second); code != 0 {
		t.Fatalf("supervise exited %d, want 0; stderr:\n%s", code, sv.stderr())
	}
	st, _ := limitStatusOf(t, a.stateDir, true)
	if len(st.Runs) != 2 {
		t.Fatalf("runs %+v, want 2", st.Runs)
	}
	for _, r := range st.Runs {
		if r.Run == 1 && (r.Reason != "start-timeout" || !r.Dirty) {
			t.Errorf("run 1: reason %q dirty %v, want start-timeout, dirty", r.Reason, r.Dirty)
		}
	}
}

// --silence-timeout: a CLI that goes silent mid-turn (after the prompt's
// hook, before any tool) is stopped as hung, reason silence-timeout, and
// its session resumed once by id; the resumed turn completes.
func TestSilenceTimeoutFakeCLI(t *testing.T) {
	t.Parallel()
	a := newAdapterEnv(t)
	a.install("claude-code/settings.json", ".claude/settings.json")
	a.set("FAKECLI_SILENT_RUN=1")
	sv := a.start("run", "--silence-timeout", "3s", "--resume-exec", "claude -p -r {session} {message}", "--", "claude", "-p", "rename the parser")
	a.waitEvent(1, "silent")
	session := a.waitEvent(1, "session").arg
	if code := sv.wait(90 * time.Second); code != 0 {
		t.Fatalf("supervise exited %d, want 0; stderr:\n%s", code, sv.stderr())
	}
	st, _ := limitStatusOf(t, a.stateDir, true)
	for _, r := range st.Runs {
		if r.Run == 1 && (r.Reason != "silence-timeout" || !r.Dirty) {
			t.Errorf("run 1: reason %q dirty %v, want silence-timeout, dirty", r.Reason, r.Dirty)
		}
	}
	if got := a.waitEvent(2, "resumed").arg; got != session {
		t.Errorf("run 2 resumed %q, want %q", got, session)
	}
}

// The wait survives supervise's own death: supervise is killed (SIGKILL)
// while its task waits out a limit; the same command run again does not
// start the task afresh but re-arms the journaled retry_at, launches
// nothing before it, and resumes the session at it.
func TestLimitWaitSurvivesRestart(t *testing.T) {
	t.Parallel()
	a, args, sv, session, retryAt := geminiLimitWait(t, "6s")
	sv.signal(syscall.SIGKILL)
	sv.wait(30 * time.Second)
	if !time.Now().Before(retryAt) {
		t.Skipf("the machine is too slow for this test: supervise was killed after the reset %s", retryAt)
	}
	sv = a.start(args...)
	if code := sv.wait(90 * time.Second); code != 0 {
		t.Fatalf("the restarted supervise exited %d, want 0; stderr:\n%s", code, sv.stderr())
	}
	// The run the killed supervise had reserved for the resume never
	// started a child: it is no death, and its number is the resume's.
	st, _ := limitStatusOf(t, a.stateDir, true)
	var forked []runStatus
	for _, r := range st.Runs {
		if r.PID != 0 {
			forked = append(forked, r)
		}
	}
	if len(forked) != 2 || a.count("start") != 2 {
		t.Fatalf("runs %+v, want 2 forked: the task and its resume (not the task again)", st.Runs)
	}
	resume := forked[0] // newest first
	started, err := time.Parse(time.RFC3339Nano, resume.Started)
	if err != nil || started.Before(retryAt) {
		t.Errorf("the resume started %s (%v), before retry_at %s", resume.Started, err, retryAt)
	}
	if got := a.waitEvent(resume.Run, "resumed").arg; got != session {
		t.Errorf("run %d resumed %q, want %q", resume.Run, got, session)
	}
}

// Supervise's own deaths are not the agent's: supervise is killed
// (SIGKILL) three times while its task waits out a limit, each time run
// again with the same command. No run that never started is journaled as
// a death, the crash-loop guard stays closed, and at the reset the session
// is resumed and the task exits 0. Before, each restart's reserved run
// became a dirty supervisor-died death, the third opened the guard, and
// the task ended 5 with the resume held.
func TestLimitWaitSurvivesThreeKills(t *testing.T) {
	t.Parallel()
	a, args, sv, _, retryAt := geminiLimitWait(t, "25s")
	for i := range 3 {
		waitFor(t, 30*time.Second, "supervise waiting out the limit", func() bool {
			return strings.Contains(sv.stderr(), "waiting out a limit")
		})
		sv.signal(syscall.SIGKILL)
		sv.wait(30 * time.Second)
		if !time.Now().Before(retryAt) {
			t.Skipf("the machine is too slow for this test: supervise was killed %d times by the reset %s", i+1, retryAt)
		}
		sv = a.start(args...)
	}
	if code := sv.wait(90 * time.Second); code != 0 {
		t.Fatalf("after three kills of supervise, the task exited %d, want 0; stderr:\n%s", code, sv.stderr())
	}
	st, _ := limitStatusOf(t, a.stateDir, true)
	for _, r := range st.Runs {
		if r.PID == 0 || r.Reason == "supervisor-died" {
			t.Errorf("run %d (pid %d, reason %s): a run that never started journaled as a death", r.Run, r.PID, r.Reason)
		}
	}
	if a.count("start") != 2 {
		t.Errorf("%d starts, want 2: the task and its resume at the reset", a.count("start"))
	}
	if strings.Contains(sv.stderr(), "crash-loop guard") {
		t.Errorf("the guard spoke after supervise's own deaths:\n%s", sv.stderr())
	}
}

// geminiLimitWait starts a task of the Gemini CLI stand-in whose first run
// hits a usage limit that resets after reset, and waits until its session
// waits for the limit: the env, the command line, the supervise, the
// session and its retry_at.
func geminiLimitWait(t *testing.T, reset string) (*adapterEnv, []string, *proc, string, time.Time) {
	t.Helper()
	a := newAdapterEnv(t)
	a.install("gemini/settings.json", ".gemini/settings.json")
	a.set("FAKECLI_LIMIT_RUN=1", "FAKECLI_LIMIT_RESET="+reset)
	args := []string{"run", "--resume-exec", "gemini -r {session} -p {message}", "--", "gemini", "-p", "rename the parser"}
	sv := a.start(args...)
	session := a.waitEvent(1, "session").arg
	return a, args, sv, session, waitLimitWait(t, a.stateDir, session)
}

// waitLimitWait waits until session waits out a limit (status: waiting,
// wait limit, a retry_at), and returns its retry_at.
func waitLimitWait(t *testing.T, stateDir, session string) time.Time {
	t.Helper()
	var retryAt time.Time
	waitFor(t, 30*time.Second, "the session waiting for its limit", func() bool {
		st, ok := limitStatusOf(t, stateDir, false)
		for _, s := range st.Sessions {
			if ok && s.ID == session && s.State == "waiting" && s.Wait == "limit" && s.RetryAt != nil {
				retryAt = *s.RetryAt
				return true
			}
		}
		return false
	})
	return retryAt
}
