package main

import (
	"os/exec"
	"strings"
	"testing"
)

// TestLean keeps supervise-notify lean: each of these packages adds its
// package initialisation (the metrics library's reads /proc and the
// cgroup files; net/http builds its tables) to every hook call.
func TestLean(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := map[string]bool{}
	for _, p := range strings.Fields(string(out)) {
		deps[p] = true
	}
	if !deps["github.com/supervise-dev/supervise/cmd/internal/notifycmd"] {
		t.Fatalf("supervise-notify does not link cmd/internal/notifycmd; deps: %s", out)
	}
	for _, p := range []string{
		"net/http",
		"github.com/VictoriaMetrics/metrics",
		"github.com/supervise-dev/supervise/supervisor",
		"github.com/supervise-dev/supervise/apiproxy",
		"github.com/supervise-dev/supervise/runflags",
		"runtime/metrics",
	} {
		if deps[p] {
			t.Errorf("supervise-notify links %s", p)
		}
	}
}
