// Command limitprobe runs one pinned agent CLI headless against a mock API
// that answers every agent-loop request with a usage or rate limit, and
// reports what the CLI did: its exit code, how long it ran, every request
// it sent (when), and its exact stdout and stderr, written as files for
// fixtures. A tool for measuring, not used by the tests.
//
//	go run ./integration/mockapi/cmd/limitprobe -cli claude -answer usage -reset 90s -out /tmp/probe
//
// -answer usage is the provider's usage limit (mockapi.UsageLimit), limit
// its short rate limit (mockapi.Limit) with retry hints of -reset. The
// limit lifts at -reset (the mock then answers with text), so a CLI that
// waits it out succeeds. The CLI is killed after -cap.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

func main() {
	cli := flag.String("cli", "claude", "claude|codex|gemini")
	answer := flag.String("answer", "usage", "usage|limit")
	resetIn := flag.Duration("reset", 90*time.Second, "when the limit lifts")
	capD := flag.Duration("cap", 6*time.Minute, "kill the CLI after this")
	out := flag.String("out", "", "directory for stdout, stderr and report.json")
	bin := flag.String("bin", "integration/realcli/node_modules/.bin", "the CLIs' directory")
	status := flag.Int("status", 0, "-answer limit: the HTTP status (default 429; 529 is Anthropic's overloaded)")
	var extra envFlag
	flag.Var(&extra, "env", "KEY=VALUE for the CLI's environment, after the defaults (repeatable; KEY= unsets in effect)")
	flag.Parse()
	extraEnv = extra
	if err := run(*cli, *answer, *resetIn, *capD, *out, *bin, *status); err != nil {
		fmt.Fprintln(os.Stderr, "limitprobe:", err)
		os.Exit(1)
	}
}

// envFlag collects -env values.
type envFlag []string

func (e *envFlag) String() string     { return strings.Join(*e, " ") }
func (e *envFlag) Set(v string) error { *e = append(*e, v); return nil }

// extraEnv is -env's, appended to the CLI's environment last.
var extraEnv []string

type report struct {
	CLI, Answer     string
	ResetIn         string
	Started, Reset  time.Time // the CLI's start, the limit's lift
	ExitCode        int
	Signal          string `json:",omitempty"`
	Seconds         float64
	Killed          bool // at the cap
	Requests        []string
	AgentRequests   int
	LimitedRequests int
	Other           []string
	Hooks           []json.RawMessage `json:",omitempty"` // Claude Code's hook payloads, in order
}

func run(cli, answer string, resetIn, capD time.Duration, out, bin string, status int) error {
	bin, _ = filepath.Abs(bin)
	dir, err := os.MkdirTemp("", "limitprobe")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	home, proj := filepath.Join(dir, "home"), filepath.Join(dir, "project")
	os.MkdirAll(home, 0o700)
	os.MkdirAll(proj, 0o700)
	start := time.Now()
	reset := start.Add(resetIn)
	var limited atomic.Int64
	script := func(r mockapi.Request) mockapi.Reply {
		if r.Agent && r.Time.Before(reset) {
			limited.Add(1)
			if answer == "usage" {
				return mockapi.Reply{Kind: mockapi.UsageLimit, Reset: reset}
			}
			return mockapi.Reply{Kind: mockapi.Limit, Status: status, RetryAfter: time.Until(reset)}
		}
		return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
	}
	var api *mockapi.Server
	env := []string{"HOME=" + home, "PATH=" + bin + ":" + os.Getenv("PATH"),
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_CACHE_HOME=" + filepath.Join(home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
		"HTTP_PROXY=", "HTTPS_PROXY=", "http_proxy=", "https_proxy=", "ALL_PROXY=", "NO_PROXY=127.0.0.1,localhost",
		"no_proxy=127.0.0.1,localhost", "TERM=dumb", "NO_COLOR=1", "TMPDIR=" + dir}
	var argv []string
	const prompt = "Say hello."
	switch cli {
	case "claude":
		api = mockapi.Anthropic(script)
		env = append(env, "ANTHROPIC_BASE_URL="+api.URL(), "ANTHROPIC_API_KEY=sk-ant-mock",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
			"DISABLE_ERROR_REPORTING=1")
		// Every hook event's payload, appended to hooks.jsonl: what a
		// StopFailure says of the limit.
		hook := []any{map[string]any{"hooks": []any{map[string]any{"type": "command",
			"command": `cat >> "$HOME/hooks.jsonl"; echo >> "$HOME/hooks.jsonl"`, "timeout": 10}}}}
		hooks := map[string]any{}
		for _, ev := range []string{"SessionStart", "UserPromptSubmit", "Stop", "StopFailure", "SessionEnd"} {
			hooks[ev] = hook
		}
		hj, _ := json.Marshal(map[string]any{"hooks": hooks})
		os.MkdirAll(filepath.Join(home, ".claude"), 0o700)
		os.WriteFile(filepath.Join(home, ".claude", "settings.json"), hj, 0o600)
		trust, _ := json.Marshal(map[string]any{"projects": map[string]any{proj: map[string]any{"hasTrustDialogAccepted": true}}})
		os.WriteFile(filepath.Join(home, ".claude.json"), trust, 0o600)
		argv = []string{"claude", "-p", prompt}
	case "codex":
		api = mockapi.OpenAI(script)
		env = append(env, "MOCK_OPENAI_API_KEY=sk-mock", "OPENAI_API_KEY=", "RUST_LOG=warn")
		var b strings.Builder
		fmt.Fprintf(&b, "model = \"gpt-mock\"\nmodel_provider = \"mock\"\ncheck_for_update_on_startup = false\n\n")
		fmt.Fprintf(&b, "[model_providers.mock]\nname = \"mock\"\nbase_url = %q\nwire_api = \"responses\"\nenv_key = \"MOCK_OPENAI_API_KEY\"\n\n", api.URL()+"/v1")
		fmt.Fprintf(&b, "[analytics]\nenabled = false\n\n[projects.%q]\ntrust_level = \"trusted\"\n", proj)
		os.MkdirAll(filepath.Join(home, ".codex"), 0o700)
		os.WriteFile(filepath.Join(home, ".codex", "config.toml"), []byte(b.String()), 0o600)
		os.MkdirAll(filepath.Join(proj, ".codex"), 0o700)
		os.WriteFile(filepath.Join(proj, ".codex", "config.toml"), []byte("[features]\nplugins = false\nremote_plugin = false\napps = false\nplugin_sharing = false\nin_app_updates = false\n"), 0o600)
		exec.Command("git", "init", "-q", proj).Run()
		argv = []string{"codex", "exec", prompt}
	case "gemini":
		api = mockapi.Gemini(script)
		env = append(env, "GEMINI_API_KEY=mock", "GOOGLE_GEMINI_BASE_URL="+api.URL(), "GOOGLE_API_KEY=",
			"GOOGLE_GENAI_USE_VERTEXAI=", "GOOGLE_CLOUD_PROJECT=", "GEMINI_CLI_TRUST_WORKSPACE=true")
		settings, _ := json.Marshal(map[string]any{
			"security": map[string]any{"auth": map[string]any{"selectedType": "gemini-api-key"}},
			"privacy":  map[string]any{"usageStatisticsEnabled": false}, "telemetry": map[string]any{"enabled": false}})
		os.MkdirAll(filepath.Join(home, ".gemini"), 0o700)
		os.WriteFile(filepath.Join(home, ".gemini", "settings.json"), settings, 0o600)
		argv = []string{"gemini", "-p", prompt}
	default:
		return fmt.Errorf("unknown -cli %q", cli)
	}
	defer api.Close()
	ctx, cancel := context.WithTimeout(context.Background(), capD)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, argv[0]), argv[1:]...)
	cmd.Dir, cmd.Env = proj, append(env, extraEnv...)
	// Its own process group, killed whole at the cap: Codex's node wrapper
	// leaves the native binary behind, holding the output pipes.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Stdin = nil
	t0 := time.Now()
	err = cmd.Run()
	rep := report{CLI: cli, Answer: answer, ResetIn: resetIn.String(), Started: t0.UTC(), Reset: reset.UTC(), Seconds: time.Since(t0).Seconds(), Killed: ctx.Err() != nil}
	if cmd.ProcessState != nil {
		rep.ExitCode = cmd.ProcessState.ExitCode()
		if ws, ok := cmd.ProcessState.Sys().(interface{ Signaled() bool }); ok && ws.Signaled() {
			rep.Signal = cmd.ProcessState.String()
		}
	} else if err != nil {
		return err
	}
	for _, r := range api.Requests() {
		rep.Requests = append(rep.Requests, fmt.Sprintf("+%.1fs %s agent=%v", r.Time.Sub(t0).Seconds(), r.Path, r.Agent))
		if r.Agent {
			rep.AgentRequests++
		}
	}
	rep.LimitedRequests = int(limited.Load())
	rep.Other = api.Other()
	if b, err := os.ReadFile(filepath.Join(home, "hooks.jsonl")); err == nil {
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			if l != "" {
				rep.Hooks = append(rep.Hooks, json.RawMessage(l))
			}
		}
	}
	j, _ := json.MarshalIndent(rep, "", "  ")
	fmt.Printf("%s\n--- stdout\n%s--- stderr\n%s", j, stdout.Bytes(), stderr.Bytes())
	if out != "" {
		os.MkdirAll(out, 0o755)
		os.WriteFile(filepath.Join(out, "stdout"), stdout.Bytes(), 0o644)
		os.WriteFile(filepath.Join(out, "stderr"), stderr.Bytes(), 0o644)
		os.WriteFile(filepath.Join(out, "report.json"), j, 0o644)
	}
	return nil
}
