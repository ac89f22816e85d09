package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/integration/mockapi"
)

// claudeCode is the real Claude Code as TestRealClaudeCode sets it up: the
// shipped hooks, the README's --resume-exec template, the mock Anthropic
// API on 127.0.0.1.
func claudeCode() realCLI {
	return realCLI{
		bin:      "claude",
		version:  "2.1.197",
		example:  "claude-code",
		install:  map[string]string{"claude-code/settings.json": ".claude/settings.json"},
		task:     []string{"claude", "-p"},
		template: "claude -p -r {session} {message}",
		mock:     mockapi.Anthropic,
		env: func(url string) []string {
			return []string{"ANTHROPIC_BASE_URL=" + url, "ANTHROPIC_API_KEY=sk-ant-mock",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_AUTOUPDATER=1", "DISABLE_TELEMETRY=1",
				"DISABLE_ERROR_REPORTING=1"}
		},
		setup: func(r *realEnv) {
			writeFile(r.t, filepath.Join(r.proj, ".claude", "settings.local.json"),
				`{"permissions":{"allow":["Bash"]}}`)
			trust, _ := json.Marshal(map[string]any{"projects": map[string]any{
				r.proj: map[string]any{"hasTrustDialogAccepted": true}}})
			writeFile(r.t, filepath.Join(r.home, ".claude.json"), string(trust))
		},
	}
}

// The real Claude Code, a one-shot task CLI under --resume-exec, passes
// `supervise chaos`: killed inside its Bash tool, each task is resumed by
// `claude -p -r`, the first resumed turn completes, the second is killed
// again inside its tool and parked. The command is the one
// docs/prove-your-agent.md gives. Claude Code runs its hooks in a process
// group of their own; the survivors check exempts those hooks in flight.
func TestChaosRealClaudeCode(t *testing.T) {
	if os.Getenv("SUPERVISE_LONG") == "" {
		t.Skip("four real Claude Code runs take 40 s or more: set SUPERVISE_LONG=1 (.ci/run does)")
	}
	t.Parallel()
	r := newRealEnv(t, claudeCode())
	r.answer(func(q mockapi.Request) mockapi.Reply {
		switch {
		case !q.Agent:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Title"}
		case q.ToolResult:
			return mockapi.Reply{Kind: mockapi.Text, Text: "Done."}
		case continuation(q):
			// The resumed turn checks the state with a tool too: a kill
			// point for the second kill.
			return mockapi.Reply{Kind: mockapi.Tool, Command: "cat chaos.txt"}
		}
		return mockapi.Reply{Kind: mockapi.Tool, Command: "echo task >> chaos.txt"}
	})
	logPath := filepath.Join(r.dir, "chaos.log")
	cmd := exec.Command(superviseBin, "chaos", "--json", "--at", "tool", "--kills", "3", "--seed", "15",
		"--timeout", "4m", "--log", logPath,
		"--resume-exec", r.cli.template, "--", "claude", "-p", realPrompt)
	cmd.Env = append(os.Environ(), r.vars...)
	cmd.Dir = r.proj
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	log, _ := os.ReadFile(logPath)
	var rep chaosJSON
	if jerr := json.Unmarshal(out.Bytes(), &rep); jerr != nil || err != nil || !rep.OK {
		t.Fatalf("supervise chaos against Claude Code: %v\nstdout:\n%s\nstderr:\n%s\nlog (tail):\n%s", err, out.String(), errb.String(), lastBytes(log, 6000))
	}
	if len(rep.Kills) != 3 || rep.Kills[2].Decision != "parked" || !rep.Kills[0].Completed {
		t.Errorf("kills: %+v", rep.Kills)
	}
	for _, k := range rep.Kills {
		if !strings.HasPrefix(k.At, "tool ") {
			t.Errorf("kill %d at %q, want inside a tool", k.Kill, k.At)
		}
	}
	// The tasks ran as two conversations (one per task), never a third:
	// no resume ran a task again as a new session.
	if n := r.freshStarts(); n != 2 {
		t.Errorf("%d conversations opened on the task, want 2 (one per task run)", n)
	}
	t.Logf("chaos against Claude Code:\n%s", out.String())
}

func lastBytes(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
