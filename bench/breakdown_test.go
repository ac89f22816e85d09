package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/internal/trace"
)

// TestRestartBreakdown feeds a trace file of two restarts (and the boot's
// launch before the first kill, which must be left out) and checks each
// step's median (times in ns: each step a few hundred µs).
func TestRestartBreakdown(t *testing.T) {
	dir := t.TempDir()
	lines := []string{
		"cgroup_ready 50000", "fork_start 60000", "started 70000", // the first launch: before any kill
		"reaped 1400000", "death_seen 1450000", "decided 1600000", "committed 2600000", "cgroup_ready 2700000", "fork_start 2710000", "started 3700000",
		"reaped 10400000", "death_seen 10450000", "decided 10600000", "committed 11600000", "cgroup_ready 11700000", "fork_start 11710000", "started 12700000",
		"garbage line", "unknown_step 5000",
	}
	if err := os.WriteFile(filepath.Join(dir, "trace"), []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := &bench{}
	s := &subject{name: "supervise", dir: dir, kills: []kill{{t0: 1_000_000, exec: 3_600_000}, {t0: 10_000_000, exec: 12_600_000}}}
	b.restartBreakdown(s, nil, nil)
	want := map[string]string{
		"kill → reaped":              "0.400 ms median",
		"death seen → decided":       "0.150 ms median",
		"decided → committed":        "1.00 ms median",
		"fork start → child exec'd":  "0.890 ms median",
		"kill → child exec'd (the w": "2.60 ms median",
	}
	found := 0
	for _, r := range b.rows {
		for prefix, v := range want {
			if strings.HasPrefix(strings.TrimPrefix(r.what, "restart breakdown: "), prefix) {
				found++
				if r.value != v || !strings.Contains(r.detail, "n=2") {
					t.Errorf("%s: %q (%s), want %q with n=2", r.what, r.value, r.detail, v)
				}
			}
		}
	}
	if found != len(want) {
		t.Fatalf("found %d of %d rows; rows: %+v", found, len(want), b.rows)
	}
	if _, ok := trace.Parse("reaped"); !ok {
		t.Fatal("trace has no reaped step")
	}
}
