// Package hook maps the hook payloads of agent CLIs (Claude Code, Codex,
// Gemini CLI, hermes) to the notify markers they stand for. It is what
// `supervise notify hook` runs; the table is in that command's --help and
// in docs/adapters.md.
//
// Map is pure: it reads only the payload. Resolve applies what the command
// line and the environment add (flag overrides, the resume file), and Send
// delivers the result.
package hook

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/supervise-dev/supervise/marker"
	"strings"

	"github.com/supervise-dev/supervise/notify"
	"github.com/supervise-dev/supervise/resume"
)

// MaxPayload bounds what the hook event reads: hermes sends the whole
// conversation with every pre_llm_call.
const MaxPayload = 64 << 20

// Marker is the marker an agent hook payload stands for. An empty Event
// means the payload stands for nothing supervise tracks.
type Marker struct {
	Event   marker.Event
	Session string
	Turn    string
	Prompt  string
	Phase   marker.Phase
	Tool    string
	// Detail is what the tool runs (a command, a path), with PhaseTool.
	Detail  string
	Outcome marker.Outcome
	// Wait is what a waiting marker waits for: approval (a permission
	// prompt) or input (a question). No CLI's hooks report the model API
	// retries that reconnect stands for.
	Wait marker.Wait
	// Effect is the key of a side effect the payload says completed (a
	// tool that changes things finished): sent as an effect marker, before
	// the marker of Event when there is one.
	Effect string
}

// Send sends m with c: its effect first, if any, then its event.
func (m Marker) Send(ctx context.Context, c *notify.Client) error {
	if m.Effect != "" {
		if err := c.Effect(ctx, m.Session, m.Effect); err != nil {
			return err
		}
	}
	switch m.Event {
	case marker.EventTurnBegin:
		return c.TurnBegin(ctx, m.Session, m.Turn, m.Prompt)
	case marker.EventTurnEnd:
		return c.TurnEnd(ctx, m.Session, m.Turn, m.Outcome)
	case marker.EventWaiting:
		return c.WaitingFor(ctx, m.Session, m.Turn, m.Wait)
	case marker.EventPhase:
		if m.Phase == marker.PhaseTool {
			return c.ToolPhase(ctx, m.Session, m.Tool, m.Detail)
		}
		return c.Phase(ctx, m.Session, m.Phase, m.Tool)
	case marker.EventResumed:
		return c.Resumed(ctx, m.Session, m.Turn)
	case marker.EventClosed:
		return c.Closed(ctx, m.Session)
	case marker.EventHeartbeat:
		return c.Heartbeat(ctx, m.Session)
	case marker.EventEffect:
		if m.Effect == "" {
			return fmt.Errorf("an effect marker needs a key")
		}
		return nil // sent above
	}
	return fmt.Errorf("no marker for event %q", m.Event)
}

// CommandLine is the `supervise notify` command m stands for (what
// `supervise notify hook --print` prints): two lines for a marker with an
// effect and another event.
func (m Marker) CommandLine() string {
	var b strings.Builder
	if m.Effect != "" {
		fmt.Fprintf(&b, "%s --session %q --key %q", marker.EventEffect, m.Session, m.Effect)
		if m.Event == marker.EventEffect {
			return b.String()
		}
		b.WriteString("\n")
	}
	b.WriteString(string(m.Event))
	for _, f := range []struct{ flag, v string }{
		{"session", m.Session}, {"turn", m.Turn}, {"outcome", string(m.Outcome)},
		{"phase", string(m.Phase)}, {"tool", m.Tool}, {"detail", m.Detail}, {"prompt", m.Prompt}, {"wait", string(m.Wait)},
	} {
		if f.v != "" {
			fmt.Fprintf(&b, " --%s %q", f.flag, f.v)
		}
	}
	return b.String()
}

// Resolve completes a mapped marker: values set in over (from flags) win
// over the payload's; a turn-begin whose prompt is the continuation that
// the resume file at resumeFile holds for that session becomes resumed
// (the agent was relaunched with it by --resume-exec); markers that carry
// no turn lose it.
func (m Marker) Resolve(over Marker, resumeFile string) Marker {
	for _, o := range []struct {
		dst *string
		v   string
	}{
		{&m.Session, over.Session}, {&m.Turn, over.Turn}, {&m.Prompt, over.Prompt}, {&m.Tool, over.Tool},
		{&m.Detail, over.Detail},
	} {
		if o.v != "" {
			*o.dst = o.v
		}
	}
	if m.Event == marker.EventTurnBegin {
		if item, ok := PendingResume(resumeFile, m.Session, m.Prompt); ok {
			// The agent took the resume: the interrupted turn goes on (its
			// prompt excerpt and start time stay).
			// A turn id of the CLI's own stays: the loop maps it onto the
			// interrupted turn (Codex numbers the continuation afresh).
			m.Event, m.Prompt = marker.EventResumed, ""
			if m.Turn == "" {
				m.Turn = item.Turn
			}
		}
	}
	if m.Event == marker.EventPhase || m.Event == marker.EventHeartbeat || m.Event == marker.EventClosed {
		m.Turn = "" // these markers carry no turn
	}
	return m
}

// fields is a hook payload: a JSON object read leniently, so that a field
// of an unexpected type reads as absent instead of failing the hook.
type fields map[string]json.RawMessage

func (f fields) str(key string) string {
	var s string
	if json.Unmarshal(f[key], &s) != nil {
		return ""
	}
	return s
}

func (f fields) flag(key string) bool {
	var b bool
	return json.Unmarshal(f[key], &b) == nil && b
}

func (f fields) object(key string) fields {
	var o fields
	if json.Unmarshal(f[key], &o) != nil {
		return nil
	}
	return o
}

// Map maps one hook payload to its marker and names the payload's event
// for messages ("hook" when it names none).
func Map(raw []byte) (Marker, string, error) {
	var p fields
	if err := json.Unmarshal(raw, &p); err != nil || p == nil {
		if err == nil {
			err = errors.New("not a JSON object")
		}
		return Marker{}, "", fmt.Errorf("the payload is not a JSON object: %v", err)
	}
	name := p.str("hook_event_name")
	extra := p.object("extra") // hermes shell hooks: the event's own fields
	m := Marker{Session: p.str("session_id"), Turn: p.str("turn_id")}
	if m.Turn == "" {
		m.Turn = extra.str("turn_id")
	}
	if name == "" && p.str("type") != "" {
		// Codex's notify program: {"type":"agent-turn-complete",
		// "thread-id":...,"turn-id":...} as its last argument.
		name = p.str("type")
		m.Session, m.Turn = p.str("thread-id"), p.str("turn-id")
	}
	turnEnd := func(o marker.Outcome) { m.Event, m.Outcome = marker.EventTurnEnd, o }
	switch name {
	case "UserPromptSubmit", "BeforeAgent":
		m.Event, m.Prompt = marker.EventTurnBegin, p.str("prompt")
	case "pre_llm_call":
		m.Event, m.Prompt = marker.EventTurnBegin, extra.str("user_message")
	case "PreToolUse", "BeforeTool", "pre_tool_call":
		m.Event, m.Phase, m.Tool = marker.EventPhase, marker.PhaseTool, p.str("tool_name")
		m.Detail = notify.OneLine(toolDetail(p.object("tool_input")), notify.MaxDetailLen)
	case "PostToolUse", "AfterTool":
		m.Event, m.Phase = marker.EventPhase, marker.PhaseModel
		m.Effect = effectKey(p.str("tool_name"), p.object("tool_input"))
	case "PostToolUseFailure", "post_tool_call":
		m.Event, m.Phase = marker.EventPhase, marker.PhaseModel
	case "PermissionRequest":
		m.Event, m.Wait = marker.EventWaiting, marker.WaitApproval
	case "Elicitation":
		m.Event, m.Wait = marker.EventWaiting, marker.WaitInput
	case "Notification":
		kind := p.str("notification_type")
		if kind == "" { // older Claude Code: only the message tells
			switch msg := strings.ToLower(p.str("message")); {
			case strings.Contains(msg, "permission"):
				kind = "permission_prompt"
			case strings.Contains(msg, "waiting for your input"):
				kind = "idle_prompt"
			}
		}
		switch kind {
		case "permission_prompt", "ToolPermission":
			m.Event, m.Wait = marker.EventWaiting, marker.WaitApproval
		case "elicitation_dialog":
			m.Event, m.Wait = marker.EventWaiting, marker.WaitInput
		case "idle_prompt":
			turnEnd(marker.OutcomeCancelled)
		}
	case "Stop", "AfterAgent", "post_llm_call", "agent-turn-complete":
		turnEnd(marker.OutcomeCompleted)
	case "StopFailure":
		if p.str("error") == "rate_limit" {
			// Claude Code's turn ended on a usage or rate limit (its words,
			// with the reset when it names one, are in
			// last_assistant_message and on its stdout): not a failed turn
			// but a wait for the API; supervise waits the limit out.
			m.Event, m.Wait = marker.EventWaiting, marker.WaitReconnect
			break
		}
		turnEnd(marker.OutcomeFailed)
	case "on_session_end":
		switch {
		case extra.flag("failed"):
			turnEnd(marker.OutcomeFailed)
		case extra.flag("interrupted"):
			if strings.HasPrefix(extra.str("turn_exit_reason"), "interrupted_by_user") {
				turnEnd(marker.OutcomeCancelled)
			}
		case extra.flag("completed"):
			turnEnd(marker.OutcomeCompleted)
		}
	case "SessionEnd":
		switch p.str("reason") {
		case "clear", "logout", "prompt_input_exit":
			m.Event = marker.EventClosed
		}
	case "SessionStart", "on_session_start":
		m.Event = marker.EventHeartbeat
	}
	if name == "" {
		name = "hook"
	}
	return m, name, nil
}

// Changing names the tools whose completion is a side effect: Claude
// Code's (and Codex's, which names its shell Bash too) file edits and
// shell, Gemini CLI's.
var Changing = map[string]bool{
	"Write": true, "Edit": true, "MultiEdit": true, "NotebookEdit": true, "Bash": true,
	"write_file": true, "replace": true, "run_shell_command": true,
}

// effectKey is the effect key of a completed call of tool with input, ""
// for a tool that does not change things: the tool, what it worked on (its
// command or file, cut to 80 bytes) and a hash of all its arguments, so
// the same call made again has the same key and another edit of the same
// file another key: "Edit:/p/a.go#3f2a9c1d0b7e6a45".
func effectKey(tool string, in fields) string {
	if !Changing[tool] {
		return ""
	}
	// The arguments in a canonical form: a JSON value, object keys sorted.
	var v any
	canon := []byte("null")
	if raw, err := json.Marshal(in); err == nil && json.Unmarshal(raw, &v) == nil {
		if b, err := json.Marshal(v); err == nil {
			canon = b
		}
	}
	sum := sha256.Sum256(canon)
	what := notify.OneLine(toolDetail(in), 80)
	return notify.EffectKey(tool + ":" + what + "#" + hex.EncodeToString(sum[:8]))
}

// toolDetail is what a tool call runs, from its input: the shell command
// (Claude's Bash, Codex's shell tools, Gemini's run_shell_command, hermes'
// terminal), else the file or URL it works on.
func toolDetail(in fields) string {
	if in == nil {
		return ""
	}
	for _, key := range []string{"command", "cmd"} {
		if s := in.str(key); s != "" {
			return s
		}
		var argv []string // Codex's older shell tool: ["bash", "-lc", "..."]
		if json.Unmarshal(in[key], &argv) == nil && len(argv) > 0 {
			if len(argv) == 3 && (argv[1] == "-lc" || argv[1] == "-c") {
				return argv[2]
			}
			return strings.Join(argv, " ")
		}
	}
	for _, key := range []string{"file_path", "absolute_path", "notebook_path", "path", "url"} {
		if s := in.str(key); s != "" {
			return s
		}
	}
	return ""
}

// PendingResume finds the resume for session in the resume file at path
// whose continuation message is prompt: the prompt a --resume-exec
// relaunch hands the agent.
func PendingResume(path, session, prompt string) (resume.Item, bool) {
	if path == "" || strings.TrimSpace(prompt) == "" {
		return resume.Item{}, false
	}
	items, err := resume.ReadFile(path)
	if err != nil {
		return resume.Item{}, false
	}
	for _, it := range items {
		msg := strings.TrimSpace(it.Message)
		if it.Session == session && msg != "" && strings.Contains(prompt, msg) {
			return it, true
		}
	}
	return resume.Item{}, false
}
