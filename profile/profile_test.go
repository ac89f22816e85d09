package profile

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func opts(t *testing.T) Options {
	home := t.TempDir()
	return Options{StateDir: filepath.Join(t.TempDir(), "state"), Self: "/opt/sv/supervise", Home: home, Cwd: t.TempDir(),
		Getenv: func(k string) string {
			if k == "GEMINI_CLI_SYSTEM_SETTINGS_PATH" {
				return filepath.Join(home, "no-system-settings.json")
			}
			return ""
		}}
}

// The resume template comes from the agent's own command: its options
// carried, the prompt and what would start another session dropped.
func TestTemplates(t *testing.T) {
	for _, c := range []struct {
		argv        []string
		interactive bool
		want        string // "" for none
	}{
		{[]string{"claude", "-p", "fix it"}, false, "claude --settings=S -p -r {session} {message}"},
		{[]string{"claude", "-p", "--model", "opus", "fix it"}, false, "claude --settings=S -p --model opus -r {session} {message}"},
		{[]string{"claude", "--allowedTools", "Bash", "Edit", "-p", "fix it"}, false, "claude --settings=S --allowedTools Bash Edit -p -r {session} {message}"},
		{[]string{"claude", "-p", "--session-id", "abc", "fix it"}, false, "claude --settings=S -p -r {session} {message}"},
		{[]string{"claude", "-p", "fix", "it"}, false, ""}, // two words: which is the prompt?
		{[]string{"claude"}, true, "claude --settings=S -r {session} {message}"},
		{[]string{"claude", "--model=opus"}, true, "claude --settings=S --model=opus -r {session} {message}"},
		{[]string{"codex", "exec", "fix it"}, false, "codex exec --profile=P resume {session} {message}"},
		{[]string{"codex", "exec", "-C", "/x", "-m", "o3", "fix it"}, false, "codex exec --profile=P -m o3 resume {session} {message}"},
		{[]string{"codex"}, true, "codex --profile=P resume {session} {message}"},
		{[]string{"gemini", "-p", "fix it"}, false, "gemini -r {session} -p {message}"},
		{[]string{"gemini", "-m", "flash", "--prompt=fix it"}, false, "gemini -m flash -r {session} -p {message}"},
		{[]string{"gemini"}, true, "gemini -r {session} -i {message}"},
	} {
		o := opts(t)
		o.Interactive = c.interactive
		plan, ok, err := Make(c.argv, o)
		if err != nil || !ok {
			t.Fatalf("%q: ok %v err %v", c.argv, ok, err)
		}
		got := strings.Join(plan.Template, " ")
		got = strings.ReplaceAll(got, "--settings="+filepath.Join(o.StateDir, hooksFile), "--settings=S")
		got = strings.ReplaceAll(got, codexProfileName(o.StateDir), "P")
		if got != c.want {
			t.Errorf("%q: template %q, want %q (said %q)", c.argv, got, c.want, plan.Said)
		}
		if c.want == "" && !strings.Contains(strings.Join(plan.Said, "\n"), "give --resume-exec") {
			t.Errorf("%q: no template and nothing said: %q", c.argv, plan.Said)
		}
	}
}

func TestUnknownAgentUntouched(t *testing.T) {
	for _, argv := range [][]string{{"python3", "agent.py"}, {"npx", "claude"}, {"./my-claude-wrapper", "-p", "x"}} {
		plan, ok, err := Make(argv, opts(t))
		if ok || err != nil || !slices.Equal(plan.Argv, argv) || plan.Template != nil || plan.APIProxy {
			t.Errorf("%q: plan %+v ok %v err %v, want the agent as given", argv, plan, ok, err)
		}
	}
}

// Claude's hooks go to the run by --settings=FILE: every event the
// example wires, each running supervise-notify beside supervise when it
// is there, else supervise notify hook.
func TestClaudeHooks(t *testing.T) {
	o := opts(t)
	self := filepath.Join(t.TempDir(), "my dir", "supervise")
	o.Self = self
	plan, _, _ := Make([]string{"claude", "-p", "x"}, o)
	if plan.Argv[1] != "--settings="+filepath.Join(o.StateDir, hooksFile) {
		t.Fatalf("argv %q", plan.Argv)
	}
	var s struct {
		Hooks map[string][]struct {
			Matcher string
			Hooks   []struct{ Type, Command string }
		}
	}
	if err := json.Unmarshal(plan.Files[hooksFile], &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Hooks) != len(claude.events) || s.Hooks["PreToolUse"][0].Matcher != "*" {
		t.Errorf("hooks %+v", s.Hooks)
	}
	if got := s.Hooks["Stop"][0].Hooks[0].Command; got != "'"+self+"' notify hook" {
		t.Errorf("command %q", got)
	}
	os.MkdirAll(filepath.Dir(self), 0o755)
	os.WriteFile(filepath.Join(filepath.Dir(self), "supervise-notify"), []byte("#!/bin/sh\n"), 0o755)
	if got := hookCommand(self); got != "'"+filepath.Join(filepath.Dir(self), "supervise-notify")+"' hook" {
		t.Errorf("with supervise-notify beside it: %q", got)
	}
}

// Hooks the user installed are used, never doubled.
func TestInstalledHooksWin(t *testing.T) {
	o := opts(t)
	os.MkdirAll(filepath.Join(o.Home, ".claude"), 0o700)
	os.WriteFile(filepath.Join(o.Home, ".claude", "settings.json"), []byte(`{"hooks":{"Stop":[{"hooks":[{"command":"supervise-notify hook"}]}]}}`), 0o600)
	plan, _, _ := Make([]string{"claude", "-p", "x"}, o)
	if len(plan.Files) != 0 || slices.ContainsFunc(plan.Argv, func(a string) bool { return strings.HasPrefix(a, "--settings") }) {
		t.Errorf("hooks added over the user's: %q %v", plan.Argv, plan.Files)
	}
	if plan.Template == nil {
		t.Error("no template")
	}
	os.MkdirAll(filepath.Join(o.Home, ".codex"), 0o700)
	os.WriteFile(filepath.Join(o.Home, ".codex", "hooks.json"), []byte(`{"hooks":{"Stop":[{"hooks":[{"command":"supervise notify hook"}]}]}}`), 0o600)
	if plan, _, _ := Make([]string{"codex", "exec", "x"}, o); plan.APIProxy {
		t.Error("codex with hooks installed: the proxy was turned on too")
	}
}

// Gemini's system settings: the real ones merged in, the hooks added
// after theirs; a state dir others may write means the proxy instead.
func TestGeminiSystemSettings(t *testing.T) {
	o := opts(t)
	os.Chmod(filepath.Dir(o.StateDir), 0o700)
	sys := filepath.Join(o.Home, "system.json")
	os.WriteFile(sys, []byte(`{"general":{"x":1},"hooks":{"AfterAgent":[{"hooks":[{"command":"theirs"}]}]}}`), 0o600)
	o.Getenv = func(k string) string {
		if k == "GEMINI_CLI_SYSTEM_SETTINGS_PATH" {
			return sys
		}
		return ""
	}
	if insecureParent(o.StateDir) != "" {
		t.Skipf("the test's temp dir is under %s, which others may write", insecureParent(o.StateDir))
	}
	plan, _, _ := Make([]string{"gemini", "-p", "x"}, o)
	var m map[string]any
	if err := json.Unmarshal(plan.Files[hooksFile], &m); err != nil {
		t.Fatalf("%v: %s (said %q)", err, plan.Files[hooksFile], plan.Said)
	}
	after := m["hooks"].(map[string]any)["AfterAgent"].([]any)
	if len(after) != 2 || m["general"] == nil || !strings.Contains(after[1].(map[string]any)["hooks"].([]any)[0].(map[string]any)["command"].(string), "notify hook") {
		t.Errorf("merged settings %s", plan.Files[hooksFile])
	}
	if !slices.Contains(plan.Env, "GEMINI_CLI_SYSTEM_SETTINGS_PATH="+filepath.Join(o.StateDir, hooksFile)) {
		t.Errorf("env %q", plan.Env)
	}
	os.Chmod(filepath.Dir(o.StateDir), 0o777)
	if plan, _, _ := Make([]string{"gemini", "-p", "x"}, o); !plan.APIProxy || plan.Files != nil {
		t.Errorf("state dir others may write: plan %+v, want the proxy", plan)
	}
	os.WriteFile(sys, []byte(`{ // a comment`), 0o600)
	os.Chmod(filepath.Dir(o.StateDir), 0o700)
	if plan, _, _ := Make([]string{"gemini", "-p", "x"}, o); !plan.APIProxy {
		t.Errorf("system settings not plain JSON: plan %+v, want the proxy (never replace settings it cannot merge)", plan)
	}
}

// Codex: the proxy, its URL in a private profile file written before each
// launch; a command with its own profile, or --api-proxy off, is left
// unseen and said so.
func TestCodexProxyProfile(t *testing.T) {
	o := opts(t)
	plan, _, _ := Make([]string{"codex", "exec", "x"}, o)
	if !plan.APIProxy || plan.Launch == nil {
		t.Fatalf("plan %+v", plan)
	}
	file := filepath.Join(o.Home, ".codex", codexProfileName(o.StateDir)+".config.toml")
	if err := plan.Launch([]string{"OPENAI_BASE_URL=http://127.0.0.1:9/secret/openai"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(file)
	fi, _ := os.Stat(file)
	if string(b) != "openai_base_url = \"http://127.0.0.1:9/secret/openai\"\n" || fi.Mode().Perm() != 0o600 {
		t.Errorf("profile %q mode %v", b, fi.Mode())
	}
	if err := plan.Launch([]string{"OPENAI_BASE_URL=http://x\"\n[evil]"}); err == nil {
		t.Error("a URL with a quote was written")
	}
	plan.Done()
	if _, err := os.Stat(file); !os.IsNotExist(err) {
		t.Errorf("Done left %s", file)
	}
	os.WriteFile(filepath.Join(o.Home, ".codex", "config.toml"), []byte("model_provider = \"mine\"\n[model_providers.mine]\nbase_url = \"x\"\n"), 0o600)
	plan, _, _ = Make([]string{"codex", "exec", "x"}, o)
	plan.Launch([]string{"OPENAI_BASE_URL=http://u"})
	if b, _ := os.ReadFile(file); string(b) != "[model_providers.\"mine\"]\nbase_url = \"http://u\"\n" {
		t.Errorf("own provider: %q", b)
	}
	if plan, _, _ := Make([]string{"codex", "exec", "-p", "work", "x"}, o); plan.APIProxy {
		t.Error("a command with its own profile got the proxy's")
	}
	o.ProxyOff = true
	if plan, _, _ := Make([]string{"codex", "exec", "x"}, o); plan.APIProxy || !strings.Contains(strings.Join(plan.Said, "\n"), "unseen") {
		t.Errorf("--api-proxy off: %+v", plan)
	}
}

// Adapt hands the user's own template of the same CLI what the first
// run gets; any other template stays theirs.
func TestAdapt(t *testing.T) {
	o := opts(t)
	o.Template = true
	plan, _, _ := Make([]string{"claude", "-p", "x"}, o)
	if plan.Template != nil {
		t.Error("a template was made over the user's")
	}
	got := plan.Adapt([]string{"claude", "-p", "-r", "{session}", "{message}"})
	if got[1] != "--settings="+filepath.Join(o.StateDir, hooksFile) {
		t.Errorf("adapted %q", got)
	}
	if got := plan.Adapt([]string{"my-resume", "{session}"}); !slices.Equal(got, []string{"my-resume", "{session}"}) {
		t.Errorf("another program's template changed: %q", got)
	}
}

func TestSaved(t *testing.T) {
	home := t.TempDir()
	if saved, known := claude.Saved(home, "abc"); saved || !known {
		t.Errorf("nothing written: saved %v known %v", saved, known)
	}
	os.MkdirAll(filepath.Join(home, ".claude", "projects", "-p"), 0o700)
	os.WriteFile(filepath.Join(home, ".claude", "projects", "-p", "abc.jsonl"), []byte("{}\n"), 0o600)
	if saved, _ := claude.Saved(home, "abc"); !saved {
		t.Error("written: not saved")
	}
	if _, known := claude.Saved(home, "../x"); known {
		t.Error("an id with a slash was looked up")
	}
	os.MkdirAll(filepath.Join(home, ".gemini", "tmp", "p", "chats"), 0o700)
	os.WriteFile(filepath.Join(home, ".gemini", "tmp", "p", "chats", "session-2026-12-07T03-40-db2a4e3b.jsonl"), []byte("{}\n"), 0o600)
	if saved, _ := gemini.Saved(home, "db2a4e3b-1111"); !saved {
		t.Error("gemini: not saved")
	}
	if saved, known := gemini.Saved(home, "proxy-abc"); saved || !known {
		t.Error("gemini: an id it never had")
	}
}

// The hooks a profile hands a CLI are the events its example wires by
// hand (examples/*/settings.json): one list, two ways to install it.
func TestHooksMatchExamples(t *testing.T) {
	for p, file := range map[*Profile]string{&claude: "claude-code/settings.json", &gemini: "gemini/settings.json"} {
		b, err := os.ReadFile(filepath.Join("..", "examples", file))
		if err != nil {
			t.Fatal(err)
		}
		var ex struct {
			Hooks map[string][]struct{ Matcher string }
		}
		if err := json.Unmarshal(b, &ex); err != nil {
			t.Fatal(err)
		}
		got := map[string]string{}
		for _, ev := range p.events {
			got[ev.name] = ev.matcher
		}
		want := map[string]string{}
		for name, groups := range ex.Hooks {
			want[name] = groups[0].Matcher
		}
		if len(got) != len(want) {
			t.Errorf("%s: profile hooks %v, example %v", p.Name, got, want)
		}
		for name, m := range want {
			if g, ok := got[name]; !ok || g != m {
				t.Errorf("%s: event %s: profile matcher %q (has %v), example %q", p.Name, name, g, ok, m)
			}
		}
	}
}
