package supervisor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/internal/statedir"
	"github.com/supervise-dev/supervise/supervisor/machine"
)

// What a person may want to hear of (machine.Notice: a park, a wait for a
// person, a limit's wait, a give-up) is told two ways, off the loop: one
// JSON line appended to EventsFile in the state dir (supervise events
// reads it), and, with --on-event CMD, CMD run through /bin/sh -c with the
// document on its stdin and in SUPERVISE_EVENT_* variables. The loop only
// queues a document, never waits: one worker writes and runs them in
// order, a command is killed (its process group) after onEventTimeout,
// and past a full queue documents are dropped, counted and said.

// EventsFile is the state dir's file of event documents, one JSON line
// each; EventsFile+".1" is the previous one.
const EventsFile = "events.jsonl"

// eventsFileMax is the size at which EventsFile is rotated.
const eventsFileMax = 1 << 20

// onEventTimeout bounds one run of the --on-event command.
const onEventTimeout = 10 * time.Second

// eventQueue bounds the documents waiting for the worker.
const eventQueue = 256

// EventDoc is one event document: what happened, to which agent and
// session, and the command that acts on it. Session, turn and reason come
// from the agent (untrusted): the command reads them from its stdin or its
// environment, never from its own command line.
type EventDoc struct {
	Time     time.Time `json:"time"`
	Event    string    `json:"event"`
	Name     string    `json:"name"`
	StateDir string    `json:"state_dir"`
	Session  string    `json:"session,omitempty"`
	Turn     string    `json:"turn,omitempty"`
	Reason   string    `json:"reason,omitempty"`
	Command  string    `json:"command,omitempty"`
}

// eventSink queues event documents and writes and runs them off the loop.
type eventSink struct {
	dir, cmd string
	log      *slog.Logger
	q        chan EventDoc
	done     chan struct{}
	cancel   context.CancelFunc
	ctx      context.Context
	// dropped counts documents past a full queue; failures the --on-event
	// runs that failed (an exit status, the timeout, a start error).
	dropped, failures atomic.Uint64
	f                 *os.File
	size              int64
	closed            sync.Once
}

func newEventSink(dir, cmd string, log *slog.Logger) *eventSink {
	ctx, cancel := context.WithCancel(context.Background())
	k := &eventSink{dir: dir, cmd: cmd, log: log, q: make(chan EventDoc, eventQueue), done: make(chan struct{}),
		ctx: ctx, cancel: cancel}
	go k.work()
	return k
}

// tell queues a notice's document; it never blocks.
func (k *eventSink) tell(n machine.Notice, name string, now time.Time) {
	d := EventDoc{Time: now.UTC(), Event: n.Event, Name: name, StateDir: k.dir, Session: n.Session, Turn: n.Turn,
		Reason: n.Reason, Command: n.Command}
	select {
	case k.q <- d:
	default:
		if v := k.dropped.Add(1); v&(v-1) == 0 { // said at 1, 2, 4, 8, ...
			k.log.Warn("events: the queue is full (the --on-event command is slow): a document dropped", "event", n.Event,
				"session", n.Session, "dropped", v)
		}
	}
}

// close lets the worker finish what is queued, for at most wait; a
// command still running then is killed.
func (k *eventSink) close(wait time.Duration) {
	k.closed.Do(func() { k.finish(wait) })
}

func (k *eventSink) finish(wait time.Duration) {
	close(k.q)
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-k.done:
	case <-t.C:
		k.cancel()
		<-k.done
	}
	k.cancel()
}

func (k *eventSink) work() {
	defer close(k.done)
	defer func() {
		if k.f != nil {
			k.f.Close()
		}
	}()
	for d := range k.q {
		b, err := json.Marshal(d)
		if err != nil {
			continue
		}
		if err := k.write(append(b, '\n')); err != nil {
			k.log.Warn("events: cannot append to "+EventsFile, "err", err)
		}
		if k.cmd != "" && k.ctx.Err() == nil {
			k.run(d, b)
		}
	}
}

// write appends one line to EventsFile, rotating it past eventsFileMax.
func (k *eventSink) write(line []byte) error {
	path := filepath.Join(k.dir, EventsFile)
	if k.f != nil && k.size+int64(len(line)) > eventsFileMax {
		k.f.Close()
		k.f = nil
		if err := os.Rename(path, path+".1"); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if k.f == nil {
		f, size, err := statedir.OpenAppend(path)
		if err != nil {
			return err
		}
		k.f, k.size = f, size
	}
	n, err := k.f.Write(line)
	k.size += int64(n)
	return err
}

// run runs the --on-event command for d (b, its JSON) and waits for it,
// at most onEventTimeout: then its process group is killed.
func (k *eventSink) run(d EventDoc, b []byte) {
	ctx, cancel := context.WithTimeout(k.ctx, onEventTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "/bin/sh", "-c", k.cmd)
	cmd.Stdin = bytes.NewReader(append(b, '\n'))
	cmd.Env = append(os.Environ(), "SUPERVISE_EVENT="+d.Event, "SUPERVISE_EVENT_NAME="+d.Name,
		"SUPERVISE_EVENT_STATE_DIR="+d.StateDir, "SUPERVISE_EVENT_SESSION="+d.Session, "SUPERVISE_EVENT_TURN="+d.Turn,
		"SUPERVISE_EVENT_REASON="+d.Reason, "SUPERVISE_EVENT_COMMAND="+d.Command,
		"SUPERVISE_EVENT_TIME="+d.Time.Format(time.RFC3339Nano))
	cmd.Dir = k.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = time.Second
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &limitedWriter{w: &out, n: 2048}, &limitedWriter{w: &out, n: 2048}
	if err := cmd.Run(); err != nil {
		k.failures.Add(1)
		why := err.Error()
		if ctx.Err() == context.DeadlineExceeded {
			why = "killed after " + onEventTimeout.String()
		}
		k.log.Warn("--on-event command failed", "event", d.Event, "session", d.Session, "err", why,
			"output", strings.TrimSpace(out.String()))
	}
}

// limitedWriter keeps the first n bytes written to it and drops the rest.
type limitedWriter struct {
	w interface{ WriteString(string) (int, error) }
	n int
}

func (l *limitedWriter) Write(p []byte) (int, error) {
	if l.n > 0 {
		keep := p[:min(len(p), l.n)]
		l.w.WriteString(string(keep))
		l.n -= len(keep)
	}
	return len(p), nil
}
