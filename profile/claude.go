package profile

import (
	"os"
	"path/filepath"
)

// claude is Claude Code (verified with 2.1.197). Its hooks are handed to
// the run with --settings=FILE: Claude merges them with the user's own
// (both run), and reads no file of the user's differently for it. A task is
// `claude -p [OPTIONS] PROMPT`; a session is resumed by its id with -r,
// with the first run's options (those that would start another session
// dropped); the continuation is the prompt.
var claude = Profile{
	Name:    "claude",
	Title:   "Claude Code",
	Package: "@anthropic-ai/claude-code",
	Words:   Claude,
	Seen:    SettingsFlag,
	events: []hookEvent{{"SessionStart", ""}, {"UserPromptSubmit", ""}, {"PreToolUse", "*"}, {"PostToolUse", "*"},
		{"PostToolUseFailure", "*"}, {"PermissionRequest", "*"}, {"Notification", ""}, {"Stop", ""},
		{"StopFailure", ""}, {"SessionEnd", ""}},
	valueOpts: []string{"--model", "--settings", "--output-format", "--input-format", "--permission-mode",
		"--append-system-prompt", "--system-prompt", "--max-turns", "--session-id", "-r", "--resume",
		"--fallback-model", "--agents", "--agent", "--setting-sources", "--permission-prompt-tool",
		"--max-budget-usd", "--json-schema", "--effort", "--plugin-dir", "--system-prompt-file",
		"--append-system-prompt-file", "--debug-file", "--name", "-n"},
	variadic: []string{"--mcp-config", "--allowedTools", "--allowed-tools", "--disallowedTools",
		"--disallowed-tools", "--add-dir", "--betas", "--tools", "--file"},
	dropOnResume: []string{"--session-id", "-r", "--resume", "-c", "--continue", "--fork-session"},
	task: func(p *Profile, argv []string, prompt int) ([]string, bool) {
		return append(p.without(argv, prompt), "-r", "{session}", "{message}"), true
	},
	interactive: func(p *Profile, argv []string) []string {
		return append(p.without(argv), "-r", "{session}", "{message}")
	},
	// Claude writes a conversation to
	// CONFIG/projects/<the directory, mangled>/<session>.jsonl lazily: a
	// kill in the first turn before that leaves nothing to resume.
	saved: func(home, _, session string) (bool, bool) {
		dir := os.Getenv("CLAUDE_CONFIG_DIR")
		if dir == "" {
			dir = filepath.Join(home, ".claude")
		}
		return anyFile(filepath.Join(dir, "projects", "*", session+".jsonl")), true
	},
}
