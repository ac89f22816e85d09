package profile

import (
	"path/filepath"
)

// codex is Codex CLI (verified with 0.171.0). Its hooks run only after a
// person trusts them in its TUI (and `codex exec` skips untrusted ones
// silently), so supervise sees its turns through the model-API proxy:
// Codex reads no base URL from the environment, and a -c option would put
// the proxy's secret URL on a command line every local user can read, so
// the URL goes into a private Codex profile file (CODEX_HOME, mode 0600),
// rewritten before each launch, named with -p. A task is `codex exec
// [OPTIONS] PROMPT`; a thread is resumed by id with `codex exec [OPTIONS]
// resume {session} {message}` (exec resume rejects -C and -s: supervise
// runs it in the first run's directory) or `codex [OPTIONS] resume
// {session} {message}` in the TUI.
var codex = Profile{
	Name:    "codex",
	Title:   "Codex",
	Package: "@openai/codex",
	Words:   Codex,
	Seen:    Proxy,
	valueOpts: []string{"-m", "--model", "-c", "--config", "-p", "--profile", "-s", "--sandbox", "-C", "--cd",
		"-a", "--ask-for-approval", "--color", "-o", "--output-last-message", "--output-schema", "--add-dir",
		"--local-provider", "--enable", "--disable"},
	variadic:     []string{"-i", "--image"},
	dropOnResume: []string{"-C", "--cd", "-s", "--sandbox", "--last", "-i", "--image", "--output-schema"},
	task: func(p *Profile, argv []string, prompt int) ([]string, bool) {
		if len(argv) < 2 || argv[1] != "exec" && argv[1] != "e" {
			return nil, false
		}
		return append(p.without(argv, prompt), "resume", "{session}", "{message}"), true
	},
	interactive: func(p *Profile, argv []string) []string {
		return append(p.without(argv), "resume", "{session}", "{message}")
	},
	// Codex writes each thread to CODEX_HOME/sessions/YYYY/MM/DD/
	// rollout-<time>-<thread id>.jsonl.
	saved: func(home, _, session string) (bool, bool) {
		return anyFile(filepath.Join(codexHome(home), "sessions", "*", "*", "*", "rollout-*-"+session+".jsonl")), true
	},
}
