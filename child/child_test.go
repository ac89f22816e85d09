package child

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The test binary doubles as the child: CHILD_HELPER selects a behaviour.
func TestMain(m *testing.M) {
	if mode := os.Getenv("CHILD_HELPER"); mode != "" {
		helper(mode)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func helper(mode string) {
	switch {
	case strings.HasPrefix(mode, "exit="):
		n, _ := strconv.Atoi(strings.TrimPrefix(mode, "exit="))
		os.Exit(n)
	case mode == "open-cgroups":
		c, why := OpenCgroups("childtest", "unprivileged")
		fmt.Printf("cgroups=%v why=%s\n", c != nil, why)
		if c != nil {
			c.Close()
		}
		os.Exit(0)
	case mode == "ids":
		groups, _ := syscall.Getgroups()
		sort.Ints(groups)
		fmt.Printf("uid=%d euid=%d gid=%d egid=%d groups=%v home=%s user=%s logname=%s\n",
			syscall.Getuid(), syscall.Geteuid(), syscall.Getgid(), syscall.Getegid(), groups,
			os.Getenv("HOME"), os.Getenv("USER"), os.Getenv("LOGNAME"))
		os.Exit(0)
	case mode == "nobody-sleeper":
		// A supervisor of its own that starts sleep(1) as nobody.
		r, err := NewReaper(nil)
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		cred, err := LookupUser("nobody")
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		p, err := r.Start(Spec{Args: []string{"sleep", "1000"}, Credential: cred})
		if err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		fmt.Println("sleeper", p.PID())
		for {
			time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
		}
	case mode == "sleep":
		fmt.Println("ready")
		for {
			time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
		}
	case mode == "ignore-term":
		signal.Ignore(syscall.SIGTERM)
		fmt.Println("ready")
		for {
			time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
		}
	case mode == "term-exit":
		c := make(chan os.Signal, 1)
		signal.Notify(c, syscall.SIGTERM)
		fmt.Println("ready")
		<-c
		os.Exit(0)
	case mode == "setsid-grandchild", mode == "setsid-grandchild-stay", mode == "group-grandchild":
		// Start a grandchild that outlives us: in a new session (escaping
		// our process group) or in our group.
		cmd := exec.Command(os.Args[0])
		cmd.Env = append(os.Environ(), "CHILD_HELPER=sleep")
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: mode != "group-grandchild"}
		out, _ := cmd.StdoutPipe()
		if err := cmd.Start(); err != nil {
			fmt.Println("error", err)
			os.Exit(1)
		}
		bufio.NewReader(out).ReadString('\n') // grandchild is up
		fmt.Println("grandchild", cmd.Process.Pid)
		if mode == "setsid-grandchild-stay" {
			for {
				time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
			}
		}
		os.Exit(0)
	}
}

var treeSeq atomic.Int64

func newReaper(t *testing.T) *Reaper {
	t.Helper()
	r, err := NewReaper(nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}

// start runs the test binary in a helper mode and returns the process and a
// reader of its stdout.
func start(t *testing.T, r *Reaper, mode string, spec Spec) (*Process, *bufio.Reader) {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pr.Close() })
	spec.Args = []string{os.Args[0]}
	// The tag lets the portable backend find descendants that left the
	// process group; the Linux backend finds them as a subreaper.
	spec.Tag = fmt.Sprintf("CHILD_TEST_TREE=%d.%d", os.Getpid(), treeSeq.Add(1))
	spec.Env = append(os.Environ(), "CHILD_HELPER="+mode, spec.Tag)
	spec.Stdout = pw
	p, err := r.Start(spec)
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	return p, bufio.NewReader(pr)
}

func readLine(t *testing.T, br *bufio.Reader) string {
	t.Helper()
	line, err := br.ReadString('\n')
	if err != nil {
		t.Fatalf("reading child output: %v", err)
	}
	return strings.TrimSpace(line)
}

func wait(t *testing.T, p *Process) Exit {
	t.Helper()
	select {
	case <-p.Done():
		return p.Exit()
	case <-time.After(10 * time.Second):
		t.Fatal("child did not end")
	}
	return Exit{}
}

func TestExitCodes(t *testing.T) {
	r := newReaper(t)
	for _, code := range []int{0, 1, 3, 255} {
		p, _ := start(t, r, fmt.Sprintf("exit=%d", code), Spec{})
		e := wait(t, p)
		if e.Code != code || e.Signal != 0 || e.ExecErr != nil {
			t.Errorf("exit=%d: got %+v", code, e)
		}
		if e.PID != p.PID() || e.Uptime() <= 0 {
			t.Errorf("exit=%d: pid %d uptime %v", code, e.PID, e.Uptime())
		}
		if got := e.Clean(); got != (code == 0) {
			t.Errorf("exit=%d: Clean() = %v", code, got)
		}
	}
}

func TestKilledBySignal(t *testing.T) {
	r := newReaper(t)
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGINT, syscall.SIGTERM} {
		p, out := start(t, r, "sleep", Spec{})
		readLine(t, out)
		if err := p.Signal(sig); err != nil {
			t.Fatal(err)
		}
		e := wait(t, p)
		if e.Signal != sig || e.Code != 128+int(sig) {
			t.Errorf("%v: got code %d signal %v", sig, e.Code, e.Signal)
		}
		if !strings.Contains(e.String(), "killed by signal") {
			t.Errorf("String() = %q", e.String())
		}
	}
}

func TestStartFailures(t *testing.T) {
	r := newReaper(t)
	_, err := r.Start(Spec{Args: []string{"definitely-not-a-command-xyz"}})
	var se *StartError
	if !errors.As(err, &se) || se.Code != CodeNotFound {
		t.Fatalf("missing command: err %v", err)
	}
	if e := FailedExit(err, time.Now()); e.Code != 127 || e.ExecErr == nil {
		t.Errorf("FailedExit = %+v", e)
	}
	_, err = r.Start(Spec{Args: []string{"/nonexistent/agent"}})
	if !errors.As(err, &se) || se.Code != CodeNotFound {
		t.Errorf("missing path: err %v", err)
	}
	notExec := filepath.Join(t.TempDir(), "agent")
	os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644)
	_, err = r.Start(Spec{Args: []string{notExec}})
	if !errors.As(err, &se) || se.Code != CodeNotExecutable {
		t.Errorf("mode 0644: err %v", err)
	}
	garbage := filepath.Join(t.TempDir(), "garbage")
	os.WriteFile(garbage, []byte{0x7f, 'E', 'L', 'F', 0, 0, 0}, 0o755)
	_, err = r.Start(Spec{Args: []string{garbage}})
	if !errors.As(err, &se) || se.Code != CodeNotExecutable {
		t.Errorf("ENOEXEC: err %v", err)
	}
}

func TestStopGraceful(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "term-exit", Spec{})
	readLine(t, out)
	e := p.Stop(context.Background(), syscall.SIGTERM, 10*time.Second)
	if e.Code != 0 || e.Signal != 0 {
		t.Errorf("graceful stop: %+v", e)
	}
}

func TestStopEscalatesAfterGrace(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "ignore-term", Spec{})
	readLine(t, out)
	grace := 300 * time.Millisecond
	e := p.Stop(context.Background(), syscall.SIGTERM, grace)
	if e.Signal != syscall.SIGKILL {
		t.Errorf("got %+v, want SIGKILL after grace", e)
	}
	if e.Uptime() < grace {
		t.Errorf("killed after %v, before the %v grace", e.Uptime(), grace)
	}
}

func TestStopCancelKillsAtOnce(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "ignore-term", Spec{})
	readLine(t, out)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	e := p.Stop(ctx, syscall.SIGTERM, time.Hour)
	if e.Signal != syscall.SIGKILL {
		t.Errorf("got %+v, want SIGKILL at once", e)
	}
}

func gone(pid int) bool {
	st, err := readStat(pid)
	return err != nil || st.state == 'Z'
}

func TestDescendantsKilledWhenLeaderExits(t *testing.T) {
	for _, mode := range []string{"setsid-grandchild", "group-grandchild"} {
		t.Run(mode, func(t *testing.T) {
			r := newReaper(t)
			p, out := start(t, r, mode, Spec{})
			f := strings.Fields(readLine(t, out))
			if len(f) != 2 || f[0] != "grandchild" {
				t.Fatalf("helper said %q", f)
			}
			gc, _ := strconv.Atoi(f[1])
			e := wait(t, p)
			if e.Code != 0 {
				t.Fatalf("leader: %+v", e)
			}
			if !gone(gc) {
				t.Errorf("grandchild %d survived its parent", gc)
			}
		})
	}
}

func TestKillTakesTheTree(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "setsid-grandchild-stay", Spec{})
	f := strings.Fields(readLine(t, out))
	gc, _ := strconv.Atoi(f[1])
	if gone(gc) {
		t.Fatal("grandchild not running")
	}
	p.Kill()
	if e := wait(t, p); e.Signal != syscall.SIGKILL {
		t.Errorf("leader: %+v", e)
	}
	if !gone(gc) {
		t.Errorf("grandchild %d survived Kill", gc)
	}
}

// TestNoStatusLost starts many short-lived children concurrently: every
// exit status must reach its own Process, none stolen or lost.
func TestNoStatusLost(t *testing.T) {
	r := newReaper(t)
	n := 60
	if testing.Short() {
		n = 20
	}
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(code int) {
			defer wg.Done()
			p, err := r.Start(Spec{
				Args:   []string{os.Args[0]},
				Env:    append(os.Environ(), fmt.Sprintf("CHILD_HELPER=exit=%d", code)),
				Stdout: nil,
			})
			if err != nil {
				errs <- err
				return
			}
			select {
			case <-p.Done():
				if e := p.Exit(); e.Code != code {
					errs <- fmt.Errorf("child %d: code %d, want %d", p.PID(), e.Code, code)
				}
			case <-time.After(20 * time.Second):
				errs <- fmt.Errorf("child %d never reported", p.PID())
			}
		}(i % 200)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestIdentity(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "sleep", Spec{})
	readLine(t, out)
	if p.StartTime() == 0 {
		t.Fatal("no start time recorded")
	}
	if p.PGID() != p.PID() {
		t.Errorf("pgid %d, want own group %d", p.PGID(), p.PID())
	}
	ctx := context.Background()
	if !Alive(ctx, p.PID(), p.StartTime()) {
		t.Error("Alive false for a running child")
	}
	if Alive(ctx, p.PID(), p.StartTime()+10_000) {
		t.Error("Alive true for a different start time (pid reuse)")
	}
	p.Kill()
	wait(t, p)
	if Alive(ctx, p.PID(), p.StartTime()) {
		t.Error("Alive true after exit")
	}
}

func TestForegroundSharesGroup(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "term-exit", Spec{Foreground: true})
	readLine(t, out)
	st, err := readStat(p.PID())
	if err != nil {
		t.Fatal(err)
	}
	if st.pgrp != unix.Getpgrp() || p.PGID() != 0 {
		t.Errorf("child pgrp %d, ours %d, PGID() %d", st.pgrp, unix.Getpgrp(), p.PGID())
	}
	// Signal must reach the child alone, not our own group.
	if e := p.Stop(context.Background(), syscall.SIGTERM, 5*time.Second); e.Code != 0 {
		t.Errorf("stop: %+v", e)
	}
}

func TestKillTagged(t *testing.T) {
	r := newReaper(t)
	tag := fmt.Sprintf("SUPERVISE_TEST_TAG=%d.", os.Getpid())
	p, out := start(t, r, "sleep", Spec{})
	readLine(t, out)
	// Same binary, but tagged; the untagged one must survive.
	pr, pw, _ := os.Pipe()
	defer pr.Close()
	tagged, err := r.Start(Spec{
		Args:   []string{os.Args[0]},
		Env:    append(os.Environ(), "CHILD_HELPER=sleep", tag+"7"),
		Stdout: pw,
	})
	pw.Close()
	if err != nil {
		t.Fatal(err)
	}
	readLine(t, bufio.NewReader(pr))
	killed := KillTagged(tag)
	if len(killed) != 1 || killed[0] != tagged.PID() {
		t.Errorf("KillTagged killed %v, want [%d]", killed, tagged.PID())
	}
	if e := wait(t, tagged); e.Signal != syscall.SIGKILL {
		t.Errorf("tagged child: %+v", e)
	}
	select {
	case <-p.Done():
		t.Error("untagged child was killed")
	default:
	}
}

func TestKillRecorded(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "setsid-grandchild-stay", Spec{})
	f := strings.Fields(readLine(t, out))
	gc, _ := strconv.Atoi(f[1])
	ctx := context.Background()
	// A wrong start time is a different process: never signalled.
	if found, _ := KillRecorded(ctx, p.PID(), p.StartTime()+1000, time.Second); found {
		t.Fatal("KillRecorded accepted a wrong start time")
	}
	select {
	case <-p.Done():
		t.Fatal("process killed despite wrong start time")
	default:
	}
	found, err := KillRecorded(ctx, p.PID(), p.StartTime(), 5*time.Second)
	if !found || err != nil {
		t.Fatalf("KillRecorded = %v, %v", found, err)
	}
	if e := wait(t, p); e.Signal != syscall.SIGKILL {
		t.Errorf("leader: %+v", e)
	}
	if !gone(gc) {
		t.Errorf("setsid grandchild %d survived", gc)
	}
}

func TestTreeRSS(t *testing.T) {
	r := newReaper(t)
	p, out := start(t, r, "setsid-grandchild-stay", Spec{})
	readLine(t, out)
	one := rss(p.PID())
	tree := TreeRSS(p.PID())
	if one == 0 || tree <= one {
		t.Errorf("leader rss %d, tree rss %d: the tree must count the grandchild too", one, tree)
	}
}

// A name given twice keeps its last value, in the place of its first:
// without that the child would see the first (getenv(3)).
func TestDedupEnv(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"A=1 B=2", "A=1 B=2"},
		{"HOME=/root A=1 HOME=/nonexistent", "HOME=/nonexistent A=1"},
		{"A=1 A=2 A=3 B B=x", "A=3 B=x"},
		{"", ""},
	} {
		if got := strings.Join(dedupEnv(strings.Fields(c.in)), " "); got != c.want {
			t.Errorf("dedupEnv(%s) = %s, want %s", c.in, got, c.want)
		}
	}
}

// Uptime is how long the child lived.
func (e Exit) Uptime() time.Duration { return e.Ended.Sub(e.Started) }

// Clean reports whether the child exited by itself with status 0.
func (e Exit) Clean() bool { return e.ExecErr == nil && e.Signal == 0 && e.Code == 0 }
