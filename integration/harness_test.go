// Package integration builds the real supervise binary, supervise-notify
// (which the shipped hook configurations run) and a scriptable test agent
// once per test run, and drives them from outside: real processes, real
// signals, real journals.
package integration

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/journal"
	"github.com/supervise-dev/supervise/record"
)

var (
	superviseBin string
	notifyBin    string // supervise-notify, beside supervise: the shipped hooks run it from PATH
	agentBin     string
)

func TestMain(m *testing.M) {
	if runtime.GOOS != "linux" {
		// The harness reads /proc to see which processes live. On macOS the
		// portable backend's integration coverage is the Linux run with
		// -tags supervise_portable (docs/macos.md).
		fmt.Println("integration: skipped on " + runtime.GOOS + ": the harness reads /proc; run it on Linux, with -tags supervise_portable for the macOS backend")
		os.Exit(0)
	}
	dir, err := os.MkdirTemp("", "supervise-integration-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	superviseBin = filepath.Join(dir, "supervise")
	notifyBin = filepath.Join(dir, "supervise-notify")
	agentBin = filepath.Join(dir, "testagent")
	for bin, pkg := range map[string]string{superviseBin: "../cmd/supervise", notifyBin: "../cmd/supervise-notify",
		agentBin: "./testagent"} {
		args := []string{"build", "-o", bin}
		if raceEnabled {
			args = append(args, "-race")
		}
		if portableBackend {
			args = append(args, "-tags", "supervise_portable")
		}
		out, err := exec.Command("go", append(args, pkg)...).CombinedOutput()
		if err != nil {
			fmt.Fprintf(os.Stderr, "building %s: %v\n%s", pkg, err, out)
			os.RemoveAll(dir)
			os.Exit(1)
		}
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// requireLinuxBackend skips a test of a guarantee only the Linux backend
// gives, saying which, when the suite runs through the portable backend
// (-tags supervise_portable: what macOS runs). See docs/macos.md.
func requireLinuxBackend(t testing.TB, why string) {
	t.Helper()
	if portableBackend {
		t.Skip("needs the Linux backend (" + why + "); the portable backend, as on macOS, lacks it")
	}
}

// env is one test's private world: a state dir, an agent log, an id that
// every process of the test carries.
type env struct {
	t        testing.TB
	dir      string
	stateDir string
	logPath  string
	fifo     string
	id       string
	vars     []string
	cwd      string // supervise's working directory ("" = the test's)
}

func newEnv(t testing.TB) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, stateDir: filepath.Join(dir, "state"), logPath: filepath.Join(dir, "agent.log"),
		id: fmt.Sprintf("%s-%d", t.Name(), time.Now().UnixNano())}
	fifo := filepath.Join(dir, "cmd.fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	e.vars = []string{"TESTAGENT_LOG=" + e.logPath, "TESTAGENT_ID=" + e.id, "SUPERVISE_STATE_DIR=" + e.stateDir,
		"TESTAGENT_FIFO=" + fifo}
	e.fifo = fifo
	t.Cleanup(e.killLeftovers)
	return e
}

// set adds environment variables for the supervise processes (and so the
// agents) started after it.
func (e *env) set(kv ...string) { e.vars = append(e.vars, kv...) }

// proc is a running supervise.
type proc struct {
	t    testing.TB
	cmd  *exec.Cmd
	mu   sync.Mutex
	errb bytes.Buffer
	done chan struct{}
	code int
}

func (e *env) start(args ...string) *proc {
	e.t.Helper()
	cmd := exec.Command(superviseBin, args...)
	cmd.Env = append(os.Environ(), e.vars...)
	cmd.Dir = e.cwd
	p := &proc{t: e.t, cmd: cmd, done: make(chan struct{})}
	// A pipe of our own rather than StderrPipe: Wait then returns when
	// supervise exits even if a process it started still holds the pipe,
	// as an agent orphaned by a kill -9 of supervise does until the next
	// supervise kills it under the portable backend (no parent-death
	// signal, docs/macos.md).
	stderr, w, err := os.Pipe()
	if err != nil {
		e.t.Fatal(err)
	}
	cmd.Stderr = w
	cmd.Stdout = nil
	err = cmd.Start()
	w.Close()
	if err != nil {
		stderr.Close()
		e.t.Fatal(err)
	}
	read := make(chan struct{})
	go func() {
		defer close(read)
		defer stderr.Close()
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			p.mu.Lock()
			p.errb.WriteString(sc.Text() + "\n")
			p.mu.Unlock()
		}
	}()
	go func() {
		err := cmd.Wait()
		select {
		case <-read: // everything supervise wrote is in errb
		case <-time.After(2 * time.Second): // an orphan holds the pipe
		}
		p.code = cmd.ProcessState.ExitCode()
		if ee, ok := err.(*exec.ExitError); ok && !ee.Exited() {
			p.code = 128 + int(ee.Sys().(syscall.WaitStatus).Signal())
		}
		close(p.done)
	}()
	e.t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			cmd.Process.Signal(syscall.SIGKILL)
			<-p.done
		}
		if e.t.Failed() {
			e.t.Logf("supervise %v stderr:\n%s", args, p.stderr())
		}
	})
	return p
}

// run starts supervise -- testagent with the given supervise flags.
func (e *env) run(flags ...string) *proc {
	return e.start(append(append([]string{"run"}, flags...), "--", agentBin)...)
}

func (p *proc) stderr() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.errb.String()
}

// wait waits for supervise to exit and returns its exit code.
func (p *proc) wait(timeout time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		p.t.Fatalf("supervise did not exit within %v; stderr:\n%s", timeout, p.stderr())
	}
	return -1
}

func (p *proc) signal(sig syscall.Signal) {
	p.t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil {
		p.t.Fatal(err)
	}
}

func (p *proc) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// event is one line of the agent log.
type event struct {
	run  int
	pid  int
	kind string
	arg  string
}

func (e *env) events() []event {
	b, _ := os.ReadFile(e.logPath)
	var out []event
	for _, line := range strings.Split(string(b), "\n") {
		if ev, ok := parseEvent(line); ok {
			out = append(out, ev)
		}
	}
	return out
}

// recordEnd closes every record the test agent logs (its logf); a line
// without it is a record torn by a kill during its write, or not the
// agent's.
const recordEnd = "\t$"

// parseEvent parses one line of the agent log: "run=N pid=P kind [arg]".
func parseEvent(line string) (event, bool) {
	line, ok := strings.CutSuffix(line, recordEnd)
	if !ok {
		return event{}, false
	}
	f := strings.SplitN(line, " ", 4)
	if len(f) < 3 {
		return event{}, false
	}
	ev := event{kind: f[2]}
	ev.run, _ = strconv.Atoi(strings.TrimPrefix(f[0], "run="))
	ev.pid, _ = strconv.Atoi(strings.TrimPrefix(f[1], "pid="))
	if len(f) == 4 {
		ev.arg = f[3]
	}
	return ev, true
}

func (e *env) count(kind string) int {
	n := 0
	for _, ev := range e.events() {
		if ev.kind == kind {
			n++
		}
	}
	return n
}

// waitFor polls until cond holds or the timeout passes.
func waitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// waitEvent waits until the log has an event of kind from run (0: any run)
// and returns the latest such event.
func (e *env) waitEvent(run int, kind string) event {
	e.t.Helper()
	var found event
	waitFor(e.t, 20*time.Second, fmt.Sprintf("agent event %q in run %d", kind, run), func() bool {
		for _, ev := range e.events() {
			if ev.kind == kind && (run == 0 || ev.run == run) {
				found = ev
			}
		}
		return found.kind != ""
	})
	return found
}

// waitLog waits until run logged "log TEXT" and returns that event.
func (e *env) waitLog(run int, text string) event {
	e.t.Helper()
	var found event
	waitFor(e.t, 20*time.Second, fmt.Sprintf("agent log %q in run %d", text, run), func() bool {
		for _, ev := range e.events() {
			if ev.kind == "log" && ev.arg == text && (run == 0 || ev.run == run) {
				found = ev
				return true
			}
		}
		return false
	})
	return found
}

// tell makes the listening agent run script, as the child itself (so the
// sender check admits its markers), and waits until it has.
func (e *env) tell(script string) {
	e.t.Helper()
	before := e.count("ran")
	e.post(script)
	waitFor(e.t, 20*time.Second, "the agent to run "+script, func() bool { return e.count("ran") > before })
}

// post hands a listening agent a script line without waiting for it to
// finish: for a script whose last step may get the agent killed (a
// WATCHDOG=trigger) before it can log that it ran.
func (e *env) post(script string) {
	e.t.Helper()
	f, err := os.OpenFile(e.fifo, os.O_WRONLY, 0)
	if err != nil {
		e.t.Fatal(err)
	}
	f.WriteString(script + "\n")
	f.Close()
}

// noOverlap fails the test if any agent saw another agent alive at start.
func (e *env) noOverlap() {
	e.t.Helper()
	for _, ev := range e.events() {
		if ev.kind == "overlap" {
			e.t.Errorf("run %d started while other agent processes were alive: %s", ev.run, ev.arg)
		}
	}
}

// status is `supervise status --json` decoded loosely.
type status struct {
	Supervisor struct {
		Running       bool `json:"running"`
		PID           int  `json:"pid"`
		CleanShutdown bool `json:"clean_shutdown"`
	} `json:"supervisor"`
	Child struct {
		PID      int        `json:"pid"`
		State    string     `json:"state"`
		Run      int        `json:"run"`
		Restarts int        `json:"restarts"`
		LastExit *runStatus `json:"last_exit"`
	} `json:"child"`
	Sessions []struct {
		ID            string     `json:"id"`
		State         string     `json:"state"`
		CrashCount    int        `json:"crash_count"`
		Reason        string     `json:"reason"`
		Turn          string     `json:"turn"`
		LastHeartbeat *string    `json:"last_heartbeat"`
		Phase         string     `json:"phase"`
		Tool          string     `json:"tool"`
		ResumeCommand string     `json:"resume_command"`
		LastOutcome   string     `json:"last_outcome"`
		RetryAt       *time.Time `json:"retry_at"`
		Tokens        *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
		} `json:"tokens"`
	} `json:"sessions"`
	Runs  []runStatus `json:"runs"`
	Guard struct {
		Chain int  `json:"chain"`
		Open  bool `json:"open"`
	} `json:"crash_loop_guard"`
}

type runStatus struct {
	Run      int     `json:"run"`
	PID      int     `json:"pid"`
	Started  string  `json:"started"`
	Ended    *string `json:"ended"`
	ExitCode int     `json:"exit_code"`
	Signal   int     `json:"signal"`
	Reason   string  `json:"reason"`
	Dirty    bool    `json:"dirty"`
}

func (e *env) status() status {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, superviseBin, "status", "--json", "--state-dir", e.stateDir)
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		e.t.Fatalf("supervise status: %v\n%s", err, stderr)
	}
	var st status
	if err := json.Unmarshal(out, &st); err != nil {
		e.t.Fatalf("status JSON: %v\n%s", err, out)
	}
	return st
}

// run returns run n from status, failing if absent.
func (st status) run(t testing.TB, n int) runStatus {
	t.Helper()
	for _, r := range st.Runs {
		if r.Run == n {
			return r
		}
	}
	t.Fatalf("run %d not in status: %+v", n, st.Runs)
	return runStatus{}
}

// alive reports whether pid runs (a zombie counts as dead).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z'
}

// tagged lists live processes carrying this test's id, other than this
// test process itself.
func (e *env) tagged() []int {
	needle := []byte("TESTAGENT_ID=" + e.id + "\x00")
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, ent := range ents {
		pid, err := strconv.Atoi(ent.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		if env, err := os.ReadFile("/proc/" + ent.Name() + "/environ"); err == nil && bytes.Contains(env, needle) {
			out = append(out, pid)
		}
	}
	return out
}

// killLeftovers kills whatever this test left running.
func (e *env) killLeftovers() {
	for _, pid := range e.tagged() {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// A record cut short by a kill during its write is dropped, and the record
// written after it (by the next run) still reads whole.
func TestAgentLogTornRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "agent.log")
	log := "\nrun=1 pid=10 start t=1" + recordEnd + "\n" +
		"\nrun=1 pid=10 took s0 You were interr" + // killed mid-write
		"\nrun=2 pid=11 start t=2" + recordEnd + "\n"
	if err := os.WriteFile(path, []byte(log), 0o600); err != nil {
		t.Fatal(err)
	}
	l := newTail(path)
	got := l.all()
	want := []event{{run: 1, pid: 10, kind: "start", arg: "t=1"}, {run: 2, pid: 11, kind: "start", arg: "t=2"}}
	if !slices.Equal(got, want) || l.torn != 1 {
		t.Errorf("tail read %+v (%d torn), want %+v and 1 torn", got, l.torn, want)
	}
	e := &env{logPath: path}
	if got := e.events(); !slices.Equal(got, want) {
		t.Errorf("events read %+v, want %+v", got, want)
	}
}

// lastBytes returns the last n bytes of b (all of it when shorter).
func lastBytes[T ~string | ~[]byte](b T, n int) T {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}

// forEachSession calls fn for every session the journal holds, in id
// order.
func forEachSession(tx *journal.Tx, fn func(record.Session)) error {
	return tx.ForEachSessionBrief(func(_ journal.SessionBrief, full func() (record.Session, error)) error {
		s, err := full()
		if err == nil {
			fn(s)
		}
		return err
	})
}
