package hook

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/marker"
	"github.com/supervise-dev/supervise/notify"
)

// The payloads below are the shapes the real CLIs send (Claude Code and
// Codex hooks on stdin, Codex's notify program argument, Gemini CLI hooks,
// hermes shell hooks with their extra object); each maps to the marker
// docs/adapters.md lists, printed as the notify command it stands for.
func TestMap(t *testing.T) {
	t.Parallel()
	resumeFile := filepath.Join(t.TempDir(), "resume.json")
	if err := os.WriteFile(resumeFile, []byte(`[{"session":"r1","turn":"t0","attempt":1,
		"message":"[supervise: automatic continuation] go on"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ name, payload, want string }{
		{"claude prompt", `{"hook_event_name":"UserPromptSubmit","session_id":"s1","prompt":"fix it"}`,
			`turn-begin --session "s1" --prompt "fix it"`},
		{"claude resumed", `{"hook_event_name":"UserPromptSubmit","session_id":"r1","prompt":"[supervise: automatic continuation] go on"}`,
			`resumed --session "r1" --turn "t0"`},
		{"other session's continuation", `{"hook_event_name":"UserPromptSubmit","session_id":"r2","prompt":"[supervise: automatic continuation] go on"}`,
			`turn-begin --session "r2" --prompt "[supervise: automatic continuation] go on"`},
		{"claude tool", `{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Bash","tool_input":{"command":"ls"}}`,
			`phase --session "s1" --phase "tool" --tool "Bash" --detail "ls"`},
		{"claude edit", `{"hook_event_name":"PreToolUse","session_id":"s1","tool_name":"Edit","tool_input":{"file_path":"/p/a.go","old_string":"x"}}`,
			`phase --session "s1" --phase "tool" --tool "Edit" --detail "/p/a.go"`},
		{"codex shell argv", `{"hook_event_name":"PreToolUse","session_id":"c1","tool_name":"Bash","tool_input":{"command":["bash","-lc","npm test"]}}`,
			`phase --session "c1" --phase "tool" --tool "Bash" --detail "npm test"`},
		{"claude tool done", `{"hook_event_name":"PostToolUse","session_id":"s1","tool_name":"Bash","tool_input":{"command":"ls","description":"list"}}`,
			"effect --session \"s1\" --key \"Bash:ls#f36a334108327ca2\"\n" + `phase --session "s1" --phase "model"`},
		{"claude tool done, arguments in another order", `{"hook_event_name":"PostToolUse","session_id":"s1","tool_name":"Bash","tool_input":{"description":"list","command":"ls"}}`,
			"effect --session \"s1\" --key \"Bash:ls#f36a334108327ca2\"\n" + `phase --session "s1" --phase "model"`},
		{"claude read done", `{"hook_event_name":"PostToolUse","session_id":"s1","tool_name":"Read","tool_input":{"file_path":"/p/a.go"}}`,
			`phase --session "s1" --phase "model"`},
		{"gemini write done", `{"hook_event_name":"AfterTool","session_id":"g1","tool_name":"write_file","tool_input":{"file_path":"a.txt","content":"x"}}`,
			"effect --session \"g1\" --key \"write_file:a.txt#e100f5912b138cfc\"\n" + `phase --session "g1" --phase "model"`},
		{"claude tool failed", `{"hook_event_name":"PostToolUseFailure","session_id":"s1","tool_name":"Bash","tool_input":{"command":"ls"}}`,
			`phase --session "s1" --phase "model"`},
		{"claude permission", `{"hook_event_name":"Notification","session_id":"s1","notification_type":"permission_prompt","message":"Claude needs your permission to use Bash"}`,
			`waiting --session "s1" --wait "approval"`},
		{"claude permission, old", `{"hook_event_name":"Notification","session_id":"s1","message":"Claude needs your permission to use Bash"}`,
			`waiting --session "s1" --wait "approval"`},
		{"claude question", `{"hook_event_name":"Notification","session_id":"s1","notification_type":"elicitation_dialog"}`,
			`waiting --session "s1" --wait "input"`},
		{"claude idle", `{"hook_event_name":"Notification","session_id":"s1","notification_type":"idle_prompt","message":"Claude is waiting for your input"}`,
			`turn-end --session "s1" --outcome "cancelled"`},
		{"claude idle, old", `{"hook_event_name":"Notification","session_id":"s1","message":"Claude is waiting for your input"}`,
			`turn-end --session "s1" --outcome "cancelled"`},
		{"claude auth", `{"hook_event_name":"Notification","session_id":"s1","notification_type":"auth_success"}`, ``},
		{"claude permission request", `{"hook_event_name":"PermissionRequest","session_id":"s1","tool_name":"Bash"}`,
			`waiting --session "s1" --wait "approval"`},
		{"claude stop", `{"hook_event_name":"Stop","session_id":"s1","stop_hook_active":false}`,
			`turn-end --session "s1" --outcome "completed"`},
		{"claude stop failure", `{"hook_event_name":"StopFailure","session_id":"s1"}`,
			`turn-end --session "s1" --outcome "failed"`},
		{"claude subagent", `{"hook_event_name":"SubagentStop","session_id":"s1"}`, ``},
		{"claude start", `{"hook_event_name":"SessionStart","session_id":"s1","source":"startup"}`,
			`heartbeat --session "s1"`},
		{"claude clear", `{"hook_event_name":"SessionEnd","session_id":"s1","reason":"clear"}`, `closed --session "s1"`},
		{"claude exit at prompt", `{"hook_event_name":"SessionEnd","session_id":"s1","reason":"prompt_input_exit"}`, `closed --session "s1"`},
		{"claude end other", `{"hook_event_name":"SessionEnd","session_id":"s1","reason":"other"}`, ``},
		{"codex prompt", `{"hook_event_name":"UserPromptSubmit","session_id":"c1","turn_id":"u1","prompt":"go"}`,
			`turn-begin --session "c1" --turn "u1" --prompt "go"`},
		{"codex notify", `{"type":"agent-turn-complete","thread-id":"c1","turn-id":"u1","last-assistant-message":"ok"}`,
			`turn-end --session "c1" --turn "u1" --outcome "completed"`},
		{"gemini prompt", `{"hook_event_name":"BeforeAgent","session_id":"g1","prompt":"go"}`,
			`turn-begin --session "g1" --prompt "go"`},
		{"gemini tool", `{"hook_event_name":"BeforeTool","session_id":"g1","tool_name":"run_shell_command"}`,
			`phase --session "g1" --phase "tool" --tool "run_shell_command"`},
		{"gemini shell", `{"hook_event_name":"BeforeTool","session_id":"g1","tool_name":"run_shell_command","tool_input":{"command":"make\ntest","description":"d"}}`,
			`phase --session "g1" --phase "tool" --tool "run_shell_command" --detail "make test"`},
		{"gemini permission", `{"hook_event_name":"Notification","session_id":"g1","notification_type":"ToolPermission","message":"x","details":{}}`,
			`waiting --session "g1" --wait "approval"`},
		{"gemini done", `{"hook_event_name":"AfterAgent","session_id":"g1","prompt":"go","prompt_response":"ok"}`,
			`turn-end --session "g1" --outcome "completed"`},
		{"gemini exit", `{"hook_event_name":"SessionEnd","session_id":"g1","reason":"exit"}`, ``},
		{"gemini logout", `{"hook_event_name":"SessionEnd","session_id":"g1","reason":"logout"}`, `closed --session "g1"`},
		{"hermes turn", `{"hook_event_name":"pre_llm_call","tool_name":null,"tool_input":null,"session_id":"h1","cwd":"/","extra":{"user_message":"go","turn_id":"t9","is_first_turn":true}}`,
			`turn-begin --session "h1" --turn "t9" --prompt "go"`},
		{"hermes multimodal turn", `{"hook_event_name":"pre_llm_call","session_id":"h1","extra":{"user_message":[{"type":"text","text":"go"}],"turn_id":"t9"}}`,
			`turn-begin --session "h1" --turn "t9"`},
		{"hermes tool", `{"hook_event_name":"pre_tool_call","tool_name":"terminal","tool_input":{"command":"ls"},"session_id":"h1","extra":{"turn_id":"t9"}}`,
			`phase --session "h1" --phase "tool" --tool "terminal" --detail "ls"`},
		{"hermes user stop", `{"hook_event_name":"on_session_end","session_id":"h1","extra":{"completed":false,"interrupted":true,"turn_exit_reason":"interrupted_by_user","turn_id":"t9"}}`,
			`turn-end --session "h1" --turn "t9" --outcome "cancelled"`},
		{"hermes watchdog stop", `{"hook_event_name":"on_session_end","session_id":"h1","extra":{"completed":false,"interrupted":true,"turn_exit_reason":"interrupted_by_system(turn_liveness_watchdog)"}}`, ``},
		{"hermes failed", `{"hook_event_name":"on_session_end","session_id":"h1","extra":{"completed":false,"failed":true}}`,
			`turn-end --session "h1" --outcome "failed"`},
		{"hermes done", `{"hook_event_name":"post_llm_call","session_id":"h1","extra":{"turn_id":"t9"}}`,
			`turn-end --session "h1" --turn "t9" --outcome "completed"`},
		{"unknown event", `{"hook_event_name":"PreCompact","session_id":"s1"}`, ``},
		{"no event", `{"session_id":"s1"}`, ``},
	} {
		m, _, err := Map([]byte(c.payload))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		got := ""
		if m.Event != "" {
			got = m.Resolve(Marker{}, resumeFile).CommandLine()
		}
		if got != c.want {
			t.Errorf("%s: got %q, want %q", c.name, got, c.want)
		}
	}
}

func TestMapNames(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ payload, name string }{
		{`{"hook_event_name":"Stop","session_id":"s1"}`, "Stop"},
		{`{"type":"agent-turn-complete","thread-id":"c9"}`, "agent-turn-complete"},
		{`{"session_id":"s1"}`, "hook"},
	} {
		if _, name, err := Map([]byte(c.payload)); err != nil || name != c.name {
			t.Errorf("Map(%s) names %q (%v), want %q", c.payload, name, err, c.name)
		}
	}
}

func TestMapRejects(t *testing.T) {
	t.Parallel()
	for _, p := range []string{"not json", "", "[]", "null", `"a string"`, "42"} {
		if _, _, err := Map([]byte(p)); err == nil {
			t.Errorf("Map(%q) = nil error, want one", p)
		}
	}
	// A field of an unexpected type reads as absent, not as a failure.
	m, _, err := Map([]byte(`{"hook_event_name":"PreToolUse","session_id":7,"tool_name":{"x":1}}`))
	if err != nil || m.Event != marker.EventPhase || m.Session != "" || m.Tool != "" {
		t.Errorf("lenient read: %+v, %v", m, err)
	}
}

// Flags win over the payload; phase, heartbeat and closed carry no turn;
// a continuation of another session, or with no resume file, stays a
// turn-begin.
func TestResolve(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	resumeFile := filepath.Join(dir, "resume.json")
	if err := os.WriteFile(resumeFile, []byte(`[{"session":"r1","turn":"t0","attempt":1,"message":"go on"}]`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		m, over    Marker
		resumeFile string
		want       string
	}{
		{"flags win", Marker{Event: marker.EventTurnBegin, Session: "s1", Prompt: "p"}, Marker{Session: "s2", Turn: "u", Prompt: "q"}, "",
			`turn-begin --session "s2" --turn "u" --prompt "q"`},
		{"phase drops turn", Marker{Event: marker.EventPhase, Session: "s1", Turn: "u", Phase: marker.PhaseTool, Tool: "Bash"}, Marker{}, "",
			`phase --session "s1" --phase "tool" --tool "Bash"`},
		{"closed drops turn", Marker{Event: marker.EventClosed, Session: "s1", Turn: "u"}, Marker{}, "", `closed --session "s1"`},
		{"effect alone", Marker{Event: marker.EventEffect, Session: "s1", Turn: "u", Effect: "k"}, Marker{Session: "s2"}, "",
			`effect --session "s2" --key "k"`},
		{"heartbeat drops turn", Marker{Event: marker.EventHeartbeat, Session: "s1", Turn: "u"}, Marker{}, "", `heartbeat --session "s1"`},
		{"resumed", Marker{Event: marker.EventTurnBegin, Session: "r1", Prompt: "please: go on"}, Marker{}, resumeFile,
			`resumed --session "r1" --turn "t0"`},
		{"resumed keeps the CLI's turn id (Codex numbers the continuation afresh)", Marker{Event: marker.EventTurnBegin, Session: "r1", Turn: "t9", Prompt: "please: go on"}, Marker{}, resumeFile,
			`resumed --session "r1" --turn "t9"`},
		{"no resume file", Marker{Event: marker.EventTurnBegin, Session: "r1", Prompt: "go on"}, Marker{}, "",
			`turn-begin --session "r1" --prompt "go on"`},
		{"missing resume file", Marker{Event: marker.EventTurnBegin, Session: "r1", Prompt: "go on"}, Marker{}, filepath.Join(dir, "none"),
			`turn-begin --session "r1" --prompt "go on"`},
		{"other prompt", Marker{Event: marker.EventTurnBegin, Session: "r1", Prompt: "something else"}, Marker{}, resumeFile,
			`turn-begin --session "r1" --prompt "something else"`},
	} {
		if got := c.m.Resolve(c.over, c.resumeFile).CommandLine(); got != c.want {
			t.Errorf("%s: got %s, want %s", c.name, got, c.want)
		}
	}
}

// Two edits of one file are two effects; the same edit made again is the
// same effect; a long command still makes a key the protocol takes.
func TestEffectKeys(t *testing.T) {
	t.Parallel()
	key := func(payload string) string {
		m, _, err := Map([]byte(payload))
		if err != nil {
			t.Fatal(err)
		}
		return m.Effect
	}
	a := key(`{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Edit","tool_input":{"file_path":"/p/a.go","old_string":"x","new_string":"y"}}`)
	b := key(`{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Edit","tool_input":{"file_path":"/p/a.go","old_string":"y","new_string":"z"}}`)
	again := key(`{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Edit","tool_input":{"new_string":"y","old_string":"x","file_path":"/p/a.go"}}`)
	if a == "" || a == b || a != again || !strings.HasPrefix(a, "Edit:/p/a.go#") {
		t.Errorf("keys %q %q %q", a, b, again)
	}
	long := key(`{"hook_event_name":"PostToolUse","session_id":"s","tool_name":"Bash","tool_input":{"command":"` + strings.Repeat("echo x; ", 100) + `"}}`)
	if _, err := notify.Parse([]byte("X_SUPERVISE_SESSION=s\nX_SUPERVISE_EVENT=effect\nX_SUPERVISE_EFFECT=" + long)); err != nil || len(long) > 120 {
		t.Errorf("long command's key %q: %v", long, err)
	}
}
