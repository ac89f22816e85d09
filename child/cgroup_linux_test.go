//go:build linux && !supervise_portable

package child

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestOOMKillsParse(t *testing.T) {
	dir := t.TempDir()
	r := &RunCgroup{dir: dir, memory: true}
	if n, ok := r.OOMKills(); ok || n != 0 {
		t.Errorf("no memory.events: %d %v, want 0 false", n, ok)
	}
	os.WriteFile(filepath.Join(dir, "memory.events"), []byte("low 0\nhigh 0\nmax 12\noom 3\noom_kill 2\noom_group_kill 0\n"), 0o644)
	if n, ok := r.OOMKills(); !ok || n != 2 {
		t.Errorf("oom_kill 2: got %d %v", n, ok)
	}
	r.memory = false
	if _, ok := r.OOMKills(); ok {
		t.Error("counted OOM kills without the memory controller")
	}
	var none *RunCgroup
	if _, ok := none.OOMKills(); ok || none.Kill() != nil {
		t.Error("a nil run cgroup claims to count or kill")
	}
}

func TestUnescapeMountinfo(t *testing.T) {
	if got := unescape(`/sys/fs/cgroup/with\040space`); got != "/sys/fs/cgroup/with space" {
		t.Errorf("unescape: %q", got)
	}
}

// cgroupsOrSkip opens a private cgroup subtree, or skips saying exactly why
// this machine offers none.
func cgroupsOrSkip(t *testing.T) *Cgroups {
	t.Helper()
	c, why := OpenCgroups("childtest", fmt.Sprintf("%d", time.Now().UnixNano()))
	if c == nil {
		t.Skipf("no cgroup of our own here: %s", why)
	}
	t.Cleanup(c.Close)
	if why != "" {
		t.Logf("cgroups without OOM naming: %s", why)
	}
	return c
}

func ownCgroup(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// A launch is cloned straight into its run's cgroup, a setsid grandchild
// stays in it, and cgroup.kill alone takes both; Close removes the cgroup.
func TestRunCgroupKillsEscapee(t *testing.T) {
	c := cgroupsOrSkip(t)
	rc, err := c.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	r := newReaper(t)
	p, out := start(t, r, "setsid-grandchild-stay", Spec{Cgroup: rc})
	f := strings.Fields(readLine(t, out))
	gc, _ := strconv.Atoi(f[1])
	for _, pid := range []int{p.PID(), gc} {
		if cg := ownCgroup(pid); !strings.HasSuffix(cg, "/run-1") {
			t.Errorf("pid %d is in cgroup %q, want the run's", pid, cg)
		}
	}
	if err := rc.Kill(); err != nil { // cgroup.kill only: no group or tree walk
		t.Fatal(err)
	}
	wait(t, p)
	deadline := time.Now().Add(5 * time.Second)
	for !gone(gc) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if !gone(gc) {
		t.Errorf("setsid grandchild %d survived cgroup.kill", gc)
	}
	rc.Close()
	if _, err := os.Stat(rc.Dir()); !os.IsNotExist(err) {
		t.Errorf("run cgroup %s left behind: %v", rc.Dir(), err)
	}
}

// Without root and without delegation supervise gets no cgroup, and says
// why: the test binary runs OpenCgroups as nobody.
func TestOpenCgroupsUnprivileged(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to run the check as another user")
	}
	if _, err := ownCgroupDir(); err != nil {
		t.Skipf("no writable cgroup v2 even as root: %v", err)
	}
	dir := t.TempDir()
	os.Chmod(filepath.Dir(dir), 0o755) // t.TempDir makes both 0700: nobody must reach the binary
	os.Chmod(dir, 0o755)
	bin := filepath.Join(dir, "child.test")
	b, err := os.ReadFile(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin)
	cmd.Env = append(os.Environ(), "CHILD_HELPER=open-cgroups")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("running as nobody: %v\n%s", err, out)
	}
	got := strings.TrimSpace(string(out))
	if !strings.HasPrefix(got, "cgroups=false why=cannot write to supervise's cgroup") || !strings.Contains(got, "Delegate=yes") {
		t.Errorf("as nobody: %q, want no cgroups and the reason (not root, not delegated)", got)
	}
}

// The empty cgroup a supervise killed with -9 left behind is removed by the
// next one to start (rmdir only); the owner, if it lives, makes it again at
// its next launch.
func TestSweepEmptyCgroups(t *testing.T) {
	left := cgroupsOrSkip(t)
	rc, err := left.Run(1)
	if err != nil {
		t.Fatal(err)
	}
	rc.f.Close() // "killed": the run's cgroup is never removed
	old := time.Now().Add(-2 * staleRun)
	if err := os.Chtimes(rc.Dir(), old, old); err != nil {
		t.Skipf("cannot age a cgroup directory here: %v", err)
	}
	young, err := left.Run(2) // a run about to receive its clone: kept
	if err != nil {
		t.Fatal(err)
	}
	cgroupsOrSkip(t) // another supervise starts
	if _, err := os.Stat(rc.Dir()); !os.IsNotExist(err) {
		t.Errorf("stale empty run cgroup %s survived the sweep: %v", rc.Dir(), err)
	}
	if _, err := os.Stat(young.Dir()); err != nil {
		t.Errorf("a fresh run cgroup was swept: %v", err)
	}
	young.Close()
	cgroupsOrSkip(t) // now the whole agent cgroup is empty: swept
	if _, err := os.Stat(left.Dir()); !os.IsNotExist(err) {
		t.Fatalf("empty agent cgroup %s survived the sweep: %v", left.Dir(), err)
	}
	again, err := left.Run(3) // its owner was alive after all
	if err != nil {
		t.Fatalf("the owner could not launch again after the sweep: %v", err)
	}
	again.Close()
}
