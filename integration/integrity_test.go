package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// supervise against its own agent (issue 21, docs/threat-model.md): each
// probe an attacker made, as a test. Fault-matrix cases 41 to 47.

// hostile is the path of the hand-rolled protocol agent (testdata/hostile.py).
func hostile(t *testing.T) string {
	t.Helper()
	if _, err := exec.LookPath("python3"); err != nil {
		t.Skip("python3 not found: the hostile agent is a Python script")
	}
	p, err := filepath.Abs("testdata/hostile.py")
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// 41. The agent truncates journal.db while supervise runs, then sends more
// markers: the journal faults, and supervise kills the tree and exits 1
// instead of wedging on the lock the fault left held. A link planted at the
// verify-failed marker's name is never written through.
func TestFault41JournalTruncatedLive(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	os.MkdirAll(e.stateDir, 0o700)
	victim := filepath.Join(e.dir, "victim")
	os.WriteFile(victim, []byte("victim\n"), 0o600)
	os.Symlink(victim, filepath.Join(e.stateDir, "journal.db.verify-failed"))
	e.set(`TESTAGENT_SCRIPT=turn-begin s1 t1; barrier; sh truncate -s 4096 "$SUPERVISE_STATE_DIR/journal.db"; turn-begin s2 t1; turn-begin s3 t1; barrier; hang`)
	sv := e.run()
	if code := sv.wait(20 * time.Second); code != 1 {
		t.Fatalf("supervise exited %d after the journal was truncated under it, want 1", code)
	}
	if !strings.Contains(sv.stderr(), "journal faulted") {
		t.Errorf("the log does not say the journal faulted:\n%s", sv.stderr())
	}
	waitFor(t, 10*time.Second, "the agent's tree to be gone", func() bool { return len(e.tagged()) == 0 })
	if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
		t.Errorf("the verify-failed marker was written through a planted link: victim holds %q", b)
	}
	// The next start checks the journal, moves the damaged one aside and
	// runs the agent.
	e.set("TESTAGENT_SCRIPT_1=exit 0", "TESTAGENT_SCRIPT=exit 0")
	next := e.run()
	if code := next.wait(20 * time.Second); code != 0 {
		t.Errorf("the next supervise exited %d, want 0:\n%s", code, next.stderr())
	}
}

// 42. A barrier whose fd would block: a FIFO the agent filled, its reader
// outside the tree and never reading. supervise writes no byte, does not
// wait, handles the agent's death, relaunches, answers status and ends on
// SIGTERM.
func TestFault42BlockingBarrierOutsideTheTree(t *testing.T) {
	t.Parallel()
	py := hostile(t)
	e := newEnv(t)
	fifo := filepath.Join(e.dir, "barrier.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// The reader outside the tree: this test, which never reads.
	r, err := os.OpenFile(fifo, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	sv := e.start("run", "--backoff-initial", "10ms", "--", "python3", py, "fifo-outside", fifo)
	waitFor(t, 10*time.Second, "the relaunch after the agent's death", func() bool { return e.count("start") >= 2 })
	st := e.status()
	if len(st.Runs) == 0 || st.run(t, 1).Reason != "exit" || !st.run(t, 1).Dirty {
		t.Errorf("run 1 = %+v, want a dirty exit (its true cause)", st.Runs)
	}
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Errorf("supervise exited %d after SIGTERM, want 0", code)
	}
	if !strings.Contains(sv.stderr(), "barrier") {
		t.Errorf("the unanswered barrier is not logged:\n%s", sv.stderr())
	}
}

// 43. The same inside the tree: the agent's own full pipe, then no pings
// under --watchdog: the watchdog kills it in time and the death is the
// watchdog's, and SIGTERM is acted on.
func TestFault43BlockingBarrierInsideTheTree(t *testing.T) {
	t.Parallel()
	py := hostile(t)
	e := newEnv(t)
	// The watchdog is armed at launch: 3s leaves Python time to start on
	// a busy machine (with 1s, every run was killed before it sent the
	// barrier, beside three busy loops). The run judged is the first one
	// that sent it, whichever that is.
	sv := e.start("run", "--watchdog", "3s", "--stop-timeout", "1s", "--backoff-initial", "10ms", "--",
		"python3", py, "pipe-inside")
	var sent event
	waitFor(t, 60*time.Second, "a run that sent the blocking barrier", func() bool {
		for _, ev := range e.events() {
			if ev.kind == "sent" {
				sent = ev
				return true
			}
		}
		return false
	})
	waitFor(t, 30*time.Second, fmt.Sprintf("the watchdog's kill of run %d and the relaunch", sent.run), func() bool {
		for _, r := range e.status().Runs {
			if r.Run > sent.run {
				return true
			}
		}
		return false
	})
	if r := e.status().run(t, sent.run); r.Reason != "watchdog" || !r.Dirty {
		t.Errorf("run %d = %+v, want a dirty watchdog death", sent.run, r)
	}
	sv.signal(syscall.SIGTERM)
	if code := sv.wait(20 * time.Second); code != 0 {
		t.Errorf("supervise exited %d after SIGTERM, want 0", code)
	}
}

// 44. A parked agent runs `supervise resume` on its own session from inside
// its tree: refused, and the session stays parked.
func TestFault44SelfResumeRefused(t *testing.T) {
	t.Parallel()
	requireLinuxBackend(t, "the control socket's peer credentials (SO_PEERCRED)")
	e := newEnv(t)
	e.set("SV="+superviseBin,
		"TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; exit 1",
		"TESTAGENT_SCRIPT_2=resumed s1 t1; barrier; exit 1",
		`TESTAGENT_SCRIPT_3=log parked; sh "$SV" resume --state-dir "$SUPERVISE_STATE_DIR" s1; log tried; hang`)
	sv := e.run("--backoff-initial", "10ms")
	e.waitLog(3, "tried")
	if e.count("sh-ok") != 0 {
		t.Fatal("supervise resume from inside the agent's tree succeeded")
	}
	if !strings.Contains(sv.stderr(), "refused a resume asked from inside the agent's tree") {
		t.Errorf("the refusal is not logged:\n%s", sv.stderr())
	}
	for _, s := range e.status().Sessions {
		if s.ID == "s1" && s.State != "parked" {
			t.Errorf("s1 is %s after the agent's own resume, want parked", s.State)
		}
	}
	// A person, outside the tree, can.
	if out, code := e.cli("resume", "--state-dir", e.stateDir, "s1"); code != 0 {
		t.Errorf("a person's resume failed (%d): %s", code, out)
	}
	e.stop(sv)
}

// 45. A request text that would become an option: the prompt
// "--dangerously-skip-permissions" through --resume-message '{prompt}'.
// The resume launch is refused and the session parked with the reason; no
// argv word from a value begins with '-'.
func TestFault45OptionThroughPrompt(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 --dangerously-skip-permissions; barrier; exit 1",
		"TESTAGENT_SCRIPT=log resumed-run; exit 0")
	sv := e.start("run", "--resume-message", "{prompt}", "--resume-exec", agentBin+" -p -r {session} {message}",
		"--", agentBin)
	if code := sv.wait(20 * time.Second); code != 5 {
		t.Fatalf("supervise exited %d, want 5 (the session parked):\n%s", code, sv.stderr())
	}
	if n := e.count("resumed-run"); n != 0 {
		t.Errorf("the resume launch ran %d times with a value as an option", n)
	}
	if !strings.Contains(sv.stderr(), "begins with '-' is read as an option") {
		t.Errorf("the reason is not given:\n%s", sv.stderr())
	}
}

// 46. A flood of new sessions, then kill -9: at most --max-open-sessions are
// opened, the rest refused (the flood's barrier answers 0), and the next run
// is handed at most that many resumes, at once.
func TestFault46SessionFlood(t *testing.T) {
	t.Parallel()
	py := hostile(t)
	e := newEnv(t)
	n := "5000"
	if os.Getenv("SUPERVISE_LONG") != "" {
		n = "50000"
	}
	e.set("TESTAGENT_SCRIPT=exit 0")
	sv := e.start("run", "--max-open-sessions", "100", "--", "python3", py, "flood", n)
	ev := e.waitEvent(1, "flooded")
	if !strings.Contains(ev.arg, "answer=0") {
		t.Errorf("the flood's barrier: %q, want 0 (turn-begins were refused)", ev.arg)
	}
	killed := time.Now()
	syscall.Kill(ev.pid, syscall.SIGKILL) // the agent, not supervise (which carries the test's id too)
	waitFor(t, 20*time.Second, "the relaunch", func() bool { return e.count("start") >= 2 })
	t.Logf("relaunched %v after the kill", time.Since(killed).Round(time.Millisecond))
	owed := 0
	for _, s := range e.status().Sessions {
		if s.State == "resume_pending" || s.State == "in_turn" {
			owed++
		}
	}
	if owed > 100 {
		t.Errorf("%d sessions owed or given a resume, want at most --max-open-sessions (100)", owed)
	}
	if fi, err := os.Stat(filepath.Join(e.stateDir, "resume.json")); err == nil && fi.Size() > 1<<20 {
		t.Errorf("resume file is %d bytes", fi.Size())
	}
	sv.signal(syscall.SIGTERM)
	sv.wait(30 * time.Second)
}

// 47. The agent removes the state dir while supervise runs: the journal is
// gone from where the next start looks, so supervise fails closed: it stops
// the agent and exits 1 rather than journal into a file nobody will read.
func TestFault47StateDirRemoved(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.set(`TESTAGENT_SCRIPT=turn-begin s1 t1; barrier; sh rm -rf "$SUPERVISE_STATE_DIR"; log removed; hang`)
	sv := e.run("--stop-timeout", "1s")
	e.waitLog(1, "removed")
	if code := sv.wait(20 * time.Second); code != 1 {
		t.Fatalf("supervise exited %d after its state dir was removed, want 1:\n%s", code, sv.stderr())
	}
	if !strings.Contains(sv.stderr(), "state dir") {
		t.Errorf("the log does not say why:\n%s", sv.stderr())
	}
	waitFor(t, 10*time.Second, "the agent's tree to be gone", func() bool { return len(e.tagged()) == 0 })
}

// 48. --user nobody (root only): the agent's tree runs as uid 65534, cannot
// list the state dir nor read the journal nor resume its session, and its
// markers are journaled.
func TestFault48User(t *testing.T) {
	t.Parallel()
	if os.Geteuid() != 0 {
		t.Skip("--user needs root")
	}
	requireLinuxBackend(t, "the notify sender check by pid across uids")
	// A world-searchable place for the state dir, the output and a copy of
	// supervise the agent can run (the test's own temp dirs are 0700).
	base, err := os.MkdirTemp("", "supervise-user-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(base) })
	os.Chmod(base, 0o755)
	out := filepath.Join(base, "out")
	os.Mkdir(out, 0o777)
	os.Chmod(out, 0o777)
	sv := filepath.Join(base, "supervise")
	b, err := os.ReadFile(superviseBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(sv, b, 0o755); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(base, "state")
	script := `id -u > $OUT/uid; ls "$SUPERVISE_STATE_DIR" 2>/dev/null; echo $? > $OUT/ls; ` +
		`cat "$SUPERVISE_STATE_DIR/journal.db" >/dev/null 2>&1; echo $? > $OUT/cat; ` +
		`$SV notify turn-begin --session u1 --turn t1 --barrier; echo $? > $OUT/barrier; ` +
		`$SV resume u1 >/dev/null 2>&1; echo $? > $OUT/resume; ` +
		`$SV notify turn-end --session u1 --turn t1 --outcome completed --barrier`
	cmd := exec.Command(superviseBin, "run", "--state-dir", state, "--user", "nobody", "--restart", "never", "--", "sh", "-c", script)
	cmd.Env = append(os.Environ(), "OUT="+out, "SV="+sv)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("supervise --user nobody: %v\n%s", err, b)
	}
	read := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(out, name))
		return strings.TrimSpace(string(b))
	}
	if got := read("uid"); got != "65534" {
		t.Errorf("the agent ran as uid %q, want 65534", got)
	}
	if read("ls") == "0" || read("cat") == "0" {
		t.Errorf("the agent listed the state dir (%s) or read the journal (%s)", read("ls"), read("cat"))
	}
	if read("barrier") != "0" {
		t.Errorf("the agent's marker was not journaled: barrier exit %s", read("barrier"))
	}
	if read("resume") == "0" {
		t.Error("the agent resumed its own session")
	}
	st, code := exec.Command(superviseBin, "status", "--json", "--state-dir", state).Output()
	if code != nil || !strings.Contains(string(st), `"u1"`) {
		t.Errorf("session u1 not journaled: %v\n%s", code, st)
	}
}

// 49. A link planted at every name supervise creates in its state dir is
// never followed: at journal.db the link is moved aside as damage and a
// fresh journal starts; at control.sock supervise refuses to start; at the
// resume file, the owner record and their temporary names the file is
// written beside the link's target, never into it (the "planted links"
// case of TestStateDirSafety); at the verify-failed marker, case 41.
func TestFault49LinksAtEveryName(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		code int
	}{
		{"journal.db", 0},
		{"control.sock", 1},
	} {
		e := newEnv(t)
		e.set("TESTAGENT_SCRIPT=exit 0")
		os.MkdirAll(e.stateDir, 0o700)
		victim := filepath.Join(e.dir, "victim")
		os.WriteFile(victim, []byte("victim\n"), 0o600)
		if err := os.Symlink(victim, filepath.Join(e.stateDir, c.name)); err != nil {
			t.Fatal(err)
		}
		sv := e.run("--restart", "never")
		if code := sv.wait(20 * time.Second); code != c.code {
			t.Errorf("a link at %s: exit %d, want %d:\n%s", c.name, code, c.code, sv.stderr())
		}
		if b, _ := os.ReadFile(victim); string(b) != "victim\n" {
			t.Errorf("a link at %s was written through: the victim holds %q", c.name, b)
		}
	}
}
