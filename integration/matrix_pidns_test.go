package integration

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// Fault matrix cases that need a real pid reuse: supervise runs inside a
// private PID namespace (root: unshare --pid), where the test sets the next
// pid to be handed out by writing /proc/sys/kernel/ns_last_pid.

// pidns is a private PID namespace whose init is the test agent's reaper.
type pidns struct {
	t    *testing.T
	e    *env
	init int // host pid of the namespace's pid 1
}

func newPidns(t *testing.T, e *env) *pidns {
	t.Helper()
	long(t, "root-only: a private PID namespace whose next pid the test sets")
	if os.Geteuid() != 0 {
		t.Skip("needs root: a PID namespace whose ns_last_pid the test can write")
	}
	for _, tool := range []string{"unshare", "nsenter"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed", tool)
		}
	}
	cmd := exec.Command("unshare", "--pid", "--fork", "--mount-proc", agentBin)
	cmd.Env = append(append(os.Environ(), e.vars...), "TESTAGENT_SCRIPT=init")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	ns := &pidns{t: t, e: e}
	waitFor(t, 10*time.Second, "the namespace's init", func() bool {
		if c := childrenOf(cmd.Process.Pid); len(c) == 1 {
			ns.init = c[0]
		}
		return ns.init != 0 && e.count("init") > 0
	})
	t.Cleanup(func() { syscall.Kill(ns.init, syscall.SIGKILL) }) // kills everything in the namespace
	return ns
}

// command runs name args inside the namespace (its pids, its /proc).
func (ns *pidns) command(name string, args ...string) *exec.Cmd {
	cmd := exec.Command("nsenter", append([]string{"-t", strconv.Itoa(ns.init), "-p", "-m", "--", name}, args...)...)
	cmd.Env = append(os.Environ(), ns.e.vars...)
	return cmd
}

// supervise starts supervise run inside the namespace; proc.cmd is nsenter.
func (ns *pidns) supervise(flags ...string) *proc {
	e := ns.e
	cmd := ns.command(superviseBin, append(append([]string{"run"}, flags...), "--", agentBin)...)
	p := &proc{t: e.t, cmd: cmd, done: make(chan struct{})}
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		e.t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.errb.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
		cmd.Wait()
		p.code = cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	e.t.Cleanup(func() {
		if e.t.Failed() {
			e.t.Logf("supervise (in a PID namespace) stderr:\n%s", p.stderr())
		}
	})
	return p
}

// superviseHostPID is the host pid of the supervise that nsenter started.
func superviseHostPID(t *testing.T, p *proc) int {
	t.Helper()
	var pid int
	waitFor(t, 10*time.Second, "supervise under nsenter", func() bool {
		if c := childrenOf(p.cmd.Process.Pid); len(c) == 1 {
			pid = c[0]
		}
		return pid != 0
	})
	return pid
}

// hostPID maps a pid of the namespace to the host's, 0 if no process
// (not even a zombie) holds it.
func (ns *pidns) hostPID(nsPID int) int {
	mine, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", ns.init))
	ents, _ := os.ReadDir("/proc")
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", pid)); l != mine {
			continue
		}
		b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "NSpid:"); ok {
				f := strings.Fields(v)
				if len(f) == 2 && f[1] == strconv.Itoa(nsPID) {
					return pid
				}
			}
		}
	}
	return 0
}

// spawnAt starts `sleep 1000` inside the namespace with pid want (by
// writing ns_last_pid just before the fork) and returns its host pid.
func (ns *pidns) spawnAt(want int) int {
	ns.t.Helper()
	out, err := ns.command("sh", "-c", fmt.Sprintf("echo %d > /proc/sys/kernel/ns_last_pid && { sleep 1000 </dev/null >/dev/null 2>&1 & echo $!; }", want-1)).Output()
	if err != nil {
		ns.t.Fatalf("spawning at pid %d: %v", want, err)
	}
	if got, _ := strconv.Atoi(strings.TrimSpace(string(out))); got != want {
		who, _ := ns.command("sh", "-c", fmt.Sprintf("head -3 /proc/%d/status; ls /proc/%d/task; cat /proc/%d/cmdline", want, want, want)).CombinedOutput()
		ns.t.Fatalf("the new process got pid %d, not %d; %d is: %s", got, want, want, who)
	}
	var host int
	waitFor(ns.t, 5*time.Second, "the stranger", func() bool { host = ns.hostPID(want); return host != 0 })
	return host
}

// 22. A real pid reuse: supervise is killed with kill -9, its agent dies
// with it, and before supervise restarts an unrelated process is given the
// agent's very pid. The restarted supervise finds the journal's child
// "alive" by pid, sees another start time, and never signals it.
func TestFault22RealPIDReuse(t *testing.T) {
	e := newEnv(t)
	ns := newPidns(t, e)
	e.set("TESTAGENT_SCRIPT=hang")
	sv := ns.supervise()
	agent := e.waitEvent(1, "hang")
	syscall.Kill(superviseHostPID(t, sv), syscall.SIGKILL)
	sv.wait(10 * time.Second)
	waitFor(t, 10*time.Second, "the agent to die with supervise and be reaped", func() bool { return ns.hostPID(agent.pid) == 0 })
	stranger := ns.spawnAt(agent.pid)
	sv = ns.supervise()
	e.waitEvent(2, "hang")
	if !alive(stranger) {
		t.Fatalf("supervise killed the unrelated process that reused its old agent's pid %d", agent.pid)
	}
	r := e.status().run(t, 1)
	if r.Reason != "supervisor-died" || !r.Dirty || r.Signal != 0 {
		t.Errorf("run 1 = %+v, want a dirty supervisor-died death with no signal sent", r)
	}
	syscall.Kill(superviseHostPID(t, sv), syscall.SIGTERM)
	sv.wait(20 * time.Second)
	if !alive(stranger) {
		t.Error("the stop killed the unrelated process")
	}
}

// 36. Send-and-exit with the pid recycled: a process outside the tree
// sends a marker while supervise is paused and exits; its pid is then given
// to a new process inside the agent's tree. When supervise reads the
// datagram, the pid in its credentials names a tree member, but the sender
// is gone: the marker must be dropped, never attributed to the new owner.
func TestFault36SendAndExitPIDRecycled(t *testing.T) {
	e := newEnv(t)
	ns := newPidns(t, e)
	e.set("TESTAGENT_SCRIPT=log ready; listen")
	sv := ns.supervise()
	e.waitLog(1, "ready")
	host := superviseHostPID(t, sv)
	syscall.Kill(host, syscall.SIGSTOP)
	cont := func() { syscall.Kill(host, syscall.SIGCONT) }
	t.Cleanup(cont)
	// The outsider: the test agent run by hand inside the namespace, with
	// the notify socket but not in supervise's tree.
	sock := filepath.Join(e.stateDir, "notify", "notify.sock")
	out := ns.command(agentBin)
	out.Env = append(out.Env, "NOTIFY_SOCKET="+sock, "SUPERVISE_RUN=99", "TESTAGENT_SCRIPT=turn-begin intruder t1; log sent-and-exiting")
	if b, err := out.CombinedOutput(); err != nil {
		t.Fatalf("outsider: %v %s", err, b)
	}
	sent := e.waitLog(99, "sent-and-exiting")
	if e.count("notify-err") > 0 {
		t.Fatal("the outsider could not queue its datagram")
	}
	// Its pid goes to a new member of the agent's tree: a shell the agent
	// runs sets the next pid and starts sleep in the background.
	waitFor(t, 10*time.Second, "the outsider to be reaped", func() bool { return ns.hostPID(sent.pid) == 0 })
	pidFile := filepath.Join(e.dir, "member.pid")
	script := filepath.Join(e.dir, "member.sh")
	os.WriteFile(script, []byte(fmt.Sprintf("echo %d > /proc/sys/kernel/ns_last_pid\nsleep 1000 </dev/null >/dev/null 2>&1 &\necho $! > %s\n",
		sent.pid-1, pidFile)), 0o755)
	e.tell("exec " + script)
	b, _ := os.ReadFile(pidFile)
	if strings.TrimSpace(string(b)) != strconv.Itoa(sent.pid) {
		t.Fatalf("the tree's new process got pid %q, not the outsider's %d", b, sent.pid)
	}
	cont()
	e.tell("barrier")
	if _, ok := e.status().session("intruder"); ok {
		t.Fatalf("a marker sent by an exited outsider was attributed to the tree member that got its pid %d", sent.pid)
	}
	syscall.Kill(host, syscall.SIGTERM)
	waitFor(t, 20*time.Second, "supervise to stop", func() bool { return !alive(host) })
}
