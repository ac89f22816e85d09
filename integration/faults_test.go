package integration

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/child"
	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

// Fault classes of the chaos suite (reliability.md section 5), one test
// each. The randomized schedule is TestChaos.

// startTimes returns the start time of each run, from the agent log.
func (e *env) startTimes() []time.Time {
	var out []time.Time
	for _, ev := range e.events() {
		if ev.kind == "start" {
			ns, _ := strconv.ParseInt(strings.TrimPrefix(ev.arg, "t="), 10, 64)
			out = append(out, time.Unix(0, ns))
		}
	}
	return out
}

// Crash loop: the backoff schedule is what the policy says, the guard
// trips, and its state survives kill -9 of supervise.
func TestFaultCrashLoop(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=exit 1")
	flags := []string{"--backoff-initial", "100ms", "--backoff-max", "800ms", "--guard-trip", "3", "--guard-gap", "1m"}
	sv := e.run(flags...)
	waitFor(t, 20*time.Second, "6 starts", func() bool { return len(e.startTimes()) >= 6 })
	starts := e.startTimes()
	want := []time.Duration{100, 200, 400, 800, 800} // ms, doubling to the cap, ±10% jitter
	for i, w := range want {
		// Only the lower bound is a rule (the backoff was waited); how much
		// later the next start comes depends on the machine's load.
		gap := starts[i+1].Sub(starts[i])
		if lo := time.Duration(float64(w)*0.88) * time.Millisecond; gap < lo {
			t.Errorf("gap %d: %v, want at least %v (%dms less jitter)", i+1, gap, lo, w)
		}
	}
	if raw := e.statusRaw(); !strings.Contains(raw, `"open": true`) {
		t.Errorf("crash-loop guard not open after a crash loop:\n%s", raw)
	}
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	// The guard survives kill -9 of supervise: read offline, then live.
	if raw := e.statusRaw(); !strings.Contains(raw, `"open": true`) {
		t.Errorf("guard state lost with supervise:\n%s", raw)
	}
	e.set("TESTAGENT_SCRIPT=hang")
	sv = e.run(flags...)
	waitFor(t, 20*time.Second, "a healthy run", func() bool { return e.count("hang") > 0 })
	if raw := e.statusRaw(); !strings.Contains(raw, `"open": true`) {
		t.Errorf("guard not open after restarting supervise:\n%s", raw)
	}
	e.stop(sv)
}

// A slow crash loop (each run healthy by uptime, so relaunched at once:
// --healthy-after 1s here, the default 10s would back off) still trips the
// gap-chained guard: no fixed window of guard-gap width ever holds more
// than two of these deaths.
func TestFaultSlowCrashLoop(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=sleep 1500ms; exit 1")
	sv := e.run("--guard-trip", "3", "--guard-gap", "2s", "--healthy-after", "1s")
	waitFor(t, 30*time.Second, "4 starts", func() bool { return len(e.startTimes()) >= 4 })
	starts := e.startTimes()
	for i := 1; i < 4; i++ {
		if gap := starts[i].Sub(starts[i-1]); gap < 1500*time.Millisecond {
			t.Errorf("gap %v: the loop is not slow", gap)
		}
	}
	if raw := e.statusRaw(); !strings.Contains(raw, `"open": true`) || !strings.Contains(raw, `"chain": 3`) {
		t.Errorf("a slow loop did not trip the guard:\n%s", raw)
	}
	e.stop(sv)
}

// Exec failures after the first start never hot-loop, are recorded with
// 127 or 126, and supervise recovers when the binary is back.
func TestFaultExecFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(path string)
		code   int
	}{
		{"missing binary", func(p string) { os.Remove(p) }, 127},
		{"not executable", func(p string) { os.Chmod(p, 0o644) }, 126},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bin := filepath.Join(e.dir, "agent")
			copyFile(t, agentBin, bin)
			e.set("TESTAGENT_SCRIPT=hang")
			sv := e.start("run", "--backoff-initial", "200ms", "--backoff-max", "1s", "--", bin)
			first := e.waitEvent(1, "hang")
			tc.break_(bin)
			syscall.Kill(first.pid, syscall.SIGKILL)
			waitFor(t, 20*time.Second, "three failed launches", func() bool {
				return strings.Count(sv.stderr(), "agent could not be started") >= 3
			})
			// No hot loop: the journal shows the backoff between the
			// failed launches, doubling from 200ms (less jitter).
			st := e.status()
			backoff := 200 * time.Millisecond
			for n := 2; n <= 3; n++ {
				r, next := st.run(t, n), st.run(t, n+1)
				if r.Reason != "exec-failed" || r.ExitCode != tc.code || !r.Dirty {
					t.Errorf("run %d = %+v, want exec-failed %d", n, r, tc.code)
				}
				if r.Ended == nil {
					t.Fatalf("run %d has no end", n)
				}
				ended, _ := time.Parse(time.RFC3339Nano, *r.Ended)
				started, _ := time.Parse(time.RFC3339Nano, next.Started)
				if gap := started.Sub(ended); gap < backoff*88/100 {
					t.Errorf("run %d started %v after run %d failed, want at least %v", n+1, gap, n, backoff*88/100)
				}
				backoff *= 2
			}
			copyFile(t, agentBin, bin) // fixed: supervise recovers by itself
			waitFor(t, 20*time.Second, "a run after the fix", func() bool { return e.count("hang") >= 2 })
			e.stop(sv)
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(to)
	if err := os.WriteFile(to, b, 0o755); err != nil {
		t.Fatal(err)
	}
}

// A damaged journal is reported, moved aside with its bytes intact, and a
// fresh one starts: nothing is auto-resumed from state that cannot be
// verified, and supervise does not crash-loop.
func TestFaultCorruptJournal(t *testing.T) {
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"truncated into its pages", func(t *testing.T, p string) {
			// bbolt preallocates, so cutting a small journal in half only
			// drops unused space (and rightly opens); cut into the pages
			// just past the two meta pages instead.
			os.Truncate(p, 3*4096)
		}},
		{"both meta pages bit-flipped", func(t *testing.T, p string) {
			b, _ := os.ReadFile(p)
			b[20] ^= 0x40
			b[4096+20] ^= 0x40
			os.WriteFile(p, b, 0o600)
		}},
		{"not a bolt file", func(t *testing.T, p string) {
			os.WriteFile(p, bytes.Repeat([]byte("this is not a journal\n"), 500), 0o600)
		}},
		{"a directory", func(t *testing.T, p string) {
			os.Remove(p)
			os.Mkdir(p, 0o700)
			os.WriteFile(filepath.Join(p, "inside"), []byte("x"), 0o600)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			// A session mid-turn when supervise dies: a resume would be owed.
			e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; hang", "TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
			sv := e.run()
			e.waitEvent(1, "barrier-ok")
			sv.signal(syscall.SIGKILL)
			sv.wait(10 * time.Second)
			path := filepath.Join(e.stateDir, "journal.db")
			tc.damage(t, path)
			before := snapshotPath(t, path)

			// The fresh journal numbers runs from 1 again.
			e.set("TESTAGENT_SCRIPT_1=take-resumes; log took-all; hang")
			sv = e.run()
			ev := e.waitLog(0, "took-all")
			if got := e.took(0); len(got) != 0 {
				t.Errorf("resumed %v from a damaged journal", got)
			}
			if !strings.Contains(sv.stderr(), "journal is damaged: moved it aside") {
				t.Errorf("no clear error:\n%s", sv.stderr())
			}
			moved, _ := filepath.Glob(path + ".corrupt-*")
			if len(moved) != 1 {
				t.Fatalf("moved aside: %v", moved)
			}
			if after := snapshotPath(t, moved[0]); after != before {
				t.Error("the damaged journal was modified")
			}
			if _, ok := e.status().session("s1"); ok {
				t.Error("s1 carried over from unverifiable state")
			}
			if ev.run != 1 {
				t.Logf("fresh journal started at run %d", ev.run)
			}
			e.stop(sv)
		})
	}
}

// snapshotPath is a fingerprint of a file or a directory's files.
func snapshotPath(t *testing.T, path string) string {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if !fi.IsDir() {
		b, _ := os.ReadFile(path)
		return fmt.Sprintf("file %d %x", len(b), b[:min(len(b), 64)])
	}
	ents, _ := os.ReadDir(path)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return "dir " + strings.Join(names, ",")
}

// Stale socket files left by a kill -9 are replaced; a non-socket file in
// the socket's place is a clear error, never deleted.
func TestFaultStaleSockets(t *testing.T) {
	e := newEnv(t)
	sv := e.run()
	e.waitEvent(1, "start")
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	for _, p := range []string{"control.sock", "notify/notify.sock"} {
		if fi, err := os.Lstat(filepath.Join(e.stateDir, p)); err != nil || fi.Mode()&os.ModeSocket == 0 {
			t.Fatalf("expected a stale socket at %s: %v", p, err)
		}
	}
	sv = e.run()
	// The agent starts again: as run 2, or as run 1 anew when the kill
	// came before the first launch was journaled (a run never recorded as
	// started is no death: issue 43).
	waitFor(t, 20*time.Second, "the agent to start again", func() bool {
		n := 0
		for _, ev := range e.events() {
			if ev.kind == "start" {
				n++
			}
		}
		return n >= 2
	})
	if !e.status().Supervisor.Running {
		t.Error("control socket not answering after replacing a stale one")
	}
	e.stop(sv)

	notifySock := filepath.Join(e.stateDir, "notify", "notify.sock")
	os.WriteFile(notifySock, []byte("precious"), 0o600)
	sv = e.run()
	if code := sv.wait(10 * time.Second); code != 1 || !strings.Contains(sv.stderr(), "not a socket") {
		t.Errorf("a regular file at the socket path: exit %d\n%s", code, sv.stderr())
	}
	if b, _ := os.ReadFile(notifySock); string(b) != "precious" {
		t.Error("supervise deleted a file that was not its socket")
	}
}

// PID reuse: the journal names a child by pid and start time; a live
// process that holds that pid with another start time is never signalled.
func TestFaultPIDReuse(t *testing.T) {
	e := newEnv(t)
	sv := e.run()
	e.waitEvent(1, "start")
	e.stop(sv)

	stranger := exec.Command("sleep", "1000")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer stranger.Process.Kill()
	start, err := child.StartTime(context.Background(), stranger.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	forge := func(startTime int64) {
		db, err := journal.Open(filepath.Join(e.stateDir, "journal.db"), journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer db.Close()
		db.Update(func(tx *journal.Tx) error {
			tx.SetClean(false)
			n, _ := tx.NextRun()
			tx.PutRun(record.Run{Run: 100 + n, PID: stranger.Process.Pid, StartTime: startTime, Reason: record.ReasonRunning})
			return tx.SetChild(&journal.Child{Run: 100 + n, PID: stranger.Process.Pid, StartTime: startTime,
				PGID: stranger.Process.Pid, BootID: child.BootID()})
		})
	}
	// The recorded child "was" this pid, but started at another time: the
	// pid was reused. It must survive.
	forge(start - 60_000)
	sv = e.run()
	waitFor(t, 20*time.Second, "the next run", func() bool { return e.count("hang") >= 2 })
	if !alive(stranger.Process.Pid) {
		t.Fatal("supervise killed an unrelated process that reused the old child's pid")
	}
	e.stop(sv)
	// Control: with the right start time it is the orphan, and it is killed.
	forge(start)
	sv = e.run()
	waitFor(t, 10*time.Second, "the real orphan killed", func() bool { return !alive(stranger.Process.Pid) })
	waitFor(t, 20*time.Second, "the next run", func() bool { return e.count("hang") >= 3 })
	e.stop(sv)
}

// supervise as PID 1 of a PID namespace: orphans are reaped (no zombies),
// the agent's exit status passes through exactly, SIGTERM is handled with
// a deliberate exit code.
func TestFaultPID1(t *testing.T) {
	if out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot create a PID namespace here (needs root or user namespaces): %v %s", err, out)
	}
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=orphans 30; sleep 1s; log checked; sleep 1s; exit 7")
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", superviseBin, "run", "--restart", "never", "--", agentBin)
	cmd.Env = append(os.Environ(), e.vars...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e.waitLog(1, "checked")
	// Find supervise (pid 1 inside, a child of unshare outside) and count
	// zombies among its children: orphans that exited were reaped.
	sup := childrenOf(cmd.Process.Pid)
	if len(sup) != 1 {
		t.Fatalf("supervise not found under unshare: %v", sup)
	}
	if z := zombiesOf(sup[0]); z > 0 {
		t.Errorf("%d zombies under supervise as PID 1", z)
	}
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 7 {
		t.Errorf("exit status %d, want the agent's 7 passed through\n%s", code, stderr.String())
	}

	// SIGTERM to PID 1: a clean stop with exit 0, not Go's default 2.
	e2 := newEnv(t)
	e2.set("TESTAGENT_SCRIPT=hang")
	cmd = exec.Command("unshare", "--pid", "--fork", "--mount-proc", superviseBin, "run", "--", agentBin)
	cmd.Env = append(os.Environ(), e2.vars...)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	e2.waitEvent(1, "hang")
	sup = childrenOf(cmd.Process.Pid)
	syscall.Kill(sup[0], syscall.SIGTERM)
	cmd.Wait()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("SIGTERM to supervise as PID 1: exit %d, want 0", code)
	}
}

func childrenOf(pid int) []int {
	tasks, _ := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	var out []int
	for _, t := range tasks {
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/children", pid, t.Name()))
		for _, f := range strings.Fields(string(b)) {
			n, _ := strconv.Atoi(f)
			out = append(out, n)
		}
	}
	return out
}

// zombiesOf counts children of pid that stay zombies: exited, not reaped.
func zombiesOf(pid int) int {
	n := 0
	for _, c := range childrenOf(pid) {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c))
		if err != nil {
			continue // reaped meanwhile
		}
		if i := bytes.LastIndexByte(b, ')'); i > 0 && i+2 < len(b) && b[i+2] == 'Z' {
			time.Sleep(100 * time.Millisecond) // one that just exited is reaped at once
			if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c)); err == nil && bytes.Contains(b, []byte(") Z ")) {
				n++
			}
		}
	}
	return n
}

// fd spam on the notify socket: every fd received is closed, so the
// supervisor's fd count stays flat.
func TestFaultFDSpam(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=log ready; listen")
	sv := e.run()
	e.waitLog(1, "ready")
	fds := func() int {
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", sv.cmd.Process.Pid))
		return len(ents)
	}
	before := fds()
	e.tell("fdspam 2000; barrier")
	if after := fds(); after > before+2 {
		t.Errorf("supervise's fds grew from %d to %d over 2000 datagrams carrying 8 fds each", before, after)
	}
	e.stop(sv)
}

// A run reserved by a supervise that died before recording its launch,
// with no resume handed to it, started no child that any turn was in: it
// is no death, and the next supervise launches under its number (nothing
// of it was journaled but the reservation). One that was handed a resume
// may have forked and taken it: it is a dirty supervisor-died death for
// that session, and the next run gets a new number, never a reused one.
func TestFaultLostReservation(t *testing.T) {
	for _, handed := range []bool{false, true} {
		e := newEnv(t)
		sv := e.run()
		e.waitEvent(1, "start")
		e.stop(sv)
		db, err := journal.Open(filepath.Join(e.stateDir, "journal.db"), journal.Options{})
		if err != nil {
			t.Fatal(err)
		}
		db.Update(func(tx *journal.Tx) error {
			tx.SetClean(false)
			if handed {
				if err := tx.PutSession(record.Session{ID: "s1", State: record.ResumePending, Turn: "t1", CrashCount: 1,
					TurnStarted: time.Now(), Resume: &record.Resume{Attempt: 1, Run: 2, Delivered: 1, Since: time.Now(), Message: "go on"}}); err != nil {
					return err
				}
			}
			return tx.PutRun(record.Run{Run: 2, Reason: record.ReasonStarting, Started: time.Now()})
		})
		db.Close()
		sv = e.run()
		want := 2
		if handed {
			want = 3
		}
		e.waitEvent(want, "start")
		st := e.status()
		switch r := st.run(t, 2); {
		case handed && (r.Reason != "supervisor-died" || !r.Dirty):
			t.Errorf("a reservation handed a resume recorded as %+v, want a supervisor-died death", r)
		case !handed && (r.Reason == "supervisor-died" || r.PID == 0):
			t.Errorf("a reservation never launched nor handed a resume recorded as %+v, want run 2 launched anew", r)
		}
		if st.Child.Run != want {
			t.Errorf("handed %v: child run %d, want %d", handed, st.Child.Run, want)
		}
		if st.Guard.Chain != 0 {
			t.Errorf("handed %v: supervise's own death chained in the crash-loop guard: %+v", handed, st.Guard)
		}
		e.stop(sv)
	}
}

// Disk full under the journal: commit errors are surfaced, nothing is
// acknowledged that was not committed, and supervise recovers when space
// is back. Needs root for a small tmpfs.
func TestFaultDiskFull(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs")
	}
	dir := t.TempDir()
	mnt := filepath.Join(dir, "mnt")
	os.Mkdir(mnt, 0o700)
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { exec.Command("umount", "-l", mnt).Run() })
	e := newEnv(t)
	e.stateDir = filepath.Join(mnt, "state")
	e.vars = append(e.vars, "SUPERVISE_STATE_DIR="+e.stateDir)
	e.set("TESTAGENT_SCRIPT=log ready; listen")
	sv := e.run()
	e.waitLog(1, "ready")
	// Fill the rest of the filesystem.
	filler := filepath.Join(mnt, "filler")
	exec.Command("dd", "if=/dev/zero", "of="+filler, "bs=64k").Run()
	e.tell("fill 30")
	if !strings.Contains(sv.stderr(), "commit failed") {
		t.Fatalf("no commit error surfaced on a full disk:\n%s", sv.stderr())
	}
	acked := map[string]bool{}
	unacked := 0
	for _, ev := range e.events() {
		switch ev.kind {
		case "fill-acked":
			acked[ev.arg] = true
		case "fill-unacked":
			unacked++
		}
	}
	if unacked == 0 {
		t.Error("every marker was acknowledged on a full disk")
	}
	if raw := e.statusRaw(); strings.Contains(raw, `"commit_errors": 0`) {
		t.Errorf("commit errors not counted:\n%s", raw)
	}
	// Space back: supervise catches up by itself.
	os.Remove(filler)
	e.tell("fill 2")
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	// Everything that was acknowledged is in the journal.
	db, err := journal.Open(filepath.Join(e.stateDir, "journal.db"), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.Verify(); err != nil {
		t.Fatal(err)
	}
	db.View(func(tx *journal.Tx) error {
		for id := range acked {
			if _, ok, _ := tx.Session(id); !ok {
				t.Errorf("acknowledged marker for %s is not in the journal", id)
			}
		}
		return nil
	})
	for _, ev := range e.events() {
		if ev.kind == "fill-acked" && !acked[ev.arg] {
			db.View(func(tx *journal.Tx) error {
				if _, ok, _ := tx.Session(ev.arg); !ok {
					t.Errorf("acknowledged marker for %s (after recovery) is not in the journal", ev.arg)
				}
				return nil
			})
		}
	}
}

// After an unclean stop a large journal is checked in the background: the
// agent starts at once when no resume is owed; the first launch waits for
// the check when one is; a journal that opens but fails the full check
// holds automatic resumes, and the next start moves it aside.
func TestFaultBackgroundVerify(t *testing.T) {
	e := newEnv(t)
	e.set("SUPERVISE_FAILPOINT_VERIFY_INLINE=0", // every journal counts as large
		"TESTAGENT_SCRIPT_1=turn-begin s1 t1; barrier; hang", "TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run()
	e.waitEvent(1, "barrier-ok")
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)
	// A resume is owed: the first launch waits for the check, then delivers.
	sv = e.run()
	e.waitLog(2, "took-all")
	if got := e.took(2); len(got) != 1 {
		t.Errorf("took %v after the background check, want s1", got)
	}
	for _, want := range []string{"checking the journal in the background", "waiting for the journal check", "journal checked: consistent"} {
		if !strings.Contains(sv.stderr(), want) {
			t.Errorf("log lacks %q:\n%s", want, sv.stderr())
		}
	}
	sv.signal(syscall.SIGKILL)
	sv.wait(10 * time.Second)

	// Damage a page boot does not read: the journal opens, the full check
	// fails in the background.
	path := filepath.Join(e.stateDir, "journal.db")
	db, err := journal.Open(path, journal.Options{})
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *journal.Tx) error { // old runs fill pages boot never reads
		for i := uint64(1000); i < 3000; i++ {
			tx.PutRun(record.Run{Run: i, Reason: record.ReasonExit, Argv: []string{strings.Repeat("x", 200)}})
		}
		return nil
	})
	db.Update(func(tx *journal.Tx) error { return tx.SetClean(false) })
	db.Close()
	b, _ := os.ReadFile(path)
	page := 4096
	for off := 8 * page; off < 16*page; off += page {
		copy(b[off:off+16], make([]byte, 16)) // page headers: id, flags, count
	}
	os.WriteFile(path, b, 0o600)
	sv = e.run()
	waitFor(t, 20*time.Second, "the background check to fail", func() bool {
		return strings.Contains(sv.stderr(), "the journal is damaged") || !sv.running()
	})
	if strings.Contains(sv.stderr(), "moved it aside") {
		t.Skipf("this damage was caught at open already:\n%s", sv.stderr())
	}
	// A damaged journal is fatal: the agent is stopped, supervise exits 1
	// on purpose (never a panic), and leaves a marker for the next start.
	if code := sv.wait(20 * time.Second); code != 1 || strings.Contains(sv.stderr(), "goroutine ") {
		t.Errorf("exit %d after the failed check (want 1, no panic):\n%s", code, sv.stderr())
	}
	if _, err := os.Stat(path + ".verify-failed"); err != nil {
		t.Errorf("no marker for the next start: %v", err)
	}
	// The next start checks synchronously and moves the journal aside.
	sv = e.run()
	waitFor(t, 20*time.Second, "the quarantine", func() bool { return strings.Contains(sv.stderr(), "moved it aside") })
	if _, err := os.Stat(path + ".verify-failed"); err == nil {
		t.Error("the marker outlived the quarantine")
	}
	e.stop(sv)
}
