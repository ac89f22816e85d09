package integration

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cgroupChild is the child part of `supervise status --json` about cgroups.
type cgroupChild struct {
	PID      int    `json:"pid"`
	Run      int    `json:"run"`
	Cgroup   string `json:"cgroup"`
	OOMNamed bool   `json:"oom_named"`
}

func (e *env) cgroupChild() cgroupChild {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, superviseBin, "status", "--json", "--state-dir", e.stateDir).Output()
	if err != nil {
		e.t.Fatalf("supervise status: %v", err)
	}
	var st struct {
		Child cgroupChild `json:"child"`
	}
	if err := json.Unmarshal(out, &st); err != nil {
		e.t.Fatal(err)
	}
	return st.Child
}

// cgroupWhy is what supervise said at start about cgroups.
var cgroupWhy = regexp.MustCompile(`why="([^"]*)"`)

func procCgroup(pid int) string {
	b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cgroup")
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			return p
		}
	}
	return ""
}

// Where cgroup v2 is writable, each launch runs in a cgroup of its own
// (supervise-NAME-ID/run-N), escapees included, the cgroup of a dead
// run is removed and the next run's is made ahead; a clean stop leaves
// none; --cgroup off keeps the agent in supervise's cgroup.
func TestCgroupPerRun(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=grandchild; log up; hang", "TESTAGENT_SCRIPT_2=log up2; hang")
	sv := e.run("--backoff-initial", "10ms")
	up := e.waitLog(1, "up")
	c := e.cgroupChild()
	if c.Cgroup == "" {
		m := cgroupWhy.FindStringSubmatch(sv.stderr())
		e.stop(sv)
		if len(m) < 2 {
			t.Fatalf("no cgroup and no reason logged:\n%s", sv.stderr())
		}
		t.Skipf("supervise has no cgroup of its own on this machine: %s", m[1])
	}
	if !strings.HasSuffix(c.Cgroup, "/run-1") || !strings.Contains(c.Cgroup, "/supervise-state-") {
		t.Errorf("run 1's cgroup is %s, want .../supervise-NAME-ID/run-1 (NAME is the state dir's, state)", c.Cgroup)
	}
	if got := procCgroup(up.pid); !strings.HasSuffix(c.Cgroup, got) || got == "" {
		t.Errorf("the agent is in cgroup %q, status says %s", got, c.Cgroup)
	}
	var escapee int
	for _, ev := range e.events() {
		if ev.kind == "grandchild" {
			escapee, _ = strconv.Atoi(strings.Fields(ev.arg)[0])
		}
	}
	if escapee == 0 || procCgroup(escapee) != procCgroup(up.pid) {
		t.Errorf("setsid grandchild %d is in %q, not in the run's cgroup", escapee, procCgroup(escapee))
	}
	syscall.Kill(up.pid, syscall.SIGKILL)
	e.waitLog(2, "up2")
	if c2 := e.cgroupChild(); !strings.HasSuffix(c2.Cgroup, "/run-2") {
		t.Errorf("run 2's cgroup is %q", c2.Cgroup)
	}
	if escapee != 0 && alive(escapee) {
		t.Errorf("setsid grandchild %d outlived its run", escapee)
	}
	// Status was answered from the loop's wait: by then the dead run's
	// cgroup is removed, and the next run's is made ahead, off the path of
	// the next restart.
	if _, err := os.Stat(c.Cgroup); !os.IsNotExist(err) {
		t.Errorf("run 1's cgroup %s is still there: %v", c.Cgroup, err)
	}
	if fi, err := os.Stat(filepath.Join(filepath.Dir(c.Cgroup), "run-3")); err != nil || !fi.IsDir() {
		t.Errorf("run 3's cgroup is not made ahead while run 2 is up: %v", err)
	}
	e.stop(sv)
	if _, err := os.Stat(filepath.Dir(c.Cgroup)); !os.IsNotExist(err) {
		t.Errorf("the agent's cgroup %s outlived a clean stop: %v", filepath.Dir(c.Cgroup), err)
	}

	off := newEnv(t)
	off.set("TESTAGENT_SCRIPT=log up; hang")
	sv = off.run("--cgroup", "off")
	up = off.waitLog(1, "up")
	if c := off.cgroupChild(); c.Cgroup != "" {
		t.Errorf("--cgroup off: the run has cgroup %s", c.Cgroup)
	}
	if got, own := procCgroup(up.pid), procCgroup(os.Getpid()); got != own {
		t.Errorf("--cgroup off: the agent is in %s, supervise's tests in %s", got, own)
	}
	off.stop(sv)
}

// Where the memory controller is delegated, a death the kernel's OOM killer
// caused has reason oom, and the turn is resumed like any dirty death.
func TestOOMNamed(t *testing.T) {
	e := newEnv(t)
	e.set("TESTAGENT_SCRIPT_1=turn-begin s1 t1 load the dataset; barrier; listen",
		"TESTAGENT_SCRIPT_2=take-resumes; log took-all; hang")
	sv := e.run("--backoff-initial", "10ms")
	e.waitEvent(1, "listen")
	c := e.cgroupChild()
	if !c.OOMNamed {
		m := cgroupWhy.FindStringSubmatch(sv.stderr())
		e.stop(sv)
		if len(m) < 2 {
			t.Fatalf("OOM kills not counted and no reason logged:\n%s", sv.stderr())
		}
		t.Skipf("cannot name an OOM kill on this machine: %s", m[1])
	}
	// A memory limit on the agent's cgroup, then an allocation past it.
	parent := filepath.Dir(c.Cgroup)
	for file, v := range map[string]string{"memory.max": "64M", "memory.swap.max": "0"} {
		if err := os.WriteFile(filepath.Join(parent, file), []byte(v), 0o644); err != nil && file == "memory.max" {
			t.Fatal(err)
		}
	}
	f, err := os.OpenFile(e.fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString("alloc 512\n")
	f.Close()
	e.waitLog(2, "took-all")
	if r := e.status().run(t, 1); r.Reason != "oom" || !r.Dirty {
		t.Errorf("run 1: reason %q dirty %v, want oom", r.Reason, r.Dirty)
	}
	if msg := e.tookMessage(2, "s1"); !strings.Contains(msg, "OOM") {
		t.Errorf("continuation does not say OOM: %s", msg)
	}
	e.stop(sv)
}
