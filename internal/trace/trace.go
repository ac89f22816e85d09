// Package trace records when supervise passes the steps of a restart, for
// the benchmark's restart breakdown (go run ./bench -only restart): death
// reaped, death seen, decided, committed, cgroup ready, fork started,
// child started; and of a start-up: run entered, boot done, then the first
// launch's cgroup ready, fork started, child started.
//
// It is off in production at the cost of a nil check: FromEnv returns nil
// unless $SUPERVISE_BENCH_TRACE names a file, and every method of a nil
// *Recorder does nothing. On, Mark takes CLOCK_MONOTONIC (the clock the
// bench's reporter child stamps its exec with, so the two compare; its
// resolution is a nanosecond) and appends one line to a buffer in memory;
// the buffer is written to the file, with one write, at Started, the last
// step of a restart, and at Close. No step of a restart waits on the file.
//
// Lines are "STEP NANOSECONDS\n", STEP one of the Step names below.
package trace

import (
	"os"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// EnvVar names the file the trace is appended to; unset or empty, tracing
// is off.
const EnvVar = "SUPERVISE_BENCH_TRACE"

// Step is one step of the restart path.
type Step uint8

// The steps, in the order a restart passes them.
const (
	// Reaped: the reaper's wait4 of the child returned (child/), before
	// it sweeps the dead child's descendants and closes Done.
	Reaped Step = iota
	// DeathSeen: the run loop took the death (its select on Done woke).
	DeathSeen
	// Decided: the machine's Step for the death returned (the decision
	// per session is made, nothing is written yet).
	Decided
	// Committed: the writer's commit of the death returned (fdatasync
	// done): the relaunch may start.
	Committed
	// CgroupReady: the next run's cgroup exists and its fd is open.
	CgroupReady
	// ForkStart: just before the child is started (os.StartProcess or
	// the clone of child/).
	ForkStart
	// Started: the start returned in supervise (Go's StartProcess returns
	// once the child has exec'd). The buffer is written here.
	Started
	// RunStart: supervisor's Run was entered (after the process start,
	// package init, the flags and the journal's open): the start-up
	// breakdown's first step.
	RunStart
	// BootDone: Run's boot (the journal taken over, the boot committed)
	// returned; the first launch follows.
	BootDone
	// MainStart: cmd/supervise's run command was entered (after the
	// process start and package init, before the flags).
	MainStart
	// JournalOpened: cmd/supervise has the state dir prepared and the
	// journal open (flock, the owner file, the page walk).
	JournalOpened
	// ForkCall: the reaper's spawn thread took the start and calls
	// ForkExec (child/): ForkStart to here is the hand-off to that thread.
	ForkCall
	numSteps
)

var names = [numSteps]string{"reaped", "death_seen", "decided", "committed", "cgroup_ready", "fork_start", "started", "run_start", "boot_done", "main_start", "journal_opened", "fork_call"}

// String is the step's name in the trace file.
func (s Step) String() string {
	if s < numSteps {
		return names[s]
	}
	return "step" + strconv.Itoa(int(s))
}

// Parse returns the Step named name.
func Parse(name string) (Step, bool) {
	for i, n := range names {
		if n == name {
			return Step(i), true
		}
	}
	return 0, false
}

// Recorder appends marks to a trace file. A nil *Recorder is off.
type Recorder struct {
	mu  sync.Mutex
	f   *os.File
	buf []byte
}

// FromEnv opens the trace file $SUPERVISE_BENCH_TRACE names (appending,
// created 0600), or returns nil when it is unset or cannot be opened:
// tracing is a benchmark's, and never stops supervise.
func FromEnv() *Recorder {
	path := os.Getenv(EnvVar)
	if path == "" {
		return nil
	}
	r, err := Open(path)
	if err != nil {
		return nil
	}
	return r
}

// Open opens path for appending marks.
func Open(path string) (*Recorder, error) {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	return &Recorder{f: f, buf: make([]byte, 0, 512)}, nil
}

// Now is CLOCK_MONOTONIC in nanoseconds.
func Now() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// Mark records that step was reached now. At Started it writes the
// buffer out.
func (r *Recorder) Mark(step Step) {
	if r == nil {
		return
	}
	t := Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, step.String()...)
	r.buf = append(r.buf, ' ')
	r.buf = strconv.AppendInt(r.buf, t, 10)
	r.buf = append(r.buf, '\n')
	if step == Started {
		r.flushLocked()
	}
}

// Close writes what is buffered and closes the file.
func (r *Recorder) Close() error {
	if r == nil {
		return nil
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.flushLocked()
	return r.f.Close()
}

func (r *Recorder) flushLocked() {
	if len(r.buf) > 0 {
		_, _ = r.f.Write(r.buf)
		r.buf = r.buf[:0]
	}
}
