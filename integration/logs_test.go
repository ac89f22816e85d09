package integration

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// supervise logs: a line the agent wrote on stdout and one on stderr are
// kept with their run and stream, and still passed through; 40 MiB of
// output leave at most --log-keep (16 MiB by default) kept, in two files.
func TestLogsKeepsAndBounds(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	// The test agent's sh writes to its stderr: its stdout is /proc/$PPID/fd/1.
	e.set(`TESTAGENT_SCRIPT_1=sh echo out-line-1 > /proc/$PPID/fd/1; say err-line-1; exit 3`,
		`TESTAGENT_SCRIPT_2=sh head -c 41943040 /dev/zero | tr '\0' x | fold -w 1000 > /proc/$PPID/fd/1; log big; listen`)
	sv := e.run("--backoff-initial", "10ms")
	e.waitLog(2, "big")
	out, code := e.cli("logs", "--state-dir", e.stateDir, "-n", "0")
	if code != 0 {
		t.Fatalf("supervise logs: %d", code)
	}
	if !strings.Contains(sv.stderr(), "err-line-1") {
		t.Error("stderr was not passed through")
	}
	var size int64
	for _, name := range []string{"agent.log", "agent.log.1"} {
		if fi, err := os.Stat(filepath.Join(e.stateDir, name)); err == nil {
			size += fi.Size()
		}
	}
	if size == 0 || size > 24<<20 {
		t.Errorf("%d bytes of logs kept after 40 MiB of output, want some and at most 24 MiB", size)
	}
	// The first run's lines rotated away with the 40 MiB; run 2's last
	// lines are kept.
	if !strings.Contains(out, " run=2 stdout: xxxx") {
		t.Errorf("run 2's output not in supervise logs:\n%.400s", out)
	}
	e.stop(sv)
	// A fresh agent: both streams' lines, with their run.
	e2 := newEnv(t)
	e2.set(`TESTAGENT_SCRIPT=sh echo out-line-1 > /proc/$PPID/fd/1; say err-line-1; log said; listen`)
	sv2 := e2.run()
	e2.waitLog(1, "said")
	waitFor(t, 10*time.Second, "both lines in supervise logs", func() bool {
		out, _ := e2.cli("logs", "--state-dir", e2.stateDir)
		return strings.Contains(out, " run=1 stdout: out-line-1") && strings.Contains(out, " run=1 stderr: err-line-1")
	})
	e2.stop(sv2)
}
