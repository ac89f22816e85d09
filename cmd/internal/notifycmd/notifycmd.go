// Package notifycmd is `supervise notify`: the command line of the notify
// client for agents whose hooks run shell commands, and the protocol route
// for a language without unix datagram sockets (Node.js). It checks an event's
// flags, maps hook payloads through cmd/internal/hook, sends the marker over
// $NOTIFY_SOCKET and waits for supervise's barrier. Run returns the exit
// status: 0 sent (or nothing to do outside supervise), 1 not delivered, 2
// usage; the hook event never returns 2, which agents read as "block".
package notifycmd

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/supervise-dev/supervise/cmd/internal/hook"
	"github.com/supervise-dev/supervise/internal/cliflags"
	"github.com/supervise-dev/supervise/internal/exitcode"
	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
)

// usage is the help of `supervise notify`, followed by its flags.
const usage = `Usage: supervise notify EVENT [flags]

Send one message to the supervise that runs this agent (over $NOTIFY_SOCKET),
for agents whose hooks run shell commands, and for agents in a language
without unix datagram sockets (Node.js: run it per marker with
child_process.spawnSync; examples/node/agent.js). By default it waits until
supervise has journaled the message (a barrier), so a hook that exits at once
is never lost, and its exit status is the barrier's answer (below); --timeout
bounds the wait. Outside supervise ($NOTIFY_SOCKET unset) it does nothing and
exits 0, so hooks can stay configured.

Events:
  turn-begin   --session ID [--turn ID] [--prompt TEXT]   a turn started
  turn-end     --session ID [--turn ID] --outcome completed|failed|cancelled
  waiting      --session ID [--turn ID] [--wait input|approval|reconnect]
                                           waiting for a person (input, the
                                           default, or approval: parked after a
                                           death), or retrying the model API
                                           (reconnect: resumed like a turn)
  phase        --session ID --phase model|tool|idle [--tool NAME]
  resumed      --session ID [--turn ID]    the agent took a resume
  effect       --session ID --key KEY      a side effect of the turn completed
                                           (KEY names it: write:src/a.go, or a
                                           tool and a hash of its arguments);
                                           a resume lists it as already done
  closed       --session ID                the session is over
  heartbeat    [--session ID]              WATCHDOG=1 (liveness)
  ready | stopping | watchdog-trigger       READY=1, STOPPING=1, WATCHDOG=trigger
  status       --text LINE                 STATUS=LINE
  barrier                                  only wait for everything sent before
  hook [JSON]                              map an agent hook payload (JSON on
                                           stdin, or as the argument) to the
                                           marker above that it means

The hook event reads the payloads of Claude Code and Codex hooks (session_id,
hook_event_name, prompt, tool_name, notification_type, reason, turn_id),
Gemini CLI hooks, hermes shell hooks (extra.user_message, extra.turn_id, ...)
and Codex's notify program argument (agent-turn-complete):

  UserPromptSubmit, BeforeAgent, pre_llm_call        turn-begin (with the prompt),
                                                     or resumed when the prompt is
                                                     the continuation supervise
                                                     handed over for that session
  PreToolUse, BeforeTool, pre_tool_call              phase tool (tool_name)
  PostToolUse, AfterTool                             phase model; for a tool that
                                                     changes things (Write, Edit,
                                                     MultiEdit, NotebookEdit, Bash;
                                                     write_file, replace,
                                                     run_shell_command) an effect
                                                     first, keyed TOOL:WHAT#HASH
                                                     (the hash of its arguments)
  PostToolUseFailure, post_tool_call                 phase model
  PermissionRequest, Notification of
    permission_prompt or ToolPermission              waiting --wait approval
  Elicitation, Notification elicitation_dialog       waiting --wait input
  Notification idle_prompt                           turn-end cancelled (the turn
                                                     is over and the agent waits at
                                                     its prompt: a turn stopped by
                                                     the user ends here)
  Stop, AfterAgent, post_llm_call,
    agent-turn-complete                              turn-end completed
  StopFailure                                        turn-end failed
  on_session_end                                     turn-end failed, cancelled
                                                     (interrupted_by_user) or
                                                     completed; other interruptions
                                                     leave the turn open
  SessionEnd with reason clear, logout or
    prompt_input_exit                                closed (other reasons, such as
                                                     a SIGTERM, leave an open turn
                                                     for supervise to decide)
  SessionStart, on_session_start                     heartbeat (the session is known)
  anything else                                      nothing (exit 0, no message)

--session, --turn, --prompt and --tool override the payload's values. The hook
event never exits 2 (agents read 2 as "block this prompt or tool call"): a
payload it cannot read or a marker it cannot deliver exits 1, and outside
supervise it exits 0 without reading stdin.

Exit codes: 0 sent (and journaled with --barrier), 1 not delivered or not
confirmed (the barrier answered 0: supervise refused a message this process
sent, and its log says why; or supervise went away), 2 usage.

Flags:
`

// Run runs `supervise notify` with args (after the word notify) and returns
// its exit status.
func Run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("supervise notify", flag.ContinueOnError)
	fs.SetOutput(stderr)
	session := fs.String("session", "", "session id")
	turn := fs.String("turn", "", "turn id")
	outcome := fs.String("outcome", "", "turn-end outcome: completed, failed or cancelled (a user stop)")
	phase := fs.String("phase", "", "phase: model, tool or idle")
	tool := fs.String("tool", "", "tool name, with --phase tool")
	detail := fs.String("detail", "", "what the tool runs (a command line, a file path), with --phase tool: one line, at most 512 bytes (longer is cut, ending with …); the continuation names it")
	prompt := fs.String("prompt", "", "excerpt of the turn's request, for the continuation message")
	key := fs.String("key", "", "effect: the key of the side effect that completed (one line; a key over 256 bytes is shortened with a hash)")
	text := fs.String("text", "", "STATUS= line, for the status event")
	wait := fs.String("wait", "input", "waiting: what the session waits for: input or approval (a person: parked after a death), or reconnect (retrying the model API mid-turn: resumed like in_turn)")
	barrier := fs.Bool("barrier", true, "wait until supervise has journaled the message and report failure; false: only wait (at most 1s) until supervise has read it, as it hears live senders only")
	timeout := new(time.Duration)
	cliflags.DurationVar(fs, timeout, "timeout", 5*time.Second, "how long to wait for the send and the barrier")
	hookJSON := fs.Bool("hook-json", false, "read a hook payload (JSON) on stdin and take session_id and prompt from it")
	printOnly := fs.Bool("print", false, "hook: print the marker the payload maps to on stderr instead of sending it")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), usage)
		fs.PrintDefaults()
	}
	event := ""
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		event, args = args[0], args[1:]
	}
	if _, err := cliflags.Parse(fs, args, stdout, stderr); err != nil {
		if event == "hook" && !errors.Is(err, flag.ErrHelp) {
			return exitcode.Internal // never 2 from a hook: agents read it as "block"
		}
		return cliflags.ExitCode(err)
	}
	rest := fs.Args()
	if event == "" && len(rest) > 0 {
		event, rest = rest[0], rest[1:]
	}
	if event == "hook" {
		h := hook.Marker{Session: *session, Turn: *turn, Prompt: *prompt, Tool: *tool, Detail: *detail}
		return hookCmd(ctx, h, rest, *printOnly, *barrier, *timeout, stdin, stderr)
	}
	if len(rest) > 0 {
		fmt.Fprintf(stderr, "supervise notify: unexpected argument %q\n", rest[0])
		return exitcode.Usage
	}
	if *hookJSON {
		var payload struct {
			SessionID string `json:"session_id"`
			Prompt    string `json:"prompt"`
		}
		if err := json.NewDecoder(io.LimitReader(stdin, 16<<20)).Decode(&payload); err != nil {
			fmt.Fprintf(stderr, "supervise notify: --hook-json: %v\n", err)
			return exitcode.Usage
		}
		if *session == "" {
			*session = payload.SessionID
		}
		if *prompt == "" {
			*prompt = payload.Prompt
		}
	}
	needSession := map[string]bool{"turn-begin": true, "turn-end": true, "waiting": true, "phase": true, "resumed": true, "closed": true, "effect": true}
	if needSession[event] && *session == "" {
		fmt.Fprintf(stderr, "supervise notify %s: --session is required\n", event)
		return exitcode.Usage
	}
	c, err := notify.FromEnv()
	if errors.Is(err, notify.ErrNoSocket) {
		fmt.Fprintln(stderr, "supervise notify: NOTIFY_SOCKET is not set (not running under supervise): nothing sent")
		return exitcode.OK
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise notify: %v\n", err)
		return exitcode.Internal
	}
	c.Timeout = *timeout
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	m := hook.Marker{Event: marker.Event(event), Session: *session, Turn: *turn, Prompt: *prompt,
		Phase: marker.Phase(*phase), Tool: *tool, Detail: *detail, Outcome: marker.Outcome(*outcome), Wait: marker.Wait(*wait)}
	if event == "effect" {
		m.Effect = notify.EffectKey(*key)
	}
	if msg := check(event, &m); msg != "" {
		fmt.Fprint(stderr, msg)
		if event == "" {
			fs.Usage()
		}
		return exitcode.Usage
	}
	err = send(ctx, c, event, m, *text)
	if event == "barrier" {
		*barrier = true
	}
	if err == nil && *barrier {
		err = c.Barrier(ctx, *timeout)
	} else if err == nil {
		settle(ctx, c, *timeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise notify %s: %v\n", event, err)
		return exitcode.Internal
	}
	return exitcode.OK
}

// check returns the usage error of event with the marker its flags make
// (completed where a flag implies a value), or "" when it can be sent.
func check(event string, m *hook.Marker) string {
	switch event {
	case "turn-end":
		if !m.Outcome.Valid() {
			return "supervise notify turn-end: --outcome must be completed, failed or cancelled\n"
		}
	case "phase":
		if m.Phase == "" && (m.Tool != "" || m.Detail != "") {
			m.Phase = marker.PhaseTool // --tool NAME alone means the tool phase
		}
		switch {
		case !m.Phase.Valid():
			return "supervise notify phase: --phase must be model, tool or idle\n"
		case m.Detail != "" && m.Phase != marker.PhaseTool:
			return "supervise notify phase: --detail goes with --phase tool\n"
		}
	case "waiting":
		if w := m.Wait; w != marker.WaitInput && w != marker.WaitApproval && w != marker.WaitReconnect {
			return "supervise notify waiting: --wait must be input, approval or reconnect\n"
		}
	case "effect":
		if m.Effect == "" {
			return "supervise notify effect: --key is required (it names the side effect that completed)\n"
		}
	case "turn-begin", "resumed", "closed", "heartbeat", "ready", "stopping", "watchdog-trigger", "status", "barrier":
	case "":
		return "supervise notify: no EVENT given\n\n"
	default:
		return fmt.Sprintf("supervise notify: unknown event %q (see supervise notify --help)\n", event)
	}
	return ""
}

// send sends a checked event over c; the barrier, if any, follows.
func send(ctx context.Context, c *notify.Client, event string, m hook.Marker, text string) error {
	switch event {
	case "heartbeat":
		if m.Session == "" {
			return c.Watchdog(ctx)
		}
	case "ready":
		return c.Ready(ctx)
	case "stopping":
		return c.Stopping(ctx)
	case "watchdog-trigger":
		return c.Notify(ctx, "WATCHDOG=trigger")
	case "status":
		return c.Status(ctx, text)
	case "barrier":
		return nil
	}
	// Session markers are the ones a hook payload maps to: one sender.
	return m.Send(ctx, c)
}

// hookCmd runs `supervise notify hook`: it maps the payload (args[0], as
// Codex's notify program gets it, else stdin) to a marker and sends it.
// Values set in over (from flags) win over the payload's. It never returns
// exitcode.Usage: Claude Code, Codex, Gemini CLI and hermes read exit status 2
// from a hook as "block".
func hookCmd(ctx context.Context, over hook.Marker, args []string, printOnly, barrier bool, timeout time.Duration, stdin io.Reader, stderr io.Writer) int {
	if len(args) > 1 {
		fmt.Fprintf(stderr, "supervise notify hook: unexpected argument %q\n", args[1])
		return exitcode.Internal
	}
	var raw []byte
	if len(args) == 1 {
		raw = []byte(args[0])
	} else {
		if os.Getenv("NOTIFY_SOCKET") == "" && !printOnly {
			return exitcode.OK // not under supervise: stay quiet, the hook stays configured
		}
		b, err := io.ReadAll(io.LimitReader(stdin, hook.MaxPayload+1))
		if err != nil {
			fmt.Fprintf(stderr, "supervise notify hook: reading the payload: %v\n", err)
			return exitcode.Internal
		}
		if len(b) > hook.MaxPayload {
			fmt.Fprintf(stderr, "supervise notify hook: the payload is larger than %d bytes\n", hook.MaxPayload)
			return exitcode.Internal
		}
		raw = b
	}
	m, name, err := hook.Map(raw)
	if err != nil {
		fmt.Fprintf(stderr, "supervise notify hook: %v\n", err)
		return exitcode.Internal
	}
	if m.Event == "" {
		return exitcode.OK // an event supervise does not track
	}
	m = m.Resolve(over, os.Getenv("SUPERVISE_RESUME_FILE"))
	if m.Session == "" {
		fmt.Fprintf(stderr, "supervise notify hook: the %s payload has no session id: nothing sent\n", name)
		return exitcode.Internal
	}
	if printOnly {
		fmt.Fprintln(stderr, m.CommandLine())
		return exitcode.OK
	}
	c, err := notify.FromEnv()
	if errors.Is(err, notify.ErrNoSocket) {
		return exitcode.OK
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise notify hook: %v\n", err)
		return exitcode.Internal
	}
	c.Timeout = timeout
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	err = m.Send(ctx, c)
	if err == nil && barrier {
		err = c.Barrier(ctx, timeout)
	} else if err == nil {
		settle(ctx, c, timeout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "supervise notify hook (%s): %v\n", name, err)
		return exitcode.Internal
	}
	return exitcode.OK
}

// settle is --barrier=false: no confirmation is awaited or reported, but the
// process still waits, for at most a second, until supervise has read what
// it sent. supervise hears only live processes of the agent's tree (it
// checks the sender's pid and start time when it reads the datagram), so a
// message whose sender has already exited is dropped as a foreign sender's.
func settle(ctx context.Context, c *notify.Client, timeout time.Duration) {
	_ = c.Barrier(ctx, min(timeout, time.Second))
}
