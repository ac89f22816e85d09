package integration

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// Issue 46 B8: the agent's stderr reaches supervise's stderr, where its
// log goes. A forged text record, a forged JSON record and raw escape
// sequences must not be taken for supervise's: in text each agent line
// begins "agent[RUN] " with its control characters escaped; with
// --log-format json each is a record of its own whose "line" holds it.
// The agent's stdout is its data, passed through untouched.
func TestAgentLinesFramed(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	script := filepath.Join(e.dir, "forge.py")
	writeFile(t, script, `import sys
print('time=2026-01-01T00:00:00Z level=INFO msg="session resumed by hand" session=s1', file=sys.stderr)
print('{"time":"2026-01-01T00:00:00Z","level":"INFO","msg":"session resumed by hand"}', file=sys.stderr)
print('\x1b[2J\x1b[Hcleared', file=sys.stderr)
print('data on stdout {"level":"INFO"}')
`)
	for _, format := range []string{"text", "json"} {
		dir := filepath.Join(e.dir, format)
		code, out, errs := superviseCmd(t, []string{"SUPERVISE_STATE_DIR="}, "run", "--restart", "never", "--log-format", format,
			"--state-dir", dir, "--", "python3", script)
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", format, code, errs)
		}
		if out != "data on stdout {\"level\":\"INFO\"}\n" {
			t.Errorf("%s: the agent's stdout was changed: %q", format, out)
		}
		if strings.Contains(errs, "\x1b") {
			t.Errorf("%s: a raw ESC reached supervise's stderr", format)
		}
		agent := 0
		for _, l := range strings.Split(strings.TrimSpace(errs), "\n") {
			switch format {
			case "text":
				if strings.Contains(l, "session resumed by hand") || strings.Contains(l, "cleared") {
					agent++
					if !strings.HasPrefix(l, "agent[1] ") {
						t.Errorf("text: an agent line not framed: %q", l)
					}
				}
			case "json":
				var rec map[string]any
				if err := json.Unmarshal([]byte(l), &rec); err != nil {
					t.Errorf("json: a line of supervise's stderr is no JSON record: %q", l)
					continue
				}
				if rec["msg"] == "session resumed by hand" {
					t.Errorf("json: a forged record passed as supervise's: %q", l)
				}
				if line, _ := rec["line"].(string); rec["msg"] == "agent output" {
					agent++
					if rec["stream"] != "stderr" || rec["run"] != float64(1) || line == "" {
						t.Errorf("json: agent record %q", l)
					}
				}
			}
		}
		if agent != 3 {
			t.Errorf("%s: %d agent lines framed, want 3:\n%s", format, agent, errs)
		}
	}
}
