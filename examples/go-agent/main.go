// Command go-agent is a small agent that tells supervise what it is doing
// with notify.Client, to copy from: it reads its resume file, marks its turns
// and phases, and calls Barrier before a side-effecting tool call.
//
//	supervise run -- go-agent -session s1 -out deploy.log 'deploy v2'
//
// A fresh start runs one turn for the prompt: it "thinks" (phase model),
// then calls a side-effecting tool, append_file, that appends a line to
// -out. Started with SUPERVISE_RESUME_FILE (supervise relaunched it after it
// died mid-turn), it takes each owed session instead: it reports resumed,
// reads what the interrupted turn was doing, checks whether the side effect
// already happened, does it only if not, and ends the turn.
//
// With -turns N (0: until stopped) it runs turns on its own, after taking
// any resumes: t1, t2, ..., numbered by a counter file next to -out, so a
// relaunched agent never reuses a turn id. That is the mode to prove it
// survives crashes with:
//
//	supervise chaos --at tool -- go-agent -turns 0 -tool-time 50ms -out /tmp/go-agent.out
//
// Outside supervise (no NOTIFY_SOCKET) it runs the same way and reports
// nothing.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/resume"
)

// tool is the name the side-effecting tool is reported under: it is what
// the continuation message names after a death inside it.
const tool = "append_file"

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	os.Exit(run(ctx, os.Args[1:]))
}

// agent holds what every turn needs.
type agent struct {
	c        notify.Client // the zero Client uses NOTIFY_SOCKET
	log      *slog.Logger
	out      string        // the file the tool appends to
	toolTime time.Duration // how long the tool takes on a fresh turn
}

func run(ctx context.Context, args []string) int {
	fs := flag.NewFlagSet("go-agent", flag.ContinueOnError)
	session := fs.String("session", "demo", "session id (a real agent keeps its own, and reports the same one in every marker)")
	turn := fs.String("turn", "t1", "turn id")
	out := fs.String("out", "go-agent.out", "file the side-effecting tool appends to")
	toolTime := fs.Duration("tool-time", 0, "how long the tool runs on a fresh turn before its side effect (a window to kill the agent in)")
	turns := fs.Int("turns", 1, "run this many turns on their own, numbered t1, t2, ... (0: until stopped); 1 runs the one turn -turn names")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	a := &agent{log: slog.New(slog.NewTextHandler(os.Stderr, nil)), out: *out, toolTime: *toolTime}

	items, err := resume.ReadFile(os.Getenv("SUPERVISE_RESUME_FILE"))
	if err != nil {
		a.log.Error("reading the resume file failed", "err", err)
		return 1
	}
	for _, it := range items {
		if err := a.resume(ctx, it); err != nil {
			a.log.Error("resumed turn failed", "session", it.Session, "err", err)
			return 1
		}
	}
	prompt := strings.Join(fs.Args(), " ")
	if prompt == "" {
		prompt = "append a line"
	}
	if *turns != 1 {
		for done := 0; *turns == 0 || done < *turns; done++ {
			n, err := nextTurn(a.out + ".next")
			if err != nil {
				a.log.Error("turn counter", "err", err)
				return 1
			}
			if err := a.turn(ctx, *session, fmt.Sprintf("t%d", n), prompt); err != nil {
				if ctx.Err() != nil {
					return 0 // stopped
				}
				a.log.Error("turn failed", "session", *session, "err", err)
				return 1
			}
		}
		return 0
	}
	if len(items) > 0 {
		return 0
	}
	if err := a.turn(ctx, *session, *turn, prompt); err != nil {
		a.log.Error("turn failed", "session", *session, "err", err)
		return 1
	}
	return 0
}

// nextTurn returns the next turn number from the counter file and stores
// the one after it (synced, replaced by rename) before the turn begins.
func nextTurn(path string) (int, error) {
	n := 1
	if b, err := os.ReadFile(path); err == nil {
		fmt.Sscanf(string(b), "%d", &n)
	} else if !errors.Is(err, os.ErrNotExist) {
		return 0, err
	}
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return 0, err
	}
	_, err = fmt.Fprintf(f, "%d\n", n+1)
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	return n, err
}

// sent treats "not under supervise" as success: the agent works the same
// without a supervisor.
func sent(err error) error {
	if errors.Is(err, notify.ErrNoSocket) {
		return nil
	}
	return err
}

// turn runs a fresh turn: the model "thinks", then calls the tool.
func (a *agent) turn(ctx context.Context, session, turn, prompt string) error {
	// turn-begin carries the request excerpt: after a death it is all
	// supervise can quote back in the continuation message.
	if err := sent(a.c.TurnBegin(ctx, session, turn, prompt)); err != nil {
		return err
	}
	if err := sent(a.c.Phase(ctx, session, marker.PhaseModel, "")); err != nil {
		return err
	}
	a.log.Info("model: calling a tool", "session", session, "tool", tool)
	if err := a.runTool(ctx, session, turn, prompt, a.toolTime); err != nil {
		a.c.TurnEnd(ctx, session, turn, marker.OutcomeFailed)
		return err
	}
	return a.endTurn(ctx, session, turn)
}

// resume takes one owed session: the interrupted turn goes on.
func (a *agent) resume(ctx context.Context, it resume.Item) error {
	// resumed tells supervise the resume was taken; without it the
	// session stays resume_pending and would be handed over again.
	if err := sent(a.c.Resumed(ctx, it.Session, it.Turn)); err != nil {
		return err
	}
	a.log.Info("resuming an interrupted turn", "session", it.Session, "turn", it.Turn, "attempt", it.Attempt,
		"phase", it.Phase, "tool", it.Tool, "reason", it.Reason, "message", it.Message)
	// The message says the tool's outcome is unknown, and it is: the
	// agent may have died before the append, during it, or after it but
	// before turn-end. So look at the world before redoing anything.
	done, err := a.effectDone(it.Session, it.Turn)
	if err != nil {
		return err
	}
	if done {
		a.log.Info("the side effect already happened: not repeating it", "session", it.Session, "turn", it.Turn)
	} else if err := a.runTool(ctx, it.Session, it.Turn, it.Prompt, 0); err != nil {
		a.c.TurnEnd(ctx, it.Session, it.Turn, marker.OutcomeFailed)
		return err
	}
	return a.endTurn(ctx, it.Session, it.Turn)
}

// runTool runs the side-effecting tool call.
func (a *agent) runTool(ctx context.Context, session, turn, prompt string, takes time.Duration) error {
	if err := sent(a.c.Phase(ctx, session, marker.PhaseTool, tool)); err != nil {
		return err
	}
	// The barrier returns once supervise has journaled every marker sent
	// before it, here the tool phase. Only then is the side effect safe to
	// start: if the agent dies from now on, the journal says it died
	// inside append_file, and the resume tells the model that this tool's
	// effect is unknown and to check before redoing it. Without the
	// barrier the phase datagram could still be in flight when the agent
	// is killed (or supervise dies), and the resume would claim the model
	// was only thinking: the model would run the tool again, blindly.
	//
	// An error means supervise did not confirm (it died, or the barrier
	// timed out): nothing is known journaled, so do not start a side
	// effect a later resume could not account for.
	switch err := a.c.Barrier(ctx, 0); {
	case errors.Is(err, notify.ErrNoSocket):
		a.log.Info("not under supervise: running the tool", "session", session, "tool", tool)
	case err != nil:
		return fmt.Errorf("supervise did not confirm the tool phase, not running %s: %w", tool, err)
	default:
		a.log.Info("tool phase journaled: running the tool", "session", session, "tool", tool)
	}
	select {
	case <-time.After(takes): // the tool is slow (or the demo waits to be killed)
	case <-ctx.Done():
		return ctx.Err()
	}
	if err := a.effect(session, turn, prompt); err != nil {
		return err
	}
	a.log.Info("tool done", "session", session, "tool", tool, "out", a.out)
	// Declare the effect done: a resume lists it, and supervise chaos checks
	// it is never done twice in one turn.
	if err := sent(a.c.Effect(ctx, session, effectKey(session, turn))); err != nil {
		return err
	}
	if err := sent(a.c.Phase(ctx, session, marker.PhaseModel, "")); err != nil {
		return err
	}
	// Wait until the tool's end is journaled too: a death from here on is
	// known to have come after the effect, so the resume says the tool
	// finished, and supervise chaos --at tool-end kills exactly here.
	return sent(a.c.Barrier(ctx, 0))
}

// endTurn reports the turn completed and waits until that is journaled:
// exiting 0 with a turn supervise still believes open counts as a death
// mid-turn.
func (a *agent) endTurn(ctx context.Context, session, turn string) error {
	if err := sent(a.c.TurnEnd(ctx, session, turn, marker.OutcomeCompleted)); err != nil {
		return err
	}
	return sent(a.c.Barrier(ctx, 0))
}

// effectKey names one turn's side effect, so a resumed turn can find it.
func effectKey(session, turn string) string { return session + "/" + turn + ":" }

// effect is the side effect: one line appended to the out file, synced.
func (a *agent) effect(session, turn, prompt string) error {
	f, err := os.OpenFile(a.out, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	_, err = fmt.Fprintf(f, "%s %s\n", effectKey(session, turn), strings.Join(strings.Fields(prompt), " "))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// effectDone reports whether the turn's side effect is already in the out
// file: the "check the current state" the continuation asks for.
func (a *agent) effectDone(session, turn string) (bool, error) {
	f, err := os.Open(a.out)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), effectKey(session, turn)) {
			return true, nil
		}
	}
	return false, sc.Err()
}
