package demo

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/resume"
)

// The demo agent's two sessions and their turns. A's turn is the one
// during which the agent is killed twice in a row (the narrator's kill -9,
// then again when A is resumed automatically).
const (
	demoTurnB1   = "b1"
	demoPromptB1 = "summarise yesterday's changelog"
	demoTurnB2   = "b2"
	demoPromptB2 = "run the unit tests"
	demoTurnA    = "a1"
	demoPromptA  = "add retries to the HTTP client and write client.go"
	demoToolA    = "write_file"
)

// demoEvent is one line of the demo agent's events file: what it did, so
// the narrator can wait on it and tell it. Kinds:
//
//	start      the agent started (Run, PID)
//	turn-done  Session completed Turn (Prompt)
//	in-tool    Session is in Turn, running Tool (journaled)
//	took       the agent took a resume of Session from the resume file
//	           (Attempt, Reason, Message; Dup when it had taken it before)
//	poison     the agent is continuing Session A in its tool, journaled, and
//	           waits there for the narrator's second kill -9
//	stopping   the agent got SIGTERM and exits 0
//	error      something failed (Err)
type demoEvent struct {
	Run     int    `json:"run"`
	PID     int    `json:"pid"`
	Kind    string `json:"kind"`
	Session string `json:"session,omitempty"`
	Turn    string `json:"turn,omitempty"`
	Prompt  string `json:"prompt,omitempty"`
	Tool    string `json:"tool,omitempty"`
	Attempt int    `json:"attempt,omitempty"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
	Dup     bool   `json:"dup,omitempty"`
	Err     string `json:"err,omitempty"`
}

// demoAgent is the state of one demo agent process.
type demoAgent struct {
	client *notify.Client
	events *os.File
	run    int
	taken  map[string]bool // session#attempt of the resumes already taken
}

// ErrNotUnderSupervise means the demo agent was started outside
// `supervise demo` (no notify socket).
var ErrNotUnderSupervise = errors.New("not running under supervise (run it with supervise demo)")

// RunAgent is the hidden `supervise demo-agent --events FILE`: the agent
// `supervise demo` runs under supervise. It plays its part of the story by
// SUPERVISE_RUN and the resume file, reports it over the notify socket and
// appends one JSON line per step to the file at eventsPath. SIGUSR1 makes
// it read the resume file again; SIGTERM makes it return nil (exit 0).
func RunAgent(ctx context.Context, eventsPath string) error {
	// Signals first: SIGUSR1's default action would kill the agent.
	sigc := make(chan os.Signal, 4)
	signal.Notify(sigc, syscall.SIGUSR1, syscall.SIGTERM, syscall.SIGINT)
	defer signal.Stop(sigc)

	events, err := os.OpenFile(eventsPath, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	defer events.Close()
	client, err := notify.FromEnv()
	if err != nil {
		return fmt.Errorf("%w: %v", ErrNotUnderSupervise, err)
	}
	client.Timeout = 2 * time.Second
	run, _ := strconv.Atoi(os.Getenv("SUPERVISE_RUN"))
	a := &demoAgent{client: client, events: events, run: run, taken: map[string]bool{}}
	a.record(demoEvent{Kind: "start"})
	if err := a.play(ctx); err != nil {
		a.record(demoEvent{Kind: "error", Err: err.Error()})
		return err
	}
	for {
		select {
		case sig := <-sigc:
			if sig == syscall.SIGUSR1 {
				if err := a.takeResumes(ctx); err != nil {
					a.record(demoEvent{Kind: "error", Err: err.Error()})
					return err
				}
				continue
			}
			client.Stopping(ctx)
			a.record(demoEvent{Kind: "stopping"})
			return nil
		case <-ctx.Done():
			return nil
		}
	}
}

// play runs this process's part of the story: in the first run, B
// completes a turn and A starts a long tool call; later, the resumes in
// the resume file, and when there are none, B's next turn.
func (a *demoAgent) play(ctx context.Context) error {
	if err := a.client.Ready(ctx); err != nil {
		return err
	}
	if a.run <= 1 {
		if err := a.turn(ctx, "B", demoTurnB1, demoPromptB1); err != nil {
			return err
		}
		a.client.Status(ctx, "A: "+demoToolA+" client.go (a long one)")
		if err := a.client.TurnBegin(ctx, "A", demoTurnA, demoPromptA); err != nil {
			return err
		}
		if err := a.client.Phase(ctx, "A", marker.PhaseModel, ""); err != nil {
			return err
		}
		if err := a.client.Phase(ctx, "A", marker.PhaseTool, demoToolA); err != nil {
			return err
		}
		if err := a.barrier(ctx); err != nil {
			return err
		}
		a.record(demoEvent{Kind: "in-tool", Session: "A", Turn: demoTurnA, Prompt: demoPromptA, Tool: demoToolA})
		return nil // the tool "runs" until a signal
	}
	n := len(a.taken)
	if err := a.takeResumes(ctx); err != nil {
		return err
	}
	if len(a.taken) > n {
		return nil
	}
	if err := a.turn(ctx, "B", demoTurnB2, demoPromptB2); err != nil {
		return err
	}
	a.client.Status(ctx, "idle, waiting for work")
	return nil
}

// turn runs one complete turn of session: model, a tool, completed.
func (a *demoAgent) turn(ctx context.Context, session, turn, prompt string) error {
	a.client.Status(ctx, session+": "+prompt)
	for _, err := range []error{
		a.client.TurnBegin(ctx, session, turn, prompt),
		a.client.Phase(ctx, session, marker.PhaseModel, ""),
		a.client.Phase(ctx, session, marker.PhaseTool, "read_file"),
		a.client.Phase(ctx, session, marker.PhaseModel, ""),
		a.client.TurnEnd(ctx, session, turn, marker.OutcomeCompleted),
	} {
		if err != nil {
			return err
		}
	}
	if err := a.barrier(ctx); err != nil {
		return err
	}
	a.record(demoEvent{Kind: "turn-done", Session: session, Turn: turn, Prompt: prompt})
	return nil
}

// takeResumes reads the resume file and takes every resume in it that it
// has not taken yet. An automatic continuation of A runs into the poison:
// the agent waits in its tool to be killed again. A manual resume ("a
// person fixed it") finishes.
func (a *demoAgent) takeResumes(ctx context.Context) error {
	items, err := resume.ReadFile(os.Getenv("SUPERVISE_RESUME_FILE"))
	if err != nil {
		return err
	}
	for _, it := range items {
		key := it.Session + "#" + strconv.Itoa(it.Attempt) + "#" + it.Reason
		ev := demoEvent{Kind: "took", Session: it.Session, Turn: it.Turn, Attempt: it.Attempt, Reason: it.Reason,
			Message: it.Message, Tool: it.Tool}
		if a.taken[key] {
			ev.Dup = true
			a.record(ev)
			continue
		}
		a.taken[key] = true
		if err := a.client.Resumed(ctx, it.Session, it.Turn); err != nil {
			return err
		}
		if err := a.barrier(ctx); err != nil {
			return err
		}
		a.record(ev)
		if err := a.finish(ctx, it); err != nil {
			return err
		}
	}
	return nil
}

// finish continues a resumed turn: it checks the state, reruns the tool
// and completes, except for an automatic continuation of A, which is
// where the demo's poison sits.
func (a *demoAgent) finish(ctx context.Context, it resume.Item) error {
	a.client.Status(ctx, it.Session+": continuing "+it.Turn)
	if err := a.client.Phase(ctx, it.Session, marker.PhaseTool, demoToolA); err != nil {
		return err
	}
	if it.Session == "A" && it.Reason != resume.ReasonManual {
		if err := a.barrier(ctx); err != nil {
			return err
		}
		a.record(demoEvent{Kind: "poison", Session: it.Session, Turn: it.Turn, Tool: demoToolA})
		// The narrator kills the agent here again, from outside, as it
		// did the first time: the reason supervise gives for a SIGKILL
		// (a signal from outside the agent) is then what happened.
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Minute):
			return errors.New("not killed within a minute of continuing A")
		}
	}
	if err := a.client.TurnEnd(ctx, it.Session, it.Turn, marker.OutcomeCompleted); err != nil {
		return err
	}
	if err := a.barrier(ctx); err != nil {
		return err
	}
	a.client.Status(ctx, "idle, waiting for work")
	a.record(demoEvent{Kind: "turn-done", Session: it.Session, Turn: it.Turn, Prompt: it.Prompt})
	return nil
}

// barrier waits until supervise journaled everything sent so far.
func (a *demoAgent) barrier(ctx context.Context) error {
	return a.client.Barrier(ctx, 10*time.Second)
}

// record appends ev to the events file in one write.
func (a *demoAgent) record(ev demoEvent) {
	ev.Run, ev.PID = a.run, os.Getpid()
	b, _ := json.Marshal(ev)
	a.events.Write(append(b, '\n'))
}
