package integration

import (
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// TestRealLimitWaitedOut: each pinned CLI, set up as its example says and
// run by supervise in task mode, meets its provider's usage-limit answer
// (mockapi.Until: every agent request refused until the reset, then
// answered). The CLI exits 1 at once (docs/limits.md); supervise shows the
// session waiting with wait limit and a retry_at at the reset, launches
// nothing before it, then resumes the same session by id with the
// template, the CLI finishes the turn, and supervise exits 0.
//
// Claude Code with an API key names no reset in its words and waits out
// a retry-after under about a minute itself, so its limit is 90 s away and
// supervise runs with --api-proxy on, which reads the reset from the 429's
// headers. Codex names the reset to the minute and Gemini in seconds; their
// limits are 20 s away (SUPERVISE_LIMIT_RESET overrides all three, e.g.
// 90s for the run by hand).
//
// Gemini CLI keeps no session whose first request was refused: its resume
// says "No previous sessions found for this project", and supervise starts
// the task again once as a new session (the lost-conversation rule: no tool
// had run), at the reset, never before it.
func TestRealLimitWaitedOut(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cli   realCLI
		in    time.Duration
		flags []string
		lost  bool // the CLI kept no conversation to resume: the task runs again once
	}{
		{claudeCodeCLI(), 90 * time.Second, []string{"--api-proxy", "on"}, false},
		{codexCLI(), 20 * time.Second, nil, false},
		{geminiCLI(), 20 * time.Second, nil, true},
	} {
		t.Run(c.cli.bin, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, c.cli)
			in := c.in
			if d, err := time.ParseDuration(os.Getenv("SUPERVISE_LIMIT_RESET")); err == nil && d > 0 {
				in = d
			}
			reset := time.Now().Add(in).Truncate(time.Second)
			r.answer(mockapi.Until(reset, func(mockapi.Request) mockapi.Reply { return mockapi.Reply{Kind: mockapi.Text, Text: "Done."} }))
			sv := r.run(c.flags...)
			var session string
			var retryAt time.Time
			waitFor(t, 120*time.Second, "the session waiting for its limit", func() bool {
				st, ok := limitStatusOf(t, r.stateDir, false)
				for _, s := range st.Sessions {
					if ok && s.State == "waiting" && s.Wait == "limit" && s.RetryAt != nil {
						session, retryAt = s.ID, *s.RetryAt
						return true
					}
				}
				return false
			})
			seen := time.Now()
			if !seen.Before(reset) {
				t.Fatalf("the wait was first seen at %s, after the reset %s", seen, reset)
			}
			if retryAt.Before(reset) || retryAt.After(reset.Add(90*time.Second)) {
				t.Errorf("retry_at %s, want at or just after the reset %s", retryAt, reset)
			}
			if code := r.wait(sv, 300*time.Second); code != 0 {
				t.Fatalf("supervise exited %d, want 0; stderr:\n%s", code, sv.stderr())
			}
			st, _ := limitStatusOf(t, r.stateDir, true)
			runs, fresh := 2, 1
			if c.lost {
				runs, fresh = 3, 2
			}
			if len(st.Runs) != runs {
				t.Errorf("%d runs, want %d (the task, and its resume at the reset)", len(st.Runs), runs)
			}
			for _, run := range st.Runs {
				switch run.Run {
				case 1:
					if run.Reason != "limit" || run.Dirty {
						t.Errorf("run 1: reason %q dirty %v, want limit, not dirty", run.Reason, run.Dirty)
					}
				case 2:
					started, err := time.Parse(time.RFC3339Nano, run.Started)
					if err != nil || started.Before(retryAt) {
						t.Errorf("run 2 started %s (%v), before retry_at %s", run.Started, err, retryAt)
					}
				}
			}
			var resumed, continued bool
			refused := 0
			for _, q := range r.api.AgentRequests() {
				if q.Time.Before(reset) {
					refused++
				}
				if q.Session == session && !q.Time.Before(reset) {
					resumed = true
					continued = continued || strings.Contains(q.LastUser, "limit")
				}
			}
			if refused != 1 {
				t.Errorf("%d agent requests before the reset, want 1 (the refused one: nothing launched before the reset)", refused)
			}
			if !c.lost && (!resumed || !continued) {
				t.Errorf("no request of session %s after the reset carrying the limit's continuation (resumed %v, continued %v)", session, resumed, continued)
			}
			if n := r.freshStarts(); n != fresh {
				t.Errorf("the task opened %d conversations, want %d", n, fresh)
			}
			t.Logf("summary %s limit: exit 0, %d agent requests, retry_at %s for a reset at %s (%s after the limit was seen)",
				c.cli.bin, len(r.api.AgentRequests()), retryAt.Format(time.TimeOnly), reset.Format(time.TimeOnly), retryAt.Sub(seen).Round(time.Second))
		})
	}
}

// TestRealLimitWaitOff: a CI job that reschedules itself runs supervise
// with --limit-wait off. Each pinned CLI that names its reset (Codex to the
// minute, Gemini in seconds) meets its provider's usage limit an hour
// away: supervise exits 75 (EX_TEMPFAIL) at once, with the reset on stderr
// and in status, and launches nothing after the one run.
func TestRealLimitWaitOff(t *testing.T) {
	t.Parallel()
	for _, cli := range []realCLI{codexCLI(), geminiCLI()} {
		t.Run(cli.bin, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, cli)
			reset := time.Now().Add(time.Hour).Truncate(time.Second)
			r.answer(mockapi.Until(reset, func(mockapi.Request) mockapi.Reply { return mockapi.Reply{Kind: mockapi.Text, Text: "Done."} }))
			sv := r.run("--limit-wait", "off")
			if code := r.wait(sv, 120*time.Second); code != 75 {
				t.Fatalf("supervise exited %d, want 75; stderr:\n%s", code, sv.stderr())
			}
			if !strings.Contains(sv.stderr(), "reset") {
				t.Errorf("stderr does not say when the limit resets:\n%s", sv.stderr())
			}
			st, _ := limitStatusOf(t, r.stateDir, true)
			if len(st.Runs) != 1 || st.Runs[0].Reason != "limit" {
				t.Errorf("runs %+v, want the one run, ended by the limit", st.Runs)
			}
			var waiting bool
			for _, s := range st.Sessions {
				waiting = waiting || (s.Wait == "limit" && s.RetryAt != nil && !s.RetryAt.Before(reset))
			}
			if !waiting {
				t.Errorf("status shows no session waiting for the limit with its reset: %+v", st.Sessions)
			}
			t.Logf("summary %s --limit-wait off: exit 75, %d agent requests", cli.bin, len(r.api.AgentRequests()))
		})
	}
}

// TestRealLimitSurvivesSupervisorKills: as TestRealLimitWaitedOut, but
// supervise itself is killed (SIGKILL) three times during the wait, and
// the same command is run again each time. Supervise's own deaths are not
// the agent's: no run that never started is journaled as a death, the
// crash-loop guard stays closed, and at the reset the session is resumed
// and the task exits 0 (before: each restart's reserved run became a dirty
// supervisor-died death, the third opened the guard, and the task ended 5
// with the resume held). Claude Code under --api-proxy on, Codex with its
// words.
func TestRealLimitSurvivesSupervisorKills(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		cli   realCLI
		in    time.Duration
		flags []string
	}{
		{claudeCodeCLI(), 90 * time.Second, []string{"--api-proxy", "on"}},
		{codexCLI(), 20 * time.Second, nil},
	} {
		t.Run(c.cli.bin, func(t *testing.T) {
			t.Parallel()
			r := newRealEnv(t, c.cli)
			reset := time.Now().Add(c.in).Truncate(time.Second)
			r.answer(mockapi.Until(reset, func(mockapi.Request) mockapi.Reply { return mockapi.Reply{Kind: mockapi.Text, Text: "Done."} }))
			sv := r.run(c.flags...)
			var retryAt time.Time
			waitFor(t, 120*time.Second, "the session waiting for its limit", func() bool {
				st, ok := limitStatusOf(t, r.stateDir, false)
				for _, s := range st.Sessions {
					if ok && s.State == "waiting" && s.Wait == "limit" && s.RetryAt != nil {
						retryAt = *s.RetryAt
						return true
					}
				}
				return false
			})
			for i := range 3 {
				waitFor(t, 60*time.Second, "supervise waiting out the limit", func() bool {
					return strings.Contains(sv.stderr(), "waiting out a limit")
				})
				sv.signal(syscall.SIGKILL)
				sv.wait(30 * time.Second)
				if !time.Now().Before(retryAt) {
					t.Skipf("the machine is too slow for this test: supervise was killed %d times by the reset %s", i+1, retryAt)
				}
				sv = r.run(c.flags...)
			}
			if code := r.wait(sv, 300*time.Second); code != 0 {
				t.Fatalf("after three kills of supervise, the task exited %d, want 0; stderr:\n%s", code, sv.stderr())
			}
			st, _ := limitStatusOf(t, r.stateDir, true)
			for _, run := range st.Runs {
				if run.Reason == "supervisor-died" || run.PID == 0 {
					t.Errorf("run %d (pid %d, reason %s): a run that never started journaled as a death", run.Run, run.PID, run.Reason)
				}
			}
			if len(st.Runs) != 2 {
				t.Errorf("%d runs, want 2: the task and its resume at the reset", len(st.Runs))
			}
			if n := r.freshStarts(); n != 1 {
				t.Errorf("the task opened %d conversations, want 1", n)
			}
		})
	}
}
