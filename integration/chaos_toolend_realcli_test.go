package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Does a real CLI redo a completed tool after a resume? Each CLI runs the
// chaos task of TestChaosReal* killed right after its shell tool finished
// (--at tool-end: after the PostToolUse or AfterTool hook declared the
// effect, before the turn ended). The mock model asks for `echo task >>
// chaos.txt` once per task and, in a resumed turn, only for `cat
// chaos.txt`: a second "task" line in a task's run, or effect-once, would
// be the CLI itself running the finished tool call again. The answer per
// CLI is in docs/adapters.md ("Completed tools after a resume").
func TestChaosToolEndRealClaudeCode(t *testing.T) { chaosToolEndRealCLI(t, claudeCodeCLI()) }

func TestChaosToolEndRealCodex(t *testing.T) { chaosToolEndRealCLI(t, codexCLI()) }

func TestChaosToolEndRealGemini(t *testing.T) { chaosToolEndRealCLI(t, geminiCLI()) }

func chaosToolEndRealCLI(t *testing.T, cli realCLI) {
	if os.Getenv("SUPERVISE_LONG") == "" {
		t.Skip("four real CLI runs take 40 s or more: set SUPERVISE_LONG=1 (.ci/run does)")
	}
	t.Parallel()
	r, rep := chaosRealRun(t, cli, "tool-end")
	for try := 1; try < 3 && !rep.OK && r.lostSession; try++ {
		t.Logf("%s lost the session killed early (No conversation found): once more", cli.bin)
		r, rep = chaosRealRun(t, cli, "tool-end")
	}
	t.Logf("chaos --at tool-end against %s:\n%s", cli.bin, r.out)
	b, _ := os.ReadFile(filepath.Join(r.proj, "chaos.txt"))
	tasks := strings.Count(string(b), "task")
	// What the resumed turns sent the model: did the CLI keep the finished
	// tool call and its result in the conversation it resumed?
	kept, resumed := 0, 0
	for _, q := range r.api.AgentRequests() {
		if continuation(q) {
			resumed++
			if q.Contains("echo task") {
				kept++
			}
		}
	}
	t.Logf("%s: %d line(s) in chaos.txt for %d task run(s); %d of %d resumed requests still carried the finished `echo task` call; failed checks %v",
		cli.bin, tasks, 2, kept, resumed, rep.Failures)
	if !rep.OK {
		t.Fatalf("supervise chaos --at tool-end against %s: %v\n%s\nstderr:\n%s\nlog (tail):\n%s", cli.bin, r.err, r.out, r.stderr, lastBytes(r.log, 6000))
	}
	for _, k := range rep.Kills {
		if !strings.HasPrefix(k.At, "tool-end") {
			t.Errorf("kill %d at %q, want at a tool's end", k.Kill, k.At)
		}
	}
	if tasks != 2 {
		t.Errorf("chaos.txt has %d task lines for 2 task runs: a finished tool ran again\n%s", tasks, b)
	}
}
