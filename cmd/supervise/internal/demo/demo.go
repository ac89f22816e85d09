// Package demo is `supervise demo`: a scripted story told with a built-in
// demo agent (no network, no API key) under a real supervise. The narrator
// waits on the agent's own events file and on supervise's status (the
// control socket, then `supervise status --json` from the journal), never
// on supervise's log text, so rewording a log line cannot break it.
package demo

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"golang.org/x/sys/unix"

	"github.com/supervise-dev/supervise/internal/signame"
	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
	"github.com/supervise-dev/supervise/supervisor"
)

// Demo timing: every wait is on an event, bounded by StepTimeout; the
// whole story by Timeout. Pause lets a person read each step when
// stdout is a terminal.
const (
	StepTimeout = 20 * time.Second
	Timeout     = 50 * time.Second
	Pause       = 1200 * time.Millisecond
	poll        = 20 * time.Millisecond
	width       = 78
)

// errDemo reports a story that did not go as told.
var errDemo = errors.New("the demo did not go as expected")

// Options configure one demo.
type Options struct {
	// Out receives the story.
	Out io.Writer
	// Self is the supervise binary: the demo runs `Self run`, `Self status`,
	// `Self resume` and, as the agent, `Self demo-agent`. Empty: this
	// process's own executable.
	Self string
	// Pause is how long to wait between steps so that a person can read
	// them (see Pause); 0 for none.
	Pause time.Duration
}

// Run tells the story: it runs the demo agent under a real supervise with
// a temporary state dir (kill -9 mid-turn, automatic resume, a turn that
// killed twice in a row parked, a manual resume), narrates each step on
// opts.Out and ends with a summary table. Every wait is bounded by
// StepTimeout and the whole story by Timeout. It returns an error wrapping
// errDemo, with supervise's log attached, when the story did not go as
// told; the temporary dir is removed in every case.
func Run(ctx context.Context, opts Options) error {
	ctx, cancel := context.WithTimeout(ctx, Timeout)
	defer cancel()
	d, err := newDemo(opts.Out, opts.Self)
	if err != nil {
		return err
	}
	d.pause = opts.Pause
	err = d.play(ctx)
	if err != nil {
		if log := d.logTail(); log != "" { // before close removes it
			err = fmt.Errorf("%w\nsupervise's log:\n%s", err, strings.TrimRight(log, "\n"))
		}
	}
	if cerr := d.close(); err == nil {
		err = cerr
	}
	return err
}

// IsTerminal reports whether w is a terminal.
func IsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	_, err := unix.IoctlGetTermios(int(f.Fd()), ioctlGetTermios)
	return err == nil
}

// demo is one run of the story.
type demo struct {
	out      io.Writer
	self     string   // this binary: supervise, and the demo agent
	dir      string   // temporary, removed by close
	stateDir string   // supervise's state dir
	events   string   // the demo agent's events file
	logPath  string   // supervise's stderr
	env      []string // the environment of every process started
	ignored  []string // SUPERVISE_* variables dropped from env
	pause    time.Duration

	sv     *exec.Cmd
	svDone chan struct{}
	svErr  error

	parked map[string]bool   // sessions seen parked
	notes  map[uint64]string // run -> how the demo ended it
}

func newDemo(out io.Writer, self string) (*demo, error) {
	if self == "" {
		var err error
		if self, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("finding the supervise binary: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "supervise-demo-")
	if err != nil {
		return nil, err
	}
	d := &demo{out: out, self: self, dir: dir, stateDir: filepath.Join(dir, "state"),
		events: filepath.Join(dir, "agent-events.jsonl"), logPath: filepath.Join(dir, "supervise.log"),
		parked: map[string]bool{}, notes: map[uint64]string{}}
	// The demo's settings are its own: no SUPERVISE_* from the caller (a
	// test suite's SUPERVISE_RESUME=off would stop the story), and no
	// service manager's variables.
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "SUPERVISE_"):
			d.ignored = append(d.ignored, name)
		case name == "NOTIFY_SOCKET", strings.HasPrefix(name, "WATCHDOG_"), strings.HasPrefix(name, "LISTEN_"):
		default:
			d.env = append(d.env, kv)
		}
	}
	return d, nil
}

// runArgs is the supervise command line of the demo.
func (d *demo) runArgs() []string {
	return []string{"run", "--state-dir", d.stateDir, "--name", "demo", "--resume-signal", "SIGUSR1",
		"--stop-timeout", "2s", "--backoff-initial", "100ms", "--log-level", "warn", "--foreground", "never",
		"--", d.self, "demo-agent", "--events", d.events}
}

// play tells the story.
func (d *demo) play(ctx context.Context) error {
	d.title("supervise demo")
	d.say("A short scripted story: a built-in demo agent (no network, no API key) runs under supervise with a temporary state dir. It works on two sessions, A and B, and is killed twice in the middle of a turn. Watch what supervise decides each time, and why.")
	if len(d.ignored) > 0 {
		d.say("(The demo uses its own settings: it ignores " + strings.Join(d.ignored, ", ") + " from the environment.)")
	}
	d.blank()
	d.quote("$ supervise run --state-dir " + d.stateDir + " --name demo --resume-signal SIGUSR1 --stop-timeout 2s --backoff-initial 100ms -- supervise demo-agent")
	if err := d.startSupervise(); err != nil {
		return err
	}
	steps := []func(context.Context) error{d.stepStart, d.stepKill, d.stepResumed, d.stepPoison, d.stepStatus, d.stepManual, d.stepStop}
	for i, step := range steps {
		if err := step(ctx); err != nil {
			return err
		}
		if i < len(steps)-1 {
			d.wait(ctx)
		}
	}
	return nil
}

// 1. The agent starts; B completes a turn, A starts a long tool call.
func (d *demo) stepStart(ctx context.Context) error {
	ev, err := d.waitEvent(ctx, "A to start its tool call in run 1", func(e demoEvent) bool {
		return e.Run == 1 && e.Kind == "in-tool"
	})
	if err != nil {
		return err
	}
	d.step(1, "Two sessions take turns")
	d.say(fmt.Sprintf("supervise started the demo agent (run 1, pid %d). The agent tells supervise what it is doing over the notify socket ($NOTIFY_SOCKET): which session began a turn, which phase and tool it is in, which turn ended. supervise commits each marker to its bbolt journal, and the agent's barrier returns once they are durable.", ev.PID))
	for _, e := range d.eventsOf(func(e demoEvent) bool { return e.Run == 1 }) {
		switch e.Kind {
		case "turn-done":
			d.item(fmt.Sprintf("session B: %q: turn completed", e.Prompt))
		case "in-tool":
			d.item(fmt.Sprintf("session A: %q: running the tool %s (a long one)", e.Prompt, e.Tool))
		}
	}
	st, err := d.status(ctx)
	if err != nil {
		return err
	}
	a := demoSession(st, "A")
	if a == nil || a.State != string(record.InTurn) || st.Child.PID != ev.PID {
		return fmt.Errorf("%w: after run 1 started, status shows child pid %d and session A %+v", errDemo, st.Child.PID, a)
	}
	d.say(fmt.Sprintf("supervise's status agrees: child pid %d, session A %s, phase %s, tool %s.", st.Child.PID, a.State, a.Phase, a.Tool))
	return nil
}

// 2. kill -9 of the agent while A is mid-turn.
func (d *demo) stepKill(ctx context.Context) error {
	ev, _ := d.findEvent(func(e demoEvent) bool { return e.Run == 1 && e.Kind == "in-tool" })
	d.step(2, "kill -9 in the middle of A's turn")
	d.quote(fmt.Sprintf("$ kill -9 %d", ev.PID))
	if err := syscall.Kill(ev.PID, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 of the agent: %w", err)
	}
	d.notes[1] = "kill -9 by the demo, A mid-turn"
	d.say("Without supervise, this is where the story ends: the agent is gone, and A's turn with it, half done. " + demoToolA + " may or may not have written client.go, and nothing will tell the agent to go and look. A plain process supervisor (systemd, supervisord, PM2) would restart the agent, but it counts processes, not turns: it cannot know that A was in the middle of one.")
	if _, err := d.waitEvent(ctx, "the agent's relaunch (run 2)", func(e demoEvent) bool { return e.Run == 2 && e.Kind == "start" }); err != nil {
		return err
	}
	d.say("supervise knew. It recorded the death as dirty (killed by a signal), and decided per session, in one journal transaction, before it relaunched the agent: A was mid-turn, and this was its first dirty death in a row (crash count 1, within --resume-limit 1), so A is owed an automatic resume. B was between turns: nothing to do. Its journal, as supervise status shows it:")
	return d.showRun(ctx, 1)
}

// 3. The relaunched agent takes A's continuation from the resume file.
func (d *demo) stepResumed(ctx context.Context) error {
	ev, err := d.waitEvent(ctx, "the agent to take A's resume in run 2", func(e demoEvent) bool {
		return e.Run == 2 && e.Kind == "took" && e.Session == "A"
	})
	if err != nil {
		return err
	}
	if ev.Reason == resume.ReasonManual {
		return fmt.Errorf("%w: run 2 got a manual resume of A, want an automatic one", errDemo)
	}
	if n := len(d.eventsOf(func(e demoEvent) bool { return e.Run == 2 && e.Kind == "took" })); n != 1 {
		return fmt.Errorf("%w: run 2 took %d resumes, want only A's", errDemo, n)
	}
	d.step(3, "Automatic resume")
	d.say(fmt.Sprintf("supervise relaunched the agent (run 2, pid %d) with $SUPERVISE_RESUME_FILE pointing at a resume file that holds one entry: session A, turn %s, attempt %d, interrupted because %s. The agent took it over and reported \"resumed\". The continuation message supervise wrote for it, to send to the model as a hidden turn:", ev.PID, ev.Turn, ev.Attempt, ev.Reason))
	d.blank()
	d.wrap(ev.Message, "     > ")
	d.blank()
	d.say("It is honest about side effects: the turn was interrupted, in which tool, and the tool's effect is unknown, so the agent must check before it redoes anything.")
	return nil
}

// 4. Continuing A kills the agent again: A is parked, B carries on.
func (d *demo) stepPoison(ctx context.Context) error {
	ev, err := d.waitEvent(ctx, "the agent to continue A in run 2", func(e demoEvent) bool {
		return e.Run == 2 && e.Kind == "poison"
	})
	if err != nil {
		return err
	}
	d.step(4, "Killed again in the same turn")
	d.say("Continuing A, the agent is running " + demoToolA + " again, and it is killed again, from outside, the same way:")
	d.quote(fmt.Sprintf("$ kill -9 %d", ev.PID))
	if err := syscall.Kill(ev.PID, syscall.SIGKILL); err != nil {
		return fmt.Errorf("kill -9 of the agent continuing A: %w", err)
	}
	d.notes[2] = "kill -9 by the demo, A continuing"
	if _, err := d.waitEvent(ctx, "the agent's relaunch (run 3)", func(e demoEvent) bool { return e.Run == 3 && e.Kind == "start" }); err != nil {
		return err
	}
	d.say("A's turn has now been killed twice in a row. Whether by a person, a script or a chaos test (as here), or by the turn itself crashing the agent, resuming A once more would likely end the same way, and again: a crash loop that burns API credit every few seconds.")
	st, err := d.status(ctx)
	if err != nil {
		return err
	}
	a := demoSession(st, "A")
	if a == nil || a.State != string(record.Parked) || a.CrashCount != 2 {
		return fmt.Errorf("%w: after the second death, status shows session A %+v, want parked", errDemo, a)
	}
	d.say(fmt.Sprintf("supervise's rule: resume a turn once; at the second consecutive dirty death mid-turn (crash count %d > --resume-limit 1) park the session instead. A parked session is never resumed automatically, but it stays visible with its reason and one command from resuming. Session A is now %s, reason:", a.CrashCount, a.State))
	d.wrap(a.Reason, "     ")
	d.say("Only A is held back: supervise relaunched the agent (run 3, after a short backoff, as the runs died so young) for everything else. Its journal:")
	if err := d.showRun(ctx, 2); err != nil {
		return err
	}
	ev, err = d.waitEvent(ctx, "B's turn in run 3", func(e demoEvent) bool {
		return e.Run == 3 && e.Kind == "turn-done" && e.Session == "B"
	})
	if err != nil {
		return err
	}
	d.item(fmt.Sprintf("session B: %q: turn completed (run 3)", ev.Prompt))
	return nil
}

// 5. The plain-text status.
func (d *demo) stepStatus(ctx context.Context) error {
	d.step(5, "supervise status")
	d.say("What a person sees when they look (supervise answers over its control socket while it runs):")
	d.quote("$ supervise status --state-dir " + d.stateDir)
	out, err := d.command(ctx, "status", "--state-dir", d.stateDir)
	if err != nil {
		return err
	}
	d.quote(out)
	return nil
}

// 6. supervise resume A, delivered live; the agent finishes A.
func (d *demo) stepManual(ctx context.Context) error {
	d.step(6, "Resume A by hand")
	d.say("In real life you would first find out what kills the agent during A (the reason above says what supervise saw), and stop it. Then one command resumes it:")
	d.quote("$ supervise resume --state-dir " + d.stateDir + " A")
	out, err := d.command(ctx, "resume", "--state-dir", d.stateDir, "A")
	if err != nil {
		return err
	}
	d.quote(out)
	ev, err := d.waitEvent(ctx, "the agent to take A's manual resume in run 3", func(e demoEvent) bool {
		return e.Run == 3 && e.Kind == "took" && e.Session == "A"
	})
	if err != nil {
		return err
	}
	if ev.Reason != resume.ReasonManual {
		return fmt.Errorf("%w: the resume of A in run 3 has reason %q, want \"manual resume\"", errDemo, ev.Reason)
	}
	if _, err := d.waitEvent(ctx, "A's turn to complete in run 3", func(e demoEvent) bool {
		return e.Run == 3 && e.Kind == "turn-done" && e.Session == "A"
	}); err != nil {
		return err
	}
	d.say("supervise reset A's crash count, rewrote the resume file and sent SIGUSR1 (--resume-signal) to the running agent: no restart needed. The entry's reason is \"" + ev.Reason + "\", so the agent can tell it from an automatic one; its message starts:")
	first, _, _ := strings.Cut(ev.Message, ". ")
	d.wrap(first+". ...", "     > ")
	d.say("The demo agent takes a manual resume to mean \"a person dealt with what killed it\", and nothing kills it now: this time " + demoToolA + " finished.")
	d.item(fmt.Sprintf("session A: %q: turn completed (run 3)", demoPromptA))
	return nil
}

// 7. Stop supervise and sum up.
func (d *demo) stepStop(ctx context.Context) error {
	d.step(7, "Stop, and what happened")
	d.quote(fmt.Sprintf("$ kill -TERM %d   # supervise", d.sv.Process.Pid))
	if err := d.sv.Process.Signal(syscall.SIGTERM); err != nil {
		return fmt.Errorf("stopping supervise: %w", err)
	}
	select {
	case <-d.svDone:
	case <-time.After(StepTimeout):
		return fmt.Errorf("%w: supervise did not exit within %v of SIGTERM", errDemo, StepTimeout)
	}
	if d.svErr != nil {
		return fmt.Errorf("%w: supervise ended with %v after SIGTERM, want exit status 0", errDemo, d.svErr)
	}
	d.say("supervise passed the stop on to the agent (SIGTERM, which it answered by exiting 0) and exited 0: a requested stop, not a crash, so nothing is counted or resumed.")

	// supervise has exited: status reads its journal.
	out, err := d.command(ctx, "status", "--json", "--all", "--state-dir", d.stateDir)
	if err != nil {
		return fmt.Errorf("reading the journal: %w", err)
	}
	var st supervisor.Status
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		return fmt.Errorf("reading the journal: supervise status --json: %w", err)
	}
	return d.summary(st)
}

// summary prints the final table from the journal and the agent's events.
func (d *demo) summary(st supervisor.Status) error {
	dirty := 0
	for _, r := range st.Runs {
		if r.Dirty {
			dirty++
		}
	}
	auto, manual, dups := 0, 0, 0
	turns := map[string]int{}
	resumes := map[string][]string{}
	for _, e := range d.eventsOf(func(demoEvent) bool { return true }) {
		switch {
		case e.Kind == "took" && e.Dup:
			dups++
		case e.Kind == "took" && e.Reason == resume.ReasonManual:
			manual++
			resumes[e.Session] = append(resumes[e.Session], "by hand")
		case e.Kind == "took":
			auto++
			resumes[e.Session] = append(resumes[e.Session], "automatic")
		case e.Kind == "turn-done":
			turns[e.Session]++
		}
	}
	d.blank()
	d.title("Summary")
	tw := tabwriter.NewWriter(d.out, 0, 2, 2, ' ', 0)
	fmt.Fprintf(tw, "  runs\t%d\n", len(st.Runs))
	fmt.Fprintf(tw, "  dirty deaths\t%d\n", dirty)
	fmt.Fprintf(tw, "  resumes dispatched\t%d\t(%d automatic, %d by hand)\n", auto+manual, auto, manual)
	if dups > 0 {
		fmt.Fprintf(tw, "  resumes delivered twice\t%d\n", dups)
	}
	var parked []string
	for id := range d.parked {
		parked = append(parked, id)
	}
	sort.Strings(parked)
	fmt.Fprintf(tw, "  sessions parked\t%d\t(%s)\n", len(parked), strings.Join(parked, ", "))
	tw.Flush()
	d.blank()
	fmt.Fprintln(tw, "  RUN\tPID\tDIRTY\tHOW IT ENDED")
	for i := len(st.Runs) - 1; i >= 0; i-- {
		r := st.Runs[i]
		how := howEnded(r)
		if n := d.notes[r.Run]; n != "" {
			how += " (" + n + ")"
		}
		fmt.Fprintf(tw, "  %d\t%d\t%s\t%s\n", r.Run, r.PID, demoYesNo(r.Dirty), how)
	}
	tw.Flush()
	d.blank()
	fmt.Fprintln(tw, "  SESSION\tFINAL STATE\tCRASH COUNT\tTURNS COMPLETED\tRESUMES TAKEN")
	for _, s := range st.Sessions {
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%s\n", s.ID, s.State, s.CrashCount, turns[s.ID], demoDash(strings.Join(resumes[s.ID], ", ")))
	}
	tw.Flush()
	d.blank()
	if len(st.Runs) != 3 || dirty != 2 || auto != 1 || manual != 1 || dups != 0 || len(parked) != 1 {
		return fmt.Errorf("%w: the summary does not match the story", errDemo)
	}
	for _, s := range st.Sessions {
		if s.State != string(record.Idle) || s.CrashCount != 0 {
			return fmt.Errorf("%w: session %s ended %s with crash count %d, want idle with 0", errDemo, s.ID, s.State, s.CrashCount)
		}
	}
	d.say("Every session finished its work. The state dir is removed now; on a real agent, supervise keeps the journal, so all of this survives the agent's death and supervise's own.")
	return nil
}

// howEnded tells how a run ended, from its journal record.
func howEnded(r supervisor.RunStatus) string {
	how := fmt.Sprintf("exited %d", r.ExitCode)
	if r.Signal != 0 {
		how = "killed by " + signame.Of(syscall.Signal(r.Signal))
	}
	if r.Reason == record.ReasonStopped {
		how += ", a requested stop"
	}
	return how
}

func demoYesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

func demoDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// startSupervise starts `supervise run` over the demo agent, its output
// going to the log file.
func (d *demo) startSupervise() error {
	log, err := os.OpenFile(d.logPath, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer log.Close() // the child has its own copy
	cmd := exec.Command(d.self, d.runArgs()...)
	cmd.Env = d.env
	cmd.Stdout, cmd.Stderr = log, log
	// If the demo dies, supervise stops the agent and exits.
	dieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting supervise: %w", err)
	}
	d.sv, d.svDone = cmd, make(chan struct{})
	go func() {
		d.svErr = cmd.Wait()
		close(d.svDone)
	}()
	return nil
}

// close stops supervise if it still runs and removes the temporary dir.
func (d *demo) close() error {
	var err error
	if d.sv != nil {
		select {
		case <-d.svDone:
		default:
			d.sv.Process.Signal(syscall.SIGTERM)
			select {
			case <-d.svDone:
			case <-time.After(5 * time.Second):
				d.sv.Process.Kill()
				<-d.svDone
				err = errors.New("supervise did not stop within 5s of SIGTERM: killed")
			}
		}
	}
	if rerr := os.RemoveAll(d.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

// command runs this binary with args and returns its output.
func (d *demo) command(ctx context.Context, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, d.self, args...)
	cmd.Env = d.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("supervise %s: %w\n%s", args[0], err, out)
	}
	return strings.TrimRight(string(out), "\n"), nil
}

// status asks the running supervise for its status.
func (d *demo) status(ctx context.Context) (supervisor.Status, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := supervisor.FetchStatus(ctx, d.stateDir, false)
	if err != nil {
		return st, fmt.Errorf("supervise status: %w", err)
	}
	for _, s := range st.Sessions {
		if s.State == string(record.Parked) {
			d.parked[s.ID] = true
		}
	}
	return st, nil
}

func demoSession(st supervisor.Status, id string) *supervisor.SessionStatus {
	for i := range st.Sessions {
		if st.Sessions[i].ID == id {
			return &st.Sessions[i]
		}
	}
	return nil
}

// eventsOf returns the agent's events for which match is true, in order.
func (d *demo) eventsOf(match func(demoEvent) bool) []demoEvent {
	b, _ := os.ReadFile(d.events)
	var out []demoEvent
	for _, line := range bytes.Split(b, []byte("\n")) {
		var e demoEvent
		if len(line) == 0 || json.Unmarshal(line, &e) != nil {
			continue
		}
		if match(e) {
			out = append(out, e)
		}
	}
	return out
}

func (d *demo) findEvent(match func(demoEvent) bool) (demoEvent, bool) {
	if evs := d.eventsOf(match); len(evs) > 0 {
		return evs[0], true
	}
	return demoEvent{}, false
}

// waitEvent waits until the agent records an event for which match is
// true. It fails early when the agent reports an error or supervise exits.
func (d *demo) waitEvent(ctx context.Context, what string, match func(demoEvent) bool) (demoEvent, error) {
	ctx, cancel := context.WithTimeout(ctx, StepTimeout)
	defer cancel()
	t := time.NewTicker(poll)
	defer t.Stop()
	for {
		if e, ok := d.findEvent(match); ok {
			return e, nil
		}
		if e, ok := d.findEvent(func(e demoEvent) bool { return e.Kind == "error" }); ok {
			return e, fmt.Errorf("%w: the demo agent failed in run %d: %s", errDemo, e.Run, e.Err)
		}
		select {
		case <-d.svDone:
			return demoEvent{}, fmt.Errorf("%w: supervise exited (%v) while waiting for %s", errDemo, d.svErr, what)
		case <-ctx.Done():
			return demoEvent{}, fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
}

// showRun prints the journal's record of run n, as supervise status
// reports it: how the run ended and whether the death was dirty.
func (d *demo) showRun(ctx context.Context, n uint64) error {
	st, err := d.status(ctx)
	if err != nil {
		return err
	}
	for _, r := range st.Runs {
		if r.Run != n {
			continue
		}
		dirty := "a clean end"
		if r.Dirty {
			dirty = "a dirty death"
		}
		d.quote(fmt.Sprintf("  journal: run %d, pid %d: %s (%s)", r.Run, r.PID, howEnded(r), dirty))
		return nil
	}
	return fmt.Errorf("%w: supervise status lists no run %d", errDemo, n)
}

// logTail returns supervise's log, for a failed demo.
func (d *demo) logTail() string {
	b, _ := os.ReadFile(d.logPath)
	if len(b) > 8000 {
		b = b[len(b)-8000:]
	}
	return string(b)
}

// wait pauses for reading, when stdout is a terminal and not --fast.
func (d *demo) wait(ctx context.Context) {
	if d.pause <= 0 {
		return
	}
	t := time.NewTimer(d.pause)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}

func (d *demo) title(s string) {
	fmt.Fprintf(d.out, "%s\n%s\n", s, strings.Repeat("=", len(s)))
}

func (d *demo) step(n int, s string) {
	fmt.Fprintf(d.out, "\n%d. %s\n", n, s)
}

func (d *demo) blank() { fmt.Fprintln(d.out) }

// say prints a paragraph of narration, wrapped.
func (d *demo) say(s string) { d.wrap(s, "   ") }

// item prints one thing the agent did.
func (d *demo) item(s string) { d.wrap(s, "   - ") }

// quote prints text as it is, indented.
func (d *demo) quote(s string) {
	for _, line := range strings.Split(s, "\n") {
		fmt.Fprintln(d.out, strings.TrimRight("     "+line, " "))
	}
}

// wrap prints s wrapped at width columns, the first line after
// prefix and the others indented as deep. Line breaks in s are kept.
func (d *demo) wrap(s, prefix string) {
	indent := strings.Repeat(" ", len(prefix))
	if strings.TrimSpace(prefix) == ">" {
		indent = prefix
	}
	for i, para := range strings.Split(s, "\n") {
		lead := prefix
		if i > 0 {
			lead = indent
		}
		line := lead
		for _, w := range strings.Fields(para) {
			if len(line) > len(lead) && len(line)+1+len(w) > width {
				fmt.Fprintln(d.out, line)
				line = indent
				lead = indent
			}
			if len(line) > len(lead) {
				line += " "
			}
			line += w
		}
		fmt.Fprintln(d.out, strings.TrimRight(line, " "))
	}
}
