package integration

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
)

// Fault matrix, reliability.md section 5 B and C: child death and process
// handling. docs/chaos.md has the table that names these tests.

// long skips t unless SUPERVISE_LONG=1 (set by .ci/run): long or root-only
// cases stay out of a plain go test ./....
func long(t *testing.T, why string) {
	t.Helper()
	if os.Getenv("SUPERVISE_LONG") != "1" {
		t.Skipf("set SUPERVISE_LONG=1 to run: %s", why)
	}
}

// iterations sizes a randomized or repeated case: short in go test ./...,
// long with SUPERVISE_LONG=1, and a third of short under -race (the
// integration suite runs twice in CI, once with -race, where every process
// is slower and the race detector is what is being exercised).
func iterations(short, long int) int {
	switch {
	case raceEnabled:
		return max(3, short/3)
	case os.Getenv("SUPERVISE_LONG") == "1":
		return long
	}
	return short
}

// relaunchDelays are the delays supervise announced ("relaunch in D").
func relaunchDelays(stderr string) []time.Duration {
	var out []time.Duration
	for _, m := range regexp.MustCompile(`next="relaunch in ([0-9.]+m?s)"`).FindAllStringSubmatch(stderr, -1) {
		d, _ := time.ParseDuration(m[1])
		out = append(out, d)
	}
	return out
}

// 13. STOPPING=1 then exit 0 with no open turn is a clean end: not a
// crash, the crash-loop guard (trips at 2 here) untouched, nothing resumed.
func TestFault13StoppingThenExit0(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1; turn-end s1 t1 completed; barrier; raw STOPPING=1; exit 0",
		"TESTAGENT_SCRIPT_2=raw STOPPING=1; exit 0",
		"TESTAGENT_SCRIPT_3=raw STOPPING=1; exit 0",
		"TESTAGENT_SCRIPT=take-resumes; log took-all; hang")
	sv := e.run("--restart", "always", "--guard-trip", "2", "--backoff-initial", "100ms", "--backoff-max", "10s")
	e.waitLog(4, "took-all")
	st := e.status()
	for n := 1; n <= 3; n++ {
		if r := st.run(t, n); r.Dirty || r.Reason != "exit" || r.ExitCode != 0 {
			t.Errorf("run %d = %+v, want a clean exit", n, r)
		}
	}
	if got := e.took(4); len(got) != 0 {
		t.Errorf("resumed %v after clean stops", got)
	}
	if s, ok := st.session("s1"); !ok || s.State != "idle" || s.CrashCount != 0 {
		t.Errorf("s1 = %+v, want idle with crash count 0", s)
	}
	if raw := e.statusRaw(); !strings.Contains(raw, `"chain": 0`) || strings.Contains(raw, `"open": true`) {
		t.Errorf("crash-loop guard touched by clean stops:\n%s", raw)
	}
	// (Under --restart always the relaunch delay after quick clean exits
	// still grows: that is the hot-loop brake for any quick run, not the
	// crash-loop guard, which counts dirty deaths only.)
	if !strings.Contains(sv.stderr(), "agent says it is stopping") {
		t.Errorf("STOPPING=1 not logged:\n%s", sv.stderr())
	}
	e.stop(sv)
}

// 18. A double-forking daemon, a setsid grandchild and a grandchild that
// holds supervise's stdout: after the agent dies all are gone before the
// next run, none is left a zombie, and the stdout pipe reaches EOF once
// supervise exits (no holder survives).
func TestFault18DescendantTree(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=daemon; grandchild; stdout-holder; orphans 5; log tree; sleep 300ms; exit 3",
		"TESTAGENT_SCRIPT=hang")
	cmd := exec.Command(superviseBin, "run", "--backoff-initial", "10ms", "--", agentBin)
	cmd.Env = append(os.Environ(), e.vars...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill() })
	eof := make(chan struct{})
	go func() { io.Copy(io.Discard, out); close(eof) }()
	e.waitLog(1, "tree")
	var pids []int
	for _, kind := range []string{"daemon", "grandchild", "stdout-holder"} {
		ev := e.waitEvent(1, kind)
		pid, _ := strconv.Atoi(ev.arg)
		if pid <= 0 || !alive(pid) {
			t.Fatalf("%s %q not running before the agent's death", kind, ev.arg)
		}
		pids = append(pids, pid)
	}
	second := e.waitEvent(2, "hang")
	for i, kind := range []string{"daemon", "grandchild", "stdout-holder"} {
		if alive(pids[i]) {
			t.Errorf("%s %d outlived the agent into the next run", kind, pids[i])
		}
	}
	if left := e.tagged(); len(left) != 2 { // supervise and run 2's agent
		t.Errorf("processes of the test alive during run 2: %v (want supervise %d and agent %d)", left, cmd.Process.Pid, second.pid)
	}
	if z := zombiesOf(cmd.Process.Pid); z > 0 {
		t.Errorf("%d zombies under supervise", z)
	}
	e.noOverlap()
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-eof:
	case <-time.After(20 * time.Second):
		t.Fatal("supervise's stdout still held open 20s after the stop: a holder survived")
	}
	if err := cmd.Wait(); err != nil {
		t.Errorf("supervise: %v\n%s", err, stderr.String())
	}
}

// 19. Exec failures after the first start: ENOEXEC (a binary the kernel
// cannot run) and ETXTBSY (a binary open for writing). No hot loop, exit
// code 126 and reason exec-failed, each counts toward the crash-loop
// guard, and supervise recovers once the binary is fixed.
func TestFault19ExecFailures(t *testing.T) {
	for _, tc := range []struct {
		name   string
		break_ func(t *testing.T, path string) (fix func())
	}{
		{"ENOEXEC", func(t *testing.T, p string) func() {
			os.Remove(p)
			os.WriteFile(p, []byte("\x7fELF this is not a program\n"), 0o755)
			return func() { copyFile(t, agentBin, p) }
		}},
		{"ETXTBSY", func(t *testing.T, p string) func() {
			os.Remove(p)
			b, _ := os.ReadFile(agentBin)
			f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY, 0o755)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(b) // complete, but still open for writing
			return func() { f.Close() }
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			bin := filepath.Join(e.dir, "agent")
			copyFile(t, agentBin, bin)
			e.set("TESTAGENT_SCRIPT=hang")
			sv := e.start("run", "--backoff-initial", "200ms", "--backoff-max", "1s", "--guard-trip", "3", "--guard-gap", "1m", "--", bin)
			first := e.waitEvent(1, "hang")
			fix := tc.break_(t, bin)
			syscall.Kill(first.pid, syscall.SIGKILL)
			waitFor(t, 20*time.Second, "three failed launches", func() bool {
				return strings.Count(sv.stderr(), "agent could not be started") >= 3
			})
			st := e.status()
			for n := 2; n <= 4; n++ {
				if r := st.run(t, n); r.Reason != "exec-failed" || r.ExitCode != 126 || !r.Dirty {
					t.Errorf("run %d = %+v, want exec-failed 126", n, r)
				}
			}
			// A run that never started a child holds no turn a resume could
			// kill: exec failures back off, and never chain in the crash-loop
			// guard (the kill before them does).
			if st := e.status(); st.Guard.Open || st.Guard.Chain != 1 {
				t.Errorf("exec failures chained in the crash-loop guard: %+v, want the first kill's chain of 1", st.Guard)
			}
			// No hot loop: the delays between failed launches double.
			if d := relaunchDelays(sv.stderr()); len(d) < 3 || d[2] < d[1] || d[1] < d[0] || d[0] < 150*time.Millisecond {
				t.Errorf("relaunch delays after exec failures %v, want a growing backoff", d)
			}
			if !strings.Contains(sv.stderr(), map[string]string{"ENOEXEC": "exec format error", "ETXTBSY": "text file busy"}[tc.name]) {
				t.Errorf("log does not name the cause:\n%s", sv.stderr())
			}
			fix()
			waitFor(t, 20*time.Second, "a run after the fix", func() bool { return e.count("hang") >= 2 })
			e.stop(sv)
		})
	}
}

// 34. MAINPID= never changes whom supervise signals: after MAINPID=1,
// =supervise, =an unrelated process and =a grandchild, a watchdog kill
// and a stop reach the agent's tree and nothing else.
func TestFault34MainPIDIgnored(t *testing.T) {
	stranger := exec.Command("sleep", "1000")
	if err := stranger.Start(); err != nil {
		t.Fatal(err)
	}
	defer stranger.Process.Kill()
	e := newEnv(t)
	sp := strconv.Itoa(stranger.Process.Pid)
	e.set("TESTAGENT_SCRIPT_1=groupchild; raw MAINPID=1; raw MAINPID="+sp+"; barrier; log sent; listen",
		"TESTAGENT_SCRIPT=ignore-term; raw MAINPID="+sp+"; barrier; log sent; hang")
	sv := e.run("--stop-timeout", "300ms")
	e.waitLog(1, "sent")
	gc := e.waitEvent(1, "groupchild")
	// post, not tell: the trigger can kill the agent before it logs "ran".
	e.post("raw MAINPID=" + strconv.Itoa(sv.cmd.Process.Pid) + "; raw MAINPID=" + gc.arg + "; barrier; trigger")
	// WATCHDOG=trigger: the watchdog action hits the agent's tree.
	e.waitLog(2, "sent")
	if !alive(stranger.Process.Pid) || !sv.running() {
		t.Fatal("the watchdog action reached a process named by MAINPID=")
	}
	if r := e.status().run(t, 1); r.Reason != "watchdog" {
		t.Errorf("run 1 = %+v, want the agent itself killed by the watchdog", r)
	}
	// A stop of an agent that ignores SIGTERM: SIGKILL goes to its tree.
	e.stop(sv)
	if !alive(stranger.Process.Pid) {
		t.Error("the stop killed the process named by MAINPID=")
	}
	if r := e.status().run(t, 2); r.Signal != 9 || r.Reason != "stopped" {
		t.Errorf("run 2 = %+v, want the agent itself SIGKILLed after the grace", r)
	}
}

// 35. A sender of another uid cannot reach the notify socket, whether it
// runs outside the tree or inside it (the agent's own child, setpriv'd):
// the directory is 0700, so its marker and barrier never land.
func TestFault35OtherUID(t *testing.T) {
	long(t, "root-only: runs senders as uid 65534 (setpriv)")
	if os.Geteuid() != 0 {
		t.Skip("needs root to run a sender as another uid (setpriv)")
	}
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv not installed")
	}
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=turn-begin mine t1; barrier; log ready; listen")
	sv := e.run()
	e.waitLog(1, "ready")
	// Let uid 65534 reach the state dir and run supervise: only the state
	// dir's and notify dir's own modes stand in its way.
	bin := filepath.Join(e.dir, "supervise")
	copyFile(t, superviseBin, bin)
	for _, d := range []string{filepath.Dir(e.dir), e.dir} {
		os.Chmod(d, 0o777)
	}
	sock := filepath.Join(e.stateDir, "notify", "notify.sock")
	// Outside the tree.
	out, err := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "env", "NOTIFY_SOCKET="+sock,
		bin, "notify", "turn-begin", "--session", "other-outside", "--barrier").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "permission denied") {
		t.Errorf("a sender of another uid outside the tree: %v %s (want permission denied)", err, out)
	}
	// Inside the tree: the agent runs it as its child, so it inherits
	// NOTIFY_SOCKET and the tree's tag.
	script := filepath.Join(e.dir, "other.sh")
	rc := filepath.Join(e.dir, "other.rc")
	os.WriteFile(script, []byte(fmt.Sprintf("#!/bin/sh\nsetpriv --reuid=65534 --regid=65534 --clear-groups %s notify turn-begin --session other-inside --barrier > %s.out 2>&1\necho \"$?\" > %s\n",
		bin, rc, rc)), 0o755)
	e.tell("exec " + script)
	b, err := os.ReadFile(rc)
	outIn, _ := os.ReadFile(rc + ".out")
	if err != nil || strings.TrimSpace(string(b)) == "0" || !strings.Contains(string(outIn), "permission denied") {
		t.Errorf("a sender of another uid inside the tree: exit %q %v: %s (want permission denied)", b, err, outIn)
	}
	st := e.status()
	for _, id := range []string{"other-outside", "other-inside"} {
		if _, ok := st.session(id); ok {
			t.Errorf("marker of another uid applied: %s", id)
		}
	}
	if _, ok := st.session("mine"); !ok {
		t.Error("the agent's own marker is missing")
	}
	// Nor can it read the state or resume: refused, saying whose it is.
	for _, args := range [][]string{{"status"}, {"resume", "mine"}} {
		cmd := append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", bin}, args...)
		out, err := exec.Command("setpriv", append(cmd, "--state-dir", e.stateDir)...).CombinedOutput()
		want := "permission denied: the state dir " + e.stateDir + " is private to the user supervise runs as (uid 0): run this command as that user"
		if args[0] == "status" { // exit 77 (EX_NOPERM), the owner named (issue 46 B7)
			want = "permission denied: the state dir " + e.stateDir + " belongs to uid 0 (root)"
		}
		if err == nil || !strings.Contains(string(out), want) {
			t.Errorf("supervise %s as another uid: %v %s (want it refused, naming the owner)", args[0], err, out)
		}
	}
	e.stop(sv)
}

// 30. supervise SIGSTOPped for twice the watchdog period while its agent
// keeps pinging, then continued: the pings queued meanwhile are read
// before the agent is judged, so the agent is not killed.
func TestFault30FrozenSupervisor(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=pinger 100ms; hang")
	sv := e.run("--watchdog", "700ms", "--stop-timeout", "500ms")
	e.waitEvent(1, "hang")
	for i := 0; i < 3; i++ {
		sv.signal(syscall.SIGSTOP)
		time.Sleep(1400 * time.Millisecond) // the freeze itself: two watchdog periods
		sv.signal(syscall.SIGCONT)
		time.Sleep(1500 * time.Millisecond) // two more periods for a false verdict to show
		if n := e.count("start"); n != 1 {
			t.Fatalf("freeze %d: the pinging agent was killed after supervise was continued (%d starts):\n%s", i+1, n, sv.stderr())
		}
	}
	if strings.Contains(sv.stderr(), "no WATCHDOG=1 within") {
		t.Errorf("a false hang verdict was logged:\n%s", sv.stderr())
	}
	// Control: the same freeze with a silent agent is still judged.
	first := e.waitEvent(1, "hang")
	syscall.Kill(first.pid, syscall.SIGSTOP)
	sv.signal(syscall.SIGSTOP)
	time.Sleep(1400 * time.Millisecond)
	sv.signal(syscall.SIGCONT)
	e.waitEvent(2, "start")
	if r := e.status().run(t, 1); r.Reason != "watchdog" {
		t.Errorf("run 1 = %+v, want a watchdog kill of the silent agent", r)
	}
	e.stop(sv)
}

// 28. supervise as PID 1 of a PID namespace over many runs, each leaving
// orphans and exiting with a status derived from its run number: every
// status recorded exactly, no zombie left. 1000 runs with SUPERVISE_LONG=1,
// 60 otherwise.
func TestFault28PID1ManyRuns(t *testing.T) {
	if out, err := exec.Command("unshare", "--pid", "--fork", "--mount-proc", "true").CombinedOutput(); err != nil {
		t.Skipf("cannot create a PID namespace here (needs root or user namespaces): %v %s", err, out)
	}
	runs := iterations(60, 1000)
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT=orphans 2; exit-run", fmt.Sprintf("TESTAGENT_SCRIPT_%d=orphans 2; exit 0", runs))
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", superviseBin, "run", "--restart", "on-failure",
		"--backoff-initial", "1ms", "--backoff-max", "1ms", "--guard-trip", "0", "--keep-runs", "100000", "--log-level", "warn",
		"--", agentBin)
	cmd.Env = append(os.Environ(), e.vars...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	maxZombies := 0
	deadline := time.After(time.Duration(runs)*300*time.Millisecond + 30*time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("supervise as PID 1: %v\n%s", err, lastBytes(stderr.String(), 2000))
			}
			break wait
		case <-tick.C:
			if sup := childrenOf(cmd.Process.Pid); len(sup) == 1 {
				maxZombies = max(maxZombies, zombiesOf(sup[0]))
			}
		case <-deadline:
			cmd.Process.Kill()
			t.Fatalf("%d runs did not finish in time; %d started", runs, e.count("start"))
		}
	}
	if maxZombies > 0 {
		t.Errorf("up to %d zombies left under supervise as PID 1", maxZombies)
	}
	db, err := journal.Open(filepath.Join(e.stateDir, "journal.db"), journal.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	wrong := 0
	db.View(func(tx *journal.Tx) error {
		for n := 1; n <= runs; n++ {
			r, ok, err := tx.Run(uint64(n))
			want := n%50 + 1
			if n == runs {
				want = 0
			}
			if !ok || err != nil || r.ExitCode != want || r.Signal != 0 || r.Reason != "exit" {
				if wrong++; wrong <= 5 {
					t.Errorf("run %d recorded as %+v (found %v, %v), want exit %d", n, r, ok, err, want)
				}
			}
		}
		return nil
	})
	if wrong > 0 {
		t.Errorf("%d of %d run statuses wrong", wrong, runs)
	}
	t.Logf("%d runs as PID 1, each leaving 2 orphans: all statuses exact, max zombies seen %d", runs, maxZombies)
}

// 27. An agent in a terminal that moves itself into a background process
// group and reads the terminal is stopped by the kernel (SIGTTIN): its
// pings stop, the watchdog judges it within its period, the log says it was
// stopped, and the agent is relaunched rather than left hanging. (tmux
// starts its panes with SIGTTIN and SIGTTOU ignored, and an ignored signal
// stays ignored across exec: the background read would just fail with
// EIO. The pane runs supervise under env --default-signal, as a login
// shell's job control would.)
func TestFault27BackgroundTerminalRead(t *testing.T) {
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Skip("tmux not installed")
	}
	if exec.Command("env", "--default-signal=TTIN", "true").Run() != nil {
		t.Skip("env --default-signal not supported (coreutils 8.31+)")
	}
	e := newEnv(t)
	e.set("SUPERVISE_WATCHDOG=1s", "TESTAGENT_SCRIPT_1=pinger 100ms; bg-read", "TESTAGENT_SCRIPT=hang")
	ts := &tmuxSession{t: t, e: e, server: fmt.Sprintf("sv%d", time.Now().UnixNano()), exitFile: filepath.Join(e.dir, "exit")}
	var b strings.Builder
	b.WriteString("#!/bin/sh\n")
	for _, kv := range e.vars {
		k, v, _ := strings.Cut(kv, "=")
		fmt.Fprintf(&b, "export %s='%s'\n", k, strings.ReplaceAll(v, "'", `'\''`))
	}
	fmt.Fprintf(&b, "env --default-signal=TTIN,TTOU %s run --stop-timeout 1s -- %s\necho $? > %s\nsleep 1000\n", superviseBin, agentBin, ts.exitFile)
	wrapper := filepath.Join(e.dir, "run.sh")
	os.WriteFile(wrapper, []byte(b.String()), 0o755)
	ts.tmux("-f", "/dev/null", "new-session", "-d", "-s", "main", "-x", "250", "-y", "50", wrapper)
	t.Cleanup(func() { ts.tmux("kill-server") })
	ev := e.waitEvent(1, "bg-read")
	e.waitEvent(2, "hang")
	if n := e.count("bg-read-returned"); n != 0 {
		t.Errorf("the background read returned instead of stopping the agent: %v", e.events())
	}
	r := e.status().run(t, 1)
	if r.Reason != "watchdog" || !r.Dirty {
		t.Errorf("run 1 = %+v, want a watchdog kill of the stopped agent", r)
	}
	if alive(ev.pid) {
		t.Errorf("the stopped agent %d is still there", ev.pid)
	}
	// While the agent holds the terminal supervise logs to the state dir's
	// supervise.log, never over the agent's screen (docs/interactive.md).
	logged, _ := os.ReadFile(filepath.Join(e.stateDir, "supervise.log"))
	if !strings.Contains(string(logged), "the agent is stopped") {
		screen, _ := exec.Command("tmux", "-L", ts.server, "capture-pane", "-p", "-J", "-t", "main", "-S", "-").Output()
		t.Errorf("supervise's log does not say the agent was stopped:\n%s\nthe terminal:\n%s", logged, screen)
	}
	// Stop supervise and wait for it, so that it is not still writing its
	// journal when the test's directory is removed.
	syscall.Kill(e.status().Supervisor.PID, syscall.SIGTERM)
	if code := ts.exitCode(); code != "0" {
		t.Errorf("supervise exit %s after SIGTERM", code)
	}
}
