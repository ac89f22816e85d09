package integration

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Does a real CLI redo a completed tool after a resume? Each CLI runs the
// chaos task of TestChaosReal* killed right after its shell tool finished
// (--at tool-end: after the PostToolUse or AfterTool hook declared the
// effect, before the turn ended). The mock model asks for `mktemp -p .
// task.XXXXXX` (a new file each run) once per task and, in a resumed turn,
// only for `ls`: a third task.* file, or effect-once, would be the CLI
// itself running the finished tool call again. The answer per
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
	files, _ := filepath.Glob(filepath.Join(r.proj, "task.*"))
	tasks := len(files)
	// What the resumed turns sent the model: did the CLI keep the finished
	// tool call and its result in the conversation it resumed?
	// The continuation names the effect's key, which holds the command
	// followed by "#": that mention is not the call. mktemp printed
	// "./task.XXXXXX": that is the call's result (a CLI's listing of the
	// project shows the file without "./").
	kept, withResult, resumed := 0, 0, 0
	for _, q := range r.api.AgentRequests() {
		if !continuation(q) {
			continue
		}
		resumed++
		if bytes.Count(q.Body, []byte(realChaosTask)) > bytes.Count(q.Body, []byte(realChaosTask+"#")) {
			kept++
		}
		for _, f := range files {
			if q.Contains("./" + filepath.Base(f)) {
				withResult++
				break
			}
		}
	}
	t.Logf("%s: %d task file(s) for %d task run(s); of %d resumed requests, %d still carried the finished task call and %d its result; failed checks %v",
		cli.bin, tasks, 2, resumed, kept, withResult, rep.Failures)
	if !rep.OK {
		t.Fatalf("supervise chaos --at tool-end against %s: %v\n%s\nstderr:\n%s\nlog (tail):\n%s", cli.bin, r.err, r.out, r.stderr, lastBytes(r.log, 6000))
	}
	for _, k := range rep.Kills {
		if !strings.HasPrefix(k.At, "tool-end") {
			t.Errorf("kill %d at %q, want at a tool's end", k.Kill, k.At)
		}
	}
	if tasks != 2 {
		t.Errorf("%d task files for 2 task runs: a finished tool ran again: %v", tasks, files)
	}
}
