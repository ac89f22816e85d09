package child

import (
	"context"
	"os"
	"os/exec"
	"testing"

	"github.com/shirou/gopsutil/v4/host"
	"github.com/shirou/gopsutil/v4/process"
)

// TestStartTimeMatchesGopsutil: the start time read from /proc is the value
// gopsutil's CreateTime gave before, so pids and start times recorded in a
// journal by an earlier supervise still identify the same processes (in a
// container, within the second gopsutil's own estimate wobbled by).
func TestStartTimeMatchesGopsutil(t *testing.T) {
	// In a docker or lxc guest gopsutil derives the boot time from
	// /proc/uptime and the clock, truncated to the second: within 1 s of
	// btime, and not stable from one process to the next.
	var slack int64
	if sys, role, _ := host.Virtualization(); role == "guest" && (sys == "lxc" || sys == "docker") {
		slack = 1000
	}
	cmd := exec.Command("sleep", "5")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { cmd.Process.Kill(); cmd.Wait() }()
	for _, pid := range []int{os.Getpid(), cmd.Process.Pid, 1} {
		got, err := StartTime(context.Background(), pid)
		if err != nil {
			t.Fatalf("pid %d: %v", pid, err)
		}
		p, err := process.NewProcess(int32(pid))
		if err != nil {
			t.Fatal(err)
		}
		want, err := p.CreateTime()
		if err != nil {
			t.Fatal(err)
		}
		if d := got - want; d < -slack || d > slack {
			t.Errorf("pid %d: StartTime %d, gopsutil CreateTime %d", pid, got, want)
		}
	}
	if _, err := StartTime(context.Background(), 1<<30); err != ErrGone {
		t.Errorf("absent pid: err %v, want ErrGone", err)
	}
}
