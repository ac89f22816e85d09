package main

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// TestLife runs the long-life row at a small size (2 000 turns over 100
// sessions) under a real supervise, built as the benchmark builds it, and
// checks that every turn was confirmed, both samples were read and the
// row was added. It asserts no memory bound: that is the benchmark's
// verdict at the size, not a property of a small run.
func TestLife(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc/PID/smaps")
	}
	root, err := moduleRoot()
	if err != nil {
		t.Fatal(err)
	}
	work := t.TempDir()
	b := &bench{work: work, ctx: context.Background(),
		cfg: config{lifeTurns: 2_000, lifeSessions: 100, lifeWorkers: 8}}
	defer b.runCleanup()
	b.supervise, b.agent = filepath.Join(work, "supervise"), filepath.Join(work, "agent")
	for out, pkg := range map[string]string{b.supervise: "./cmd/supervise", b.agent: "./bench/agent"} {
		cmd := exec.Command("go", "build", "-o", out, pkg)
		cmd.Dir, cmd.Env = root, append(os.Environ(), "CGO_ENABLED=0")
		if msg, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", pkg, err, msg)
		}
	}
	b.svs = []svBin{{"supervise", b.supervise}}
	o, err := b.lifeOne(b.svs[0], "long life")
	if err != nil {
		t.Fatal(err)
	}
	r := o.res
	if r.Turns != 2_000 || r.Errors != 0 || r.Markers != 3*2_000 || r.Sessions != 100 || r.Workers != 5 || !r.Phases {
		t.Errorf("result %+v, want 2000 turns, 6000 markers over 100 sessions from 5 workers, no error", r)
	}
	for name, s := range map[string]lifeSample{"tenth": o.tenth, "end": o.end} {
		if s.mem.rss <= 0 || s.mem.pss <= 0 || s.journal <= 0 || s.pages <= 0 || s.pages > s.journal || s.commits == 0 {
			t.Errorf("%s sample %+v: RSS, PSS, journal size, its pages in use (at most its size) and commits must all be read", name, s)
		}
	}
	if o.end.commits <= o.tenth.commits {
		t.Errorf("commits %d at the end, %d at 10%%: the rest of the turns committed nothing", o.end.commits, o.tenth.commits)
	}
	if len(b.rows) != 1 || !strings.Contains(b.rows[0].detail, "2000 turns") || b.rows[0].verdict == "" {
		t.Errorf("rows %+v, want one long-life row with a verdict", b.rows)
	}
}
