package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/supervise-dev/supervise/notify"
)

const notifyUsage = `Usage: supervise notify EVENT [flags]

Send one message to the supervise that runs this agent (over $NOTIFY_SOCKET),
for agents whose hooks run shell commands. By default it waits until supervise
has journaled the message (a barrier), so a hook that exits at once is never
lost. Outside supervise ($NOTIFY_SOCKET unset) it does nothing and exits 0, so
hooks can stay configured.

Events:
  turn-begin   --session ID [--turn ID] [--prompt TEXT]   a turn started
  turn-end     --session ID [--turn ID] --outcome completed|failed|cancelled
  waiting      --session ID [--turn ID]    waiting for approval or human input
  phase        --session ID --phase model|tool|idle [--tool NAME]
  resumed      --session ID [--turn ID]    the agent took a resume
  closed       --session ID                the session is over
  heartbeat    [--session ID]              WATCHDOG=1 (liveness)
  ready | stopping | watchdog-trigger       READY=1, STOPPING=1, WATCHDOG=trigger
  status       --text LINE                 STATUS=LINE
  barrier                                  only wait for everything sent before

Exit codes: 0 sent (and journaled with --barrier), 1 not delivered or not
confirmed, 2 usage.

Flags:
`

func notifyCmd(ctx context.Context, args []string, stdin io.Reader, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise notify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id")
	turn := fs.String("turn", "", "turn id")
	outcome := fs.String("outcome", "", "turn-end outcome: completed, failed or cancelled (a user stop)")
	phase := fs.String("phase", "", "phase: model, tool or idle")
	tool := fs.String("tool", "", "tool name, with --phase tool")
	prompt := fs.String("prompt", "", "excerpt of the turn's request, for the continuation message")
	text := fs.String("text", "", "STATUS= line, for the status event")
	barrier := fs.Bool("barrier", true, "wait until supervise has journaled the message")
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the send and the barrier")
	hookJSON := fs.Bool("hook-json", false, "read a hook payload (JSON) on stdin and take session_id and prompt from it")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), notifyUsage)
		fs.PrintDefaults()
	}
	event := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		event, args = args[0], args[1:]
	}
	if _, err := parseFlags(fs, args, stderr); err != nil {
		return usageExit(err)
	}
	if event == "" && fs.NArg() > 0 {
		event = fs.Arg(0)
	} else if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "supervise notify: unexpected argument %q\n", fs.Arg(0))
		return exitUsage
	}
	if *hookJSON {
		var payload struct {
			SessionID string `json:"session_id"`
			Prompt    string `json:"prompt"`
		}
		if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&payload); err != nil {
			fmt.Fprintf(stderr, "supervise notify: --hook-json: %v\n", err)
			return exitUsage
		}
		if *session == "" {
			*session = payload.SessionID
		}
		if *prompt == "" {
			*prompt = payload.Prompt
		}
	}
	needSession := map[string]bool{"turn-begin": true, "turn-end": true, "waiting": true, "phase": true, "resumed": true, "closed": true}
	if needSession[event] && *session == "" {
		fmt.Fprintf(stderr, "supervise notify %s: --session is required\n", event)
		return exitUsage
	}
	c, err := notify.FromEnv()
	if errors.Is(err, notify.ErrNoSocket) {
		fmt.Fprintln(stderr, "supervise notify: NOTIFY_SOCKET is not set (not running under supervise): nothing sent")
		return exitOK
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise notify: %v\n", err)
		return exitInternal
	}
	c.Timeout = *timeout
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	switch event {
	case "turn-begin":
		err = c.TurnBegin(ctx, *session, *turn, *prompt)
	case "turn-end":
		o := notify.Outcome(*outcome)
		if o != notify.OutcomeCompleted && o != notify.OutcomeFailed && o != notify.OutcomeCancelled {
			fmt.Fprintln(stderr, "supervise notify turn-end: --outcome must be completed, failed or cancelled")
			return exitUsage
		}
		err = c.TurnEnd(ctx, *session, *turn, o)
	case "waiting":
		err = c.Waiting(ctx, *session, *turn)
	case "phase":
		p := notify.Phase(*phase)
		if p != notify.PhaseModel && p != notify.PhaseTool && p != notify.PhaseIdle {
			fmt.Fprintln(stderr, "supervise notify phase: --phase must be model, tool or idle")
			return exitUsage
		}
		err = c.Phase(ctx, *session, p, *tool)
	case "resumed":
		err = c.Resumed(ctx, *session, *turn)
	case "closed":
		err = c.Closed(ctx, *session)
	case "heartbeat":
		if *session != "" {
			err = c.Heartbeat(ctx, *session)
		} else {
			err = c.Watchdog(ctx)
		}
	case "ready":
		err = c.Ready(ctx)
	case "stopping":
		err = c.Stopping(ctx)
	case "watchdog-trigger":
		err = c.Notify(ctx, "WATCHDOG=trigger")
	case "status":
		err = c.Status(ctx, *text)
	case "barrier":
		*barrier = true
	case "":
		fmt.Fprint(stderr, "supervise notify: no EVENT given\n\n")
		fs.Usage()
		return exitUsage
	default:
		fmt.Fprintf(stderr, "supervise notify: unknown event %q (see supervise notify --help)\n", event)
		return exitUsage
	}
	if err == nil && *barrier {
		err = c.Barrier(ctx, *timeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise notify %s: %v\n", event, err)
		return exitInternal
	}
	return exitOK
}
