package profile

import (
	"path/filepath"
	"slices"
	"strings"
)

// gemini is Gemini CLI (verified with 0.61.0). Its hooks go into a system
// settings file of supervise's own, named by GEMINI_CLI_SYSTEM_SETTINGS_PATH
// for this run only, with the real system settings merged in: Gemini adds
// the hooks of every settings file together, so the user's own run too.
// Gemini skips a system settings file under a directory others may write
// (it checks every parent), so with a state dir there the proxy sees its
// turns instead. A task is `gemini -p PROMPT [OPTIONS]`; a session is
// resumed by id with `-r {session}` and the continuation as -p (task) or
// -i (interactive: it answers and stays).
var gemini = Profile{
	Name:    "gemini",
	Title:   "Gemini CLI",
	Package: "@google/gemini-cli",
	Words:   Gemini,
	Seen:    SystemSettings,
	events: []hookEvent{{"SessionStart", ""}, {"BeforeAgent", ""}, {"BeforeTool", "*"}, {"AfterTool", "*"},
		{"Notification", ""}, {"AfterAgent", ""}, {"SessionEnd", ""}},
	valueOpts: []string{"-m", "--model", "-p", "--prompt", "-i", "--prompt-interactive", "--approval-mode",
		"-o", "--output-format", "-r", "--resume", "--session-id", "--telemetry-target", "--telemetry-otlp-endpoint",
		"--proxy", "--delete-session"},
	variadic: []string{"--allowed-tools", "-e", "--extensions", "--include-directories", "--allowed-mcp-server-names",
		"--policy"},
	dropOnResume: []string{"-r", "--resume", "--session-id", "-i", "--prompt-interactive", "-p", "--prompt"},
	task: func(p *Profile, argv []string, _ int) ([]string, bool) {
		if at := promptOption(argv); at < 0 {
			return nil, false
		}
		return append(p.without(argv), "-r", "{session}", "-p", "{message}"), true
	},
	interactive: func(p *Profile, argv []string) []string {
		return append(p.without(argv), "-r", "{session}", "-i", "{message}")
	},
	// Gemini keeps a session in ~/.gemini/tmp/<project>/chats/
	// session-<time>-<the id's first 8 characters>.json[l].
	saved: func(home, _, session string) (bool, bool) {
		short := session
		if len(short) > 8 {
			short = short[:8]
		}
		dir := filepath.Join(home, ".gemini", "tmp", "*", "chats")
		return anyFile(filepath.Join(dir, "session-*-"+short+".jsonl"), filepath.Join(dir, "session-*-"+short+".json")), true
	},
}

// promptOption is the index of Gemini's -p/--prompt option (its value is
// the task), -1 when there is none.
func promptOption(argv []string) int {
	for i, a := range argv {
		if i == 0 {
			continue
		}
		name, _, _ := strings.Cut(a, "=")
		if slices.Contains([]string{"-p", "--prompt"}, name) {
			return i
		}
	}
	return -1
}
