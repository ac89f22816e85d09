package profile

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
)

// Options is what Make needs to know of the run.
type Options struct {
	// Interactive: the agent's argv carries no task prompt.
	Interactive bool
	// Template: the user gave --resume-exec (theirs wins).
	Template bool
	// ProxyOff: the user gave --api-proxy off explicitly.
	ProxyOff bool
	// ProxyOn: the proxy runs (--api-proxy on).
	ProxyOn bool
	// StateDir is the run's state dir (absolute; it may not exist yet).
	StateDir string
	// Self is supervise's own executable: the hooks run `Self notify hook`
	// (or supervise-notify beside it).
	Self string
	// Home is the user's home directory, Cwd the agent's directory.
	Home, Cwd string
	// Getenv reads supervise's environment (os.Getenv).
	Getenv func(string) string
}

// Plan is what a profile sets up for one run of supervise.
type Plan struct {
	Profile *Profile
	// Argv is the agent's argv, with what the profile hands it (Claude's
	// --settings, Codex's -p).
	Argv []string
	// Template is the resume template (nil: the user gave one, or the
	// argv cannot be read: then none).
	Template []string
	// APIProxy turns the model-API proxy on (Codex; Gemini where its
	// settings cannot be used).
	APIProxy bool
	// Env is added to the agent's environment.
	Env []string
	// Files are written into the state dir (mode 0600) before the first
	// launch: name to content.
	Files map[string][]byte
	// Launch runs before each launch with the launch's environment (the
	// proxy's URL in it): Codex's profile file is written there.
	Launch func(env []string) error
	// Done runs when supervise ends: what Launch wrote is removed.
	Done func()
	// Saved reports whether the CLI has saved a session's conversation
	// where its resume looks (Profile.Saved under the user's home).
	Saved func(session string) (saved, known bool)
	// Said is what was set up and why, one line each, for the log.
	Said []string
	// add is what the profile hands the CLI on its command line, inserted
	// after the program (after Codex's exec subcommand).
	add []string
}

// inject inserts the plan's words into argv (a command or a template).
func (plan *Plan) inject(argv []string) []string {
	if len(plan.add) == 0 || len(argv) == 0 {
		return argv
	}
	at := 1
	if len(argv) > 1 && (argv[1] == "exec" || argv[1] == "e") {
		at = 2
	}
	return slices.Insert(slices.Clone(argv), at, plan.add...)
}

// Adapt is the user's own resume template (--resume-exec) with what the
// profile hands the CLI, when the template runs the same CLI: the resumed
// run is seen as the first one is. Any other template is the user's as is.
func (plan *Plan) Adapt(tpl []string) []string {
	if plan.Profile == nil || len(plan.add) == 0 || len(tpl) == 0 || Of(tpl[0]) != plan.Profile {
		return tpl
	}
	out := plan.inject(tpl)
	plan.say("resume: the template given, with %s added: %s", strings.Join(plan.add, " "), strings.Join(out, " "))
	return out
}

// hooksFile is the name of the settings file in the state dir.
const hooksFile = "agent-settings.json"

// Make plans the run of argv under its profile; ok false when no profile
// knows argv[0] (the agent runs as it always has).
func Make(argv []string, o Options) (plan Plan, ok bool, err error) {
	p := Of(argv[0])
	if p == nil {
		return Plan{Argv: argv}, false, nil
	}
	plan = Plan{Profile: p, Argv: argv}
	plan.Saved = func(session string) (bool, bool) { return p.Saved(o.Home, session) }
	where, fromPkg := p.Installed(argv[0])
	pkg := ""
	if fromPkg {
		pkg = " (" + p.Package + ")"
	}
	plan.say("profile %s: %s at %s%s", p.Name, p.Title, where, pkg)
	switch p.Seen {
	case SettingsFlag, SystemSettings:
		if f := hookedBy(p, o); f != "" {
			plan.say("its turns: the hooks the user installed (%s); none added", f)
			break
		}
		if err := plan.hooks(o); err != nil {
			plan.say("its turns: no hooks could be handed to it (%v): the model-API proxy sees them", err)
			plan.proxy(o)
		}
	case Proxy:
		if f := hookedBy(p, o); f != "" {
			plan.say("its turns: the hooks the user installed (%s); no proxy added", f)
			break
		}
		plan.proxy(o)
	}
	if !o.Template {
		plan.template(o)
	}
	return plan, true, nil
}

func (plan *Plan) say(format string, args ...any) {
	plan.Said = append(plan.Said, fmt.Sprintf(format, args...))
}

// hooks hands the CLI supervise's hooks for this run only.
func (plan *Plan) hooks(o Options) error {
	p := plan.Profile
	cmd := hookCommand(o.Self)
	settings := map[string]any{"hooks": p.hookSettings(cmd)}
	path := filepath.Join(o.StateDir, hooksFile)
	switch p.Seen {
	case SettingsFlag:
		plan.add = []string{"--settings=" + path}
		plan.Argv = plan.inject(plan.Argv)
		plan.say("its turns: supervise's hooks (%s) handed to this run with --settings=%s; no file of the user's is changed", cmd, path)
	case SystemSettings:
		if dir := insecureParent(o.StateDir); dir != "" {
			return fmt.Errorf("%s reads no system settings file under %s, which others may write", p.Title, dir)
		}
		sys, name, err := systemSettings(o.Getenv)
		if err != nil {
			return err
		}
		for k, v := range sys {
			if k != "hooks" {
				settings[k] = v
			}
		}
		settings["hooks"] = mergeHooks(sys["hooks"], settings["hooks"].(map[string]any))
		plan.Env = append(plan.Env, "GEMINI_CLI_SYSTEM_SETTINGS_PATH="+path)
		plan.say("its turns: supervise's hooks (%s) in %s, with the system settings of %s merged in, named by GEMINI_CLI_SYSTEM_SETTINGS_PATH for this run only; no file of the user's is changed", cmd, path, name)
	}
	b, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return err
	}
	plan.Files = map[string][]byte{hooksFile: append(b, '\n')}
	return nil
}

// proxy has the model-API proxy see the CLI's turns (Codex, or a CLI
// whose hooks cannot be handed over), unless the user turned it off.
func (plan *Plan) proxy(o Options) {
	p := plan.Profile
	if o.ProxyOff {
		plan.say("its turns: unseen (--api-proxy off): supervise decides by how the process ends only; install its hooks (examples/%s) to see them", p.Name)
		return
	}
	plan.APIProxy = true
	if !o.ProxyOn {
		plan.say("its turns: the model-API proxy (--api-proxy on, turned on for %s)", p.Title)
	}
	if p != &codex {
		return
	}
	for _, a := range plan.Argv[1:] {
		if name, _, _ := strings.Cut(a, "="); name == "-p" || name == "--profile" {
			plan.say("codex: the command names its own profile (%s): the proxy's URL cannot be handed to it, so Codex calls the API directly and its turns are unseen", a)
			plan.APIProxy = false
			return
		}
	}
	name := codexProfileName(o.StateDir)
	plan.add = []string{"--profile=" + name} // one word: an option, never read as a prompt or as -p (print)
	plan.Argv = plan.inject(plan.Argv)
	home := codexHome(o.Home)
	if h := o.Getenv("CODEX_HOME"); h != "" {
		home = h
	}
	file := filepath.Join(home, name+".config.toml")
	provider := codexProvider(filepath.Join(home, "config.toml"))
	plan.say("codex: the proxy's URL is handed to it in a private profile, %s (mode 0600, rewritten before each launch), named with --profile=%s", file, name)
	plan.Launch = func(env []string) error { return writeCodexProfile(file, provider, env) }
	plan.Done = func() { os.Remove(file) }
}

// template builds the resume template from the agent's argv.
func (plan *Plan) template(o Options) {
	p := plan.Profile
	if o.Interactive {
		plan.Template = p.interactive(p, plan.Argv)
		plan.say("resume: %s (interactive: the same conversation continues in this terminal)", strings.Join(plan.Template, " "))
		return
	}
	skip := 0
	if p == &codex {
		skip = 1
	}
	at := p.prompt(plan.Argv, skip)
	if p == &gemini {
		at = promptOption(plan.Argv)
	}
	tpl, ok := []string(nil), false
	if at > 0 {
		tpl, ok = p.task(p, plan.Argv, at)
	}
	if !ok {
		plan.say("resume: none: supervise cannot tell the task's prompt from its options in %q; give --resume-exec", strings.Join(plan.Argv, " "))
		return
	}
	plan.Template = tpl
	plan.say("resume: %s (task: the task runs once, an interrupted turn is resumed by its session's id)", strings.Join(tpl, " "))
}

// hookSettings is the CLI's "hooks" setting running cmd on each event.
func (p *Profile) hookSettings(cmd string) map[string]any {
	out := map[string]any{}
	for _, ev := range p.events {
		h := map[string]any{"type": "command", "command": cmd, "timeout": 10}
		if p.Seen == SystemSettings {
			h["name"], h["timeout"] = "supervise", 10000 // Gemini counts milliseconds
		}
		group := map[string]any{"hooks": []any{h}}
		if ev.matcher != "" {
			group["matcher"] = ev.matcher
		}
		out[ev.name] = []any{group}
	}
	return out
}

// hookCommand is the shell command the hooks run: supervise-notify beside
// supervise when there is one (it starts faster), else supervise itself.
func hookCommand(self string) string {
	if n := filepath.Join(filepath.Dir(self), "supervise-notify"); isExecutable(n) {
		return shellQuote(n) + " hook"
	}
	return shellQuote(self) + " notify hook"
}

func isExecutable(path string) bool {
	fi, err := os.Stat(path)
	return err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0
}

// shellQuote quotes s for /bin/sh when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789/._-+") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// hookedBy is the settings file of the user's in which supervise's hooks
// are already installed ("" for none): supervise adds none then, or every
// event would be reported twice.
func hookedBy(p *Profile, o Options) string {
	var files []string
	switch p {
	case &claude:
		dir := o.Getenv("CLAUDE_CONFIG_DIR")
		if dir == "" {
			dir = filepath.Join(o.Home, ".claude")
		}
		files = []string{filepath.Join(dir, "settings.json"), filepath.Join(o.Cwd, ".claude", "settings.json"),
			filepath.Join(o.Cwd, ".claude", "settings.local.json"), "/etc/claude-code/managed-settings.json"}
	case &codex:
		home := codexHome(o.Home)
		if h := o.Getenv("CODEX_HOME"); h != "" {
			home = h
		}
		files = []string{filepath.Join(home, "hooks.json"), filepath.Join(o.Cwd, ".codex", "hooks.json")}
	case &gemini:
		_, sys, _ := systemSettings(o.Getenv)
		files = []string{filepath.Join(o.Home, ".gemini", "settings.json"), filepath.Join(o.Cwd, ".gemini", "settings.json"), sys}
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err == nil && (strings.Contains(string(b), "supervise-notify") || strings.Contains(string(b), "supervise notify")) {
			return f
		}
	}
	return ""
}

// systemSettings reads Gemini CLI's system settings file (the one
// GEMINI_CLI_SYSTEM_SETTINGS_PATH names, else the platform's), nil when
// there is none; an error when it cannot be read as JSON (supervise does
// not replace settings it cannot merge).
func systemSettings(getenv func(string) string) (map[string]any, string, error) {
	name := getenv("GEMINI_CLI_SYSTEM_SETTINGS_PATH")
	if name == "" {
		name = "/etc/gemini-cli/settings.json"
		if runtime.GOOS == "darwin" {
			name = "/Library/Application Support/GeminiCli/settings.json"
		}
	}
	b, err := os.ReadFile(name)
	if errors.Is(err, os.ErrNotExist) {
		return nil, name, nil
	}
	if err != nil {
		return nil, name, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, name, fmt.Errorf("the system settings %s are not plain JSON (%v): supervise cannot merge its hooks in", name, err)
	}
	return m, name, nil
}

// mergeHooks adds add's hook groups after those of have (a "hooks"
// setting), event by event.
func mergeHooks(have any, add map[string]any) map[string]any {
	out := map[string]any{}
	if m, ok := have.(map[string]any); ok {
		for k, v := range m {
			out[k] = v
		}
	}
	for ev, groups := range add {
		old, _ := out[ev].([]any)
		out[ev] = append(slices.Clone(old), groups.([]any)...)
	}
	return out
}

// insecureParent is the first directory at or above dir (those that exist)
// that others may write, "" for none: Gemini CLI skips a system settings
// file under one.
func insecureParent(dir string) string {
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.Mode().Perm()&0o022 != 0 {
			return d
		}
		if d == filepath.Dir(d) {
			return ""
		}
	}
}

// codexHome is Codex's home under the user's home.
func codexHome(home string) string {
	if h := os.Getenv("CODEX_HOME"); h != "" {
		return h
	}
	return filepath.Join(home, ".codex")
}

// codexProfileName names the Codex profile of a state dir: the same in
// every run of it, so the task's command line (and its identity) is too.
func codexProfileName(stateDir string) string {
	sum := sha256.Sum256([]byte(stateDir))
	return "supervise-" + hex.EncodeToString(sum[:6])
}

// codexProvider is the model_provider the user's config.toml names at its
// top level ("" for Codex's built-in OpenAI provider).
func codexProvider(config string) string {
	b, err := os.ReadFile(config)
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			break // the top level ends at the first table
		}
		if k, v, ok := strings.Cut(l, "="); ok && strings.TrimSpace(k) == "model_provider" {
			v = strings.Trim(strings.TrimSpace(v), `"'`)
			if v != "openai" {
				return v
			}
		}
	}
	return ""
}

// writeCodexProfile writes the proxy's URL (OPENAI_BASE_URL in the
// launch's environment) into the Codex profile file, atomically, mode
// 0600: for the built-in provider as openai_base_url, for the user's own
// as its base_url.
func writeCodexProfile(file, provider string, env []string) error {
	url := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "OPENAI_BASE_URL="); ok {
			url = v
		}
	}
	if url == "" || strings.ContainsAny(url, "\"\\\n") {
		return fmt.Errorf("codex: no plain proxy URL in the launch's environment")
	}
	body := fmt.Sprintf("openai_base_url = %q\n", url)
	if provider != "" {
		body = fmt.Sprintf("[model_providers.%q]\nbase_url = %q\n", provider, url)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return err
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, []byte(body), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, file)
}
