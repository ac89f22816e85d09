package main

import (
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// powerlossLine is what journal.TestPowerLossCrashImages logs when it
// passes.
var powerlossLine = regexp.MustCompile(`checked (\d+) crash images \((.*)\) in (\S+)`)

// powerloss runs the journal's crash-image enumerator (fault-matrix case
// 3, docs/chaos.md) and reports how many crash images it checked and how
// long it took. It needs the module's source (go test), as the harness
// does to build supervise.
func (b *bench) powerloss() error {
	progress("power loss: go test -run TestPowerLossCrashImages ./journal/")
	const what = "power-loss crash images checked (journal.TestPowerLossCrashImages, through the boot path)"
	cmd := exec.CommandContext(b.ctx, "go", "test", "-count=1", "-run", "^TestPowerLossCrashImages$", "-v", "./journal/")
	cmd.Env = append(os.Environ(), "SUPERVISE_LONG=")
	t := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(t)
	m := powerlossLine.FindSubmatch(out)
	if err != nil || m == nil {
		b.add(row{what, "journal", "failed", firstLines(string(out), 3), "≥ 1 000 images, no violation", "**missed**"})
		return fmt.Errorf("go test: %v", err)
	}
	n, _ := strconv.Atoi(string(m[1]))
	b.add(row{what, "journal", fmt.Sprintf("%d images", n),
		fmt.Sprintf("checked in %s (go test %s with the build); %s", m[3], wall.Round(100*time.Millisecond), m[2]),
		"≥ 1 000 images, no violation", metMissed(n >= 1000)})
	return nil
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(strings.TrimSpace(s), "\n", n+1)
	return strings.Join(lines[:min(n, len(lines))], "; ")
}
