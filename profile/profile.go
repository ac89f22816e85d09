// Package profile is what supervise knows of the agent CLIs it has been
// run over: Claude Code, Codex and Gemini CLI. A profile is a row of data:
// how the CLI is recognised, how its turns are seen with nothing installed
// by the user, how a session is resumed by id in task and interactive
// mode, and its quirks. With a profile, `supervise -- claude -p TASK` and
// `supervise -- claude` need no flag and no edit to any file of the user's:
//
//   - Claude Code: supervise's hooks are handed to this run only, with
//     Claude's --settings option (a file in the state dir), and the
//     resume is `claude ... -r {session} {message}`.
//   - Gemini CLI: the hooks go into a system settings file of supervise's
//     own (GEMINI_CLI_SYSTEM_SETTINGS_PATH, the real system settings
//     merged in, for this run only), and the resume is `gemini ... -r
//     {session} -p|-i {message}`.
//   - Codex: its hooks run only after a person trusts them in its TUI, so
//     supervise sees its turns through the model-API proxy instead (a
//     private Codex profile in the state dir names the proxy's URL), and
//     the resume is `codex exec ... resume {session} {message}` or
//     `codex ... resume {session} {message}`.
//
// An agent no profile knows runs as it always has. Explicit flags win: a
// --resume-exec is the user's, --api-proxy off is honoured, and
// --profiles off turns all of it off. What the CLIs print (limit words,
// retries, lost conversations) is read here too (words.go and its
// neighbours), by the table Profile.Words names.
package profile

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Profile is one agent CLI.
type Profile struct {
	Name    string // the program's base name: "claude"
	Title   string // "Claude Code"
	Package string // its npm package, as installed
	Words   CLI    // the table its output is read by
	// Seen is how its turns are seen with nothing installed by the user.
	Seen Seeing
	// events are the hook events injected, in the CLI's own names.
	events []hookEvent
	// valueOpts are its options that take the next word as their value
	// (so that word is no prompt); variadic ones take every word up to
	// the next option. Both as the CLI spells them, long and short.
	valueOpts, variadic []string
	// task and interactive build the resume template from the agent's
	// argv (the prompt found at index prompt, -1 in interactive mode),
	// ok false when the argv cannot be read.
	task        func(p *Profile, argv []string, prompt int) ([]string, bool)
	interactive func(p *Profile, argv []string) []string
	// dropOnResume are options of the first command its resume command
	// rejects (Codex's exec resume rejects -C and -s).
	dropOnResume []string
	// saved reports whether the CLI has written session's conversation
	// down where its resume looks for it (known false: the resume cannot
	// work); nil when supervise cannot tell.
	saved func(home, cwd, session string) (saved, known bool)
}

// Seeing is how a profile sees turns without the user's setup.
type Seeing int

const (
	// SettingsFlag: hooks handed to the run by a command-line option
	// naming a settings file (Claude Code's --settings).
	SettingsFlag Seeing = iota
	// SystemSettings: hooks in a system settings file of supervise's own,
	// named by an environment variable (Gemini CLI).
	SystemSettings
	// Proxy: the model-API proxy (Codex: its hooks need a person's trust).
	Proxy
)

// hookEvent is one hook the profile injects: the CLI's event name and,
// for tool events, the matcher.
type hookEvent struct {
	name    string
	matcher string
}

// profiles is every CLI supervise knows, one row each.
var profiles = []*Profile{&claude, &codex, &gemini}

// Of is the profile of argv[0] (by its base name, as CLIOf reads
// it: "claude", "/usr/local/bin/codex", "gemini.js"), nil for any other
// agent.
func Of(argv0 string) *Profile {
	cli := CLIOf(argv0)
	for _, p := range profiles {
		if p.Words == cli && cli != Unknown {
			return p
		}
	}
	return nil
}

// Installed is where argv0 resolves to and whether that is the profile's
// package (an npm install links the program into node_modules/PACKAGE):
// said in the log, so a person sees which CLI supervise took it for.
func (p *Profile) Installed(argv0 string) (path string, fromPackage bool) {
	path = argv0
	if !strings.ContainsRune(argv0, '/') {
		if lp, err := exec.LookPath(argv0); err == nil {
			path = lp
		}
	}
	if real, err := filepath.EvalSymlinks(path); err == nil {
		path = real
	}
	return path, strings.Contains(filepath.ToSlash(path), "/node_modules/"+p.Package+"/")
}

// prompt finds the task prompt in argv: the one word after the program
// that is neither an option nor an option's value. -1 when there is none
// or more than one (then supervise cannot tell which is the prompt).
func (p *Profile) prompt(argv []string, skip int) int {
	found := -1
	for i := 1 + skip; i < len(argv); i++ {
		a := argv[i]
		if a == "--" {
			if i+1 == len(argv)-1 && found < 0 {
				return i + 1
			}
			return -1
		}
		if strings.HasPrefix(a, "-") && a != "-" {
			name, _, hasValue := strings.Cut(a, "=")
			switch {
			case hasValue:
			case slices.Contains(p.variadic, name):
				for i+1 < len(argv) && !strings.HasPrefix(argv[i+1], "-") {
					i++
				}
			case slices.Contains(p.valueOpts, name):
				i++
			}
			continue
		}
		if found >= 0 {
			return -1
		}
		found = i
	}
	return found
}

// without is argv without the words at the given indexes and without the
// options drop names (with their values).
func (p *Profile) without(argv []string, skip ...int) []string {
	out := make([]string, 0, len(argv))
	for i := 0; i < len(argv); i++ {
		if slices.Contains(skip, i) {
			continue
		}
		name, _, hasValue := strings.Cut(argv[i], "=")
		if i > 0 && slices.Contains(p.dropOnResume, name) {
			if !hasValue {
				i++
			}
			continue
		}
		out = append(out, argv[i])
	}
	return out
}

// Saved reports whether the CLI has written session's conversation down
// where its resume looks for it, under home (the user's home directory):
// known false means a resume by that id cannot work (the CLI was killed
// before it saved the conversation, or never had that id).
func (p *Profile) Saved(home, session string) (saved, known bool) {
	if p.saved == nil || home == "" || session == "" || strings.ContainsAny(session, "/*?[\\") {
		return false, false
	}
	return p.saved(home, "", session)
}

// anyFile reports whether a non-empty file matches one of the patterns.
func anyFile(patterns ...string) bool {
	for _, pat := range patterns {
		m, _ := filepath.Glob(pat)
		for _, f := range m {
			if fi, err := os.Stat(f); err == nil && fi.Mode().IsRegular() && fi.Size() > 0 {
				return true
			}
		}
	}
	return false
}
