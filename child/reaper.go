package child

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// ErrClosed is returned by Start after Close.
var ErrClosed = errors.New("reaper is closed")

// sweepTimeout bounds how long the reaper keeps killing leftover
// descendants after a leader exits. SIGKILL is immediate except for a
// process stuck in uninterruptible sleep, which no signal can hurry.
const sweepTimeout = 2 * time.Second

// Spec describes one agent process.
type Spec struct {
	// Args is the command line; Args[0] is looked up in the PATH of Env
	// (or of the supervisor when Env has none) unless it contains a slash.
	Args []string
	// Env is the child's environment; nil means the supervisor's. When a
	// name appears more than once the last entry wins, as in os/exec.
	Env []string
	// Dir is the working directory; "" means the supervisor's.
	Dir string
	// Foreground keeps the child in the supervisor's process group, for a
	// terminal: a Ctrl-C then reaches the agent exactly once, from the
	// kernel. Otherwise the child leads a process group of its own and
	// signals go to that whole group.
	Foreground bool
	// Stdin, Stdout and Stderr default to the supervisor's own.
	Stdin, Stdout, Stderr *os.File
	// Cgroup, when set, is the cgroup the child is cloned into; Kill then
	// also kills the whole cgroup (cgroup.kill). Linux backend only.
	Cgroup *RunCgroup
	// Credential, when set, is the user and groups the child runs as,
	// supplementary groups included (see LookupUser); the supervisor must
	// be root. nil means the supervisor's own. The working directory and
	// the program must be reachable by that user, else Start fails with
	// CodeNotExecutable.
	Credential *Credential
	// Tag is an entry of Env ("KEY=VALUE") that marks every process of
	// this tree. The portable backend, which has no subreaper, finds the
	// descendants that left the process group by it once the leader has
	// exited; the Linux backend does not need it. "" means none.
	Tag string
	// Trace, when set, is called at this child's trace points, for a
	// benchmark's restart breakdown: TraceForkCall as the spawn thread
	// calls fork, TraceReaped when the child's wait4 returned. nil is off,
	// at the cost of a nil check.
	Trace func(TracePoint)
}

// TracePoint is a step of a child's start or reap that Spec.Trace is told of.
type TracePoint uint8

// The trace points, in the order a child passes them.
const (
	// TraceForkCall: the reaper's spawn thread took the start and calls
	// ForkExec.
	TraceForkCall TracePoint = iota
	// TraceReaped: the reaper's wait4 of the child returned, before it
	// sweeps the dead child's descendants and closes Done.
	TraceReaped
)

// Reaper starts children and owns every wait on them. The zero value is not
// usable; call NewReaper.
type Reaper struct {
	log *slog.Logger

	// mu is held while forking and while reaping, so no status can be
	// reaped between a fork and the registration of its pid, and an
	// unreaped child's pid (and group id) cannot be reused while mu is held.
	mu     sync.Mutex
	procs  map[int]*Process
	closed bool

	sigc  chan os.Signal
	forkc chan forkReq
	quit  chan struct{}
	wg    sync.WaitGroup
}

type forkReq struct {
	path  string
	args  []string
	attr  *syscall.ProcAttr
	spec  Spec
	reply chan forkReply
}

type forkReply struct {
	p   *Process
	err error
}

// NewReaper starts the reaper and the spawner thread; on Linux it first
// makes this process a child subreaper. log may be nil.
func NewReaper(log *slog.Logger) (*Reaper, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if err := becomeReaper(); err != nil {
		return nil, err
	}
	r := &Reaper{
		log:   log,
		procs: map[int]*Process{},
		sigc:  make(chan os.Signal, 1),
		forkc: make(chan forkReq),
		quit:  make(chan struct{}),
	}
	signal.Notify(r.sigc, unix.SIGCHLD)
	r.wg.Add(2)
	go r.reapLoop()
	go r.spawnLoop()
	return r, nil
}

// Close stops the reaper. On Linux, children still running get SIGKILL
// through their parent-death signal when the spawner thread exits; the
// portable backend has no such signal, so stop every child before Close.
// Close waits for nothing else.
func (r *Reaper) Close() error {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil
	}
	r.closed = true
	r.mu.Unlock()
	signal.Stop(r.sigc)
	close(r.quit)
	r.wg.Wait()
	return nil
}

// Start forks and execs one agent. An agent that cannot be started returns a
// *StartError (see FailedExit).
func (r *Reaper) Start(spec Spec) (*Process, error) {
	if len(spec.Args) == 0 {
		return nil, &StartError{Code: CodeNotFound, Err: errors.New("empty command")}
	}
	env := spec.Env
	if env == nil {
		env = os.Environ()
	}
	env = dedupEnv(env)
	path, err := lookPath(spec.Args[0], spec.Dir, env)
	if err != nil {
		return nil, newStartError(spec.Args[0], err)
	}
	files := []*os.File{spec.Stdin, spec.Stdout, spec.Stderr}
	for i, def := range []*os.File{os.Stdin, os.Stdout, os.Stderr} {
		if files[i] == nil {
			files[i] = def
		}
	}
	attr := &syscall.ProcAttr{
		Dir:   spec.Dir,
		Env:   env,
		Files: []uintptr{files[0].Fd(), files[1].Fd(), files[2].Fd()},
		Sys:   sysProcAttr(spec),
	}
	attr.Sys.Credential = spec.Credential.sys()
	spec.Cgroup.apply(attr.Sys)
	req := forkReq{path: path, args: spec.Args, attr: attr, spec: spec, reply: make(chan forkReply, 1)}
	select {
	case r.forkc <- req:
	case <-r.quit:
		return nil, ErrClosed
	}
	rep := <-req.reply
	runtime.KeepAlive(files)
	return rep.p, rep.err
}

// dedupEnv keeps the last entry of each name, in the place of the first:
// exec(2) passes duplicates on, and getenv(3) would then return the first.
func dedupEnv(env []string) []string {
	last := make(map[string]int, len(env))
	for i, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		last[name] = i
	}
	if len(last) == len(env) {
		return env
	}
	out := make([]string, 0, len(last))
	seen := make(map[string]bool, len(last))
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		if !seen[name] {
			seen[name] = true
			out = append(out, env[last[name]])
		}
	}
	return out
}

// lookPath resolves argv0 like a shell would, using the PATH the child will
// see.
func lookPath(argv0, dir string, env []string) (string, error) {
	if strings.Contains(argv0, "/") {
		p := argv0
		if dir != "" && !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if _, err := os.Stat(p); err != nil {
			return "", err
		}
		return argv0, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	if path == "" {
		path = os.Getenv("PATH")
	}
	for _, d := range filepath.SplitList(path) {
		if d == "" {
			d = "."
		}
		p := filepath.Join(d, argv0)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() {
			if fi.Mode()&0o111 == 0 {
				return "", &exec.Error{Name: argv0, Err: syscall.EACCES}
			}
			return p, nil
		}
	}
	return "", &exec.Error{Name: argv0, Err: exec.ErrNotFound}
}

// spawnLoop forks every child from one locked OS thread: Pdeathsig fires
// when the forking thread exits, so that thread must live as long as the
// children (golang/go#27505).
func (r *Reaper) spawnLoop() {
	defer r.wg.Done()
	runtime.LockOSThread()
	// Never unlocked: when this goroutine returns the thread exits with it,
	// which is exactly when its children should get their SIGKILL.
	for {
		select {
		case req := <-r.forkc:
			req.reply <- r.fork(req)
		case <-r.quit:
			return
		}
	}
}

func (r *Reaper) fork(req forkReq) forkReply {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return forkReply{err: ErrClosed}
	}
	started := time.Now()
	if req.spec.Trace != nil {
		req.spec.Trace(TraceForkCall)
	}
	pid, err := syscall.ForkExec(req.path, req.args, req.attr)
	if err != nil {
		// ForkExec reaps a child whose exec failed itself; nothing is left.
		return forkReply{err: newStartError(req.args[0], err)}
	}
	p := &Process{r: r, pid: pid, started: started, tag: req.spec.Tag, trace: req.spec.Trace, done: make(chan struct{}), cgroup: req.spec.Cgroup}
	if !req.spec.Foreground {
		p.pgid = pid
	}
	// The child cannot be reaped while we hold mu, so its pid names it.
	p.startTime, _ = StartTime(context.Background(), pid)
	r.procs[pid] = p
	return forkReply{p: p}
}

func (r *Reaper) reapLoop() {
	defer r.wg.Done()
	for {
		select {
		case <-r.sigc:
		case <-r.quit:
			return
		}
		ended, none := r.reap()
		if len(ended) > 0 {
			ended = append(ended, r.sweep(ended, none)...)
		}
		for _, p := range ended {
			p.finish()
		}
	}
}

// ended records p's exit; r.mu is held.
func (r *Reaper) ended(p *Process, ws unix.WaitStatus) *Process {
	delete(r.procs, p.pid)
	p.exit = exitFromStatus(p.pid, ws, p.started, time.Now())
	p.reaped = true
	return p
}

// Process is one running agent started by a Reaper.
type Process struct {
	r         *Reaper
	pid, pgid int
	startTime int64
	started   time.Time
	tag       string           // Spec.Tag
	trace     func(TracePoint) // Spec.Trace; nil: off

	cgroup *RunCgroup // nil: none

	// Guarded by r.mu.
	reaped bool
	inner  inner // pidfds on the leader's direct children (WatchInner)

	done chan struct{}
	exit Exit // valid once done is closed
}

// PID returns the child's pid.
func (p *Process) PID() int { return p.pid }

// PGID returns the child's process group, 0 when it shares the supervisor's.
func (p *Process) PGID() int { return p.pgid }

// StartTime returns the child's start time as StartTime reports it; with
// the pid it identifies the process across pid reuse.
func (p *Process) StartTime() int64 { return p.startTime }

// Started returns when the child was started.
func (p *Process) Started() time.Time { return p.started }

// Done is closed when the child has exited, been reaped, and its leftover
// descendants have been killed.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exit returns how the child ended; it is valid once Done is closed.
func (p *Process) Exit() Exit {
	<-p.done
	return p.exit
}

func (p *Process) finish() { close(p.done) }

// Signal sends sig to the child's process group (to the child alone when it
// shares the supervisor's group). It does nothing once the child is reaped.
func (p *Process) Signal(sig syscall.Signal) error {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if p.reaped {
		return nil
	}
	target := p.pid
	if p.pgid > 0 {
		target = -p.pgid
	}
	if err := unix.Kill(target, sig); err != nil && err != unix.ESRCH {
		return err
	}
	return nil
}

// Terminate asks the child to stop: sig, then SIGCONT so a stopped process
// can act on it (in that order, so it cannot fork in between).
func (p *Process) Terminate(sig syscall.Signal) error {
	if err := p.Signal(sig); err != nil {
		return err
	}
	return p.Signal(unix.SIGCONT)
}

// Kill sends SIGKILL to the child, its process group and every descendant
// it has now; descendants orphaned later are swept when the child is reaped.
func (p *Process) Kill() error {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	if p.reaped {
		return nil
	}
	if p.pgid > 0 {
		_ = unix.Kill(-p.pgid, unix.SIGKILL)
	}
	_ = p.cgroup.Kill()
	for _, d := range descendants(p.pid) {
		killPinned(context.Background(), d)
	}
	if err := unix.Kill(p.pid, unix.SIGKILL); err != nil && err != unix.ESRCH {
		return err
	}
	return nil
}

// Stop stops the child the way a service manager does: sig and SIGCONT,
// then up to grace for it to exit, then SIGKILL to the whole tree. Cancelling
// ctx skips the rest of the grace period. It returns how the child ended.
//
// No binary calls it (the runner stops through Signal and Kill on its own
// clock): it is child's one-call stop for other Go users, tested here.
func (p *Process) Stop(ctx context.Context, sig syscall.Signal, grace time.Duration) Exit {
	_ = p.Terminate(sig)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.Kill()
	case <-ctx.Done():
		_ = p.Kill()
	}
	return p.Exit()
}

// reapAny reaps every child that has exited, whoever it is (wait4 of any
// pid, without blocking), and appends the registered ones to ended; any
// other is logged as orphan says. Called under r.mu by both backends'
// reap. none reports that no child at all is left.
func (r *Reaper) reapAny(ended []*Process, orphan string) (_ []*Process, none bool) {
	for {
		var ws unix.WaitStatus
		pid, err := unix.Wait4(-1, &ws, unix.WNOHANG, nil)
		if err == unix.EINTR {
			continue
		}
		if err == unix.ECHILD {
			return ended, true
		}
		if err != nil || pid <= 0 {
			return ended, false
		}
		if p, ok := r.procs[pid]; ok {
			innerSig := p.inner.killedBy() // 0 where inner deaths are not watched
			e := r.ended(p, ws)
			e.exit.InnerSignal = innerSig
			ended = append(ended, e)
			continue
		}
		r.log.Debug(orphan, "pid", pid)
	}
}
