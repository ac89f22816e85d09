//go:build linux && !supervise_portable

package child

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// Cgroups is the cgroup v2 subtree one supervise runs its agents in:
// DIR/run-N, one per launch, under supervise's own cgroup. Each launch is
// cloned straight into its cgroup (clone3 CLONE_INTO_CGROUP), killed as a
// whole with cgroup.kill (no escapee survives, setsid or not), and, when
// the memory controller is delegated, its death is named oom when
// memory.events counts an oom_kill.
type Cgroups struct {
	dir    string // the agent's cgroup: .../supervise-NAME-ID
	memory bool   // memory.events exists in each run's cgroup
}

// OpenCgroups prepares the cgroup subtree for the supervised agent called
// name, distinguished by id (so agents of one name with different state
// dirs never share it). It returns nil and the reason when supervise
// cannot have cgroups of its own here: no cgroup v2 hierarchy, no write
// access (not root and not delegated), or a kernel without cgroup.kill.
func OpenCgroups(name, id string) (*Cgroups, string) {
	self, err := ownCgroupDir()
	if err != nil {
		return nil, err.Error()
	}
	dir := agentDir(self, name, id)
	memory := controllerAvailable(self, "memory")
	memoryWhy := ""
	if memory {
		if err := enableMemory(self); err != nil {
			memory, memoryWhy = false, err.Error()
		}
	} else {
		memoryWhy = "the memory controller is not available in " + self + " (cgroup.controllers: " + readTrim(filepath.Join(self, "cgroup.controllers")) + ")"
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return nil, fmt.Sprintf("cannot create %s: %v (cgroups need root or delegation, e.g. systemd Delegate=yes)", dir, err)
	}
	if memory {
		if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory"); err != nil {
			memory, memoryWhy = false, fmt.Sprintf("cannot enable memory in %s: %v", dir, err)
		}
	}
	c := &Cgroups{dir: dir, memory: memory}
	c.cleanStale()
	sweepEmpty(self, dir)
	// cgroup.kill (Linux 5.14) is what makes the cgroup worth having.
	probe := filepath.Join(dir, "probe")
	if err := os.Mkdir(probe, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		os.Remove(dir)
		return nil, fmt.Sprintf("cannot create a cgroup under %s: %v", dir, err)
	}
	_, err = os.Stat(filepath.Join(probe, "cgroup.kill"))
	os.Remove(probe)
	if err != nil {
		os.Remove(dir)
		return nil, "this kernel has no cgroup.kill (Linux 5.14 or later)"
	}
	if !memory {
		return c, "runs get their own cgroup, but an OOM kill cannot be named: " + memoryWhy
	}
	return c, ""
}

// agentDir is the agent's cgroup directory under supervise's own, self.
func agentDir(self, name, id string) string {
	return filepath.Join(self, "supervise-"+sanitize(name)+"-"+id)
}

// Dir returns the agent's cgroup directory.
func (c *Cgroups) Dir() string { return c.dir }

// Memory reports whether OOM kills can be counted.
func (c *Cgroups) Memory() bool { return c.memory }

// cleanStale kills and removes run cgroups a previous supervise left.
func (c *Cgroups) cleanStale() {
	ents, _ := os.ReadDir(c.dir)
	for _, e := range ents {
		if e.IsDir() && strings.HasPrefix(e.Name(), "run-") {
			r := &RunCgroup{dir: filepath.Join(c.dir, e.Name())}
			r.remove()
		}
	}
}

// sweepEmpty removes the empty cgroups other supervise processes left in
// self when they were killed before they could (a kill -9 of supervise
// leaves an empty supervise-NAME-ID/run-N behind). It only calls rmdir,
// which the kernel refuses for a cgroup with processes or children: a
// live agent's cgroup is never touched, and a live supervise whose empty
// cgroup this removed makes it again at its next launch (Run). A run
// cgroup younger than staleRun may be one about to receive its clone, and
// is left alone.
func sweepEmpty(self, keep string) {
	ents, _ := os.ReadDir(self)
	for _, e := range ents {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "supervise-") {
			continue
		}
		dir := filepath.Join(self, e.Name())
		if dir == keep {
			continue
		}
		runs, _ := os.ReadDir(dir)
		for _, r := range runs {
			if !r.IsDir() || !strings.HasPrefix(r.Name(), "run-") {
				continue
			}
			if info, err := r.Info(); err == nil && time.Since(info.ModTime()) > staleRun {
				os.Remove(filepath.Join(dir, r.Name()))
			}
		}
		os.Remove(dir)
	}
}

// staleRun is the age past which an empty run cgroup of another supervise
// is removed.
const staleRun = time.Minute

// Close removes the agent's cgroup if it is empty (best effort).
func (c *Cgroups) Close() { os.Remove(c.dir) }

// Run creates the cgroup of run n and opens it for the clone.
func (c *Cgroups) Run(n uint64) (*RunCgroup, error) {
	dir := filepath.Join(c.dir, "run-"+strconv.FormatUint(n, 10))
	err := os.Mkdir(dir, 0o755)
	if errors.Is(err, os.ErrNotExist) {
		// Swept as empty by another supervise between two runs: make it again.
		if err := os.Mkdir(c.dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if c.memory {
			if err := writeFile(filepath.Join(c.dir, "cgroup.subtree_control"), "+memory"); err != nil {
				return nil, err
			}
		}
		err = os.Mkdir(dir, 0o755)
	}
	if errors.Is(err, os.ErrExist) {
		(&RunCgroup{dir: dir}).remove()
		err = os.Mkdir(dir, 0o755)
		if err != nil {
			return nil, err
		}
	} else if err != nil {
		return nil, err
	}
	f, err := os.OpenFile(dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		os.Remove(dir)
		return nil, err
	}
	return &RunCgroup{dir: dir, f: f, memory: c.memory}, nil
}

// RunCgroup is the cgroup of one launch.
type RunCgroup struct {
	dir    string
	f      *os.File
	memory bool
}

// Dir returns the run's cgroup directory.
func (r *RunCgroup) Dir() string { return r.dir }

func (r *RunCgroup) apply(sys *syscall.SysProcAttr) {
	if r != nil && r.f != nil {
		sys.UseCgroupFD = true
		sys.CgroupFD = int(r.f.Fd())
	}
}

// Kill kills every process in the run's cgroup at once (cgroup.kill).
func (r *RunCgroup) Kill() error {
	if r == nil {
		return nil
	}
	return writeFile(filepath.Join(r.dir, "cgroup.kill"), "1")
}

// OOMKills returns the oom_kill count of the run's memory.events: how many
// of its processes the kernel's OOM killer killed. ok is false when the
// memory controller is not available.
func (r *RunCgroup) OOMKills() (n uint64, ok bool) {
	if r == nil || !r.memory {
		return 0, false
	}
	b, err := os.ReadFile(filepath.Join(r.dir, "memory.events"))
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if v, found := strings.CutPrefix(sc.Text(), "oom_kill "); found {
			n, _ = strconv.ParseUint(strings.TrimSpace(v), 10, 64)
			return n, true
		}
	}
	return 0, true
}

// Close kills whatever is left in the run's cgroup and removes it.
func (r *RunCgroup) Close() {
	if r == nil {
		return
	}
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	r.remove()
}

// remove kills the cgroup's processes and removes it once they are gone.
func (r *RunCgroup) remove() {
	deadline := time.Now().Add(sweepTimeout)
	for {
		err := unix.Rmdir(r.dir) // not os.Remove: it tries unlink(2) first, a wasted system call on the restart path
		if err == nil || errors.Is(err, os.ErrNotExist) || time.Now().After(deadline) {
			return
		}
		r.Kill()
		time.Sleep(5 * time.Millisecond)
	}
}

// ownCgroupDir finds supervise's own cgroup in a writable cgroup v2
// hierarchy.
func ownCgroupDir() (string, error) {
	b, err := os.ReadFile("/proc/self/cgroup")
	if err != nil {
		return "", fmt.Errorf("no cgroups: %v", err)
	}
	rel := ""
	for line := range strings.SplitSeq(string(b), "\n") {
		if p, ok := strings.CutPrefix(line, "0::"); ok {
			rel = p
		}
	}
	if rel == "" {
		return "", errors.New("no cgroup v2 hierarchy (only cgroup v1)")
	}
	mnt, root, err := cgroup2Mount()
	if err != nil {
		return "", err
	}
	sub, err := filepath.Rel(root, rel)
	if err != nil || strings.HasPrefix(sub, "..") {
		return "", fmt.Errorf("supervise's cgroup %s is outside the cgroup2 mount at %s", rel, mnt)
	}
	dir := filepath.Join(mnt, sub)
	if unix.Access(dir, unix.W_OK) != nil {
		return "", fmt.Errorf("cannot write to supervise's cgroup %s (not root, and not delegated: run under systemd with Delegate=yes)", dir)
	}
	return dir, nil
}

// cgroup2Mount returns the mount point of the cgroup2 hierarchy and the
// path inside the hierarchy it shows.
func cgroup2Mount() (mnt, root string, err error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return "", "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		pre, post, ok := strings.Cut(line, " - ")
		if !ok {
			continue
		}
		pf, qf := strings.Fields(pre), strings.Fields(post)
		if len(pf) >= 5 && len(qf) >= 1 && qf[0] == "cgroup2" {
			return unescape(pf[4]), unescape(pf[3]), nil
		}
	}
	return "", "", errors.New("no cgroup2 file system is mounted")
}

// unescape undoes mountinfo's octal escapes (\040 for a space).
func unescape(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func controllerAvailable(dir, name string) bool {
	return slices.Contains(strings.Fields(readTrim(filepath.Join(dir, "cgroup.controllers"))), name)
}

// enableMemory enables the memory controller for the children of dir. A
// cgroup other than the root with processes of its own cannot (the
// no-internal-processes rule): when supervise is alone there, as the main
// process of a systemd unit with Delegate=yes, it moves itself into a leaf
// "supervisor" first, as systemd's delegation notes advise.
func enableMemory(dir string) error {
	if slices.Contains(strings.Fields(readTrim(filepath.Join(dir, "cgroup.subtree_control"))), "memory") {
		return nil
	}
	err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory")
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EBUSY) {
		return fmt.Errorf("cannot enable memory in %s: %v", dir, err)
	}
	procs := strings.Fields(readTrim(filepath.Join(dir, "cgroup.procs")))
	if len(procs) != 1 || procs[0] != strconv.Itoa(os.Getpid()) {
		return fmt.Errorf("cannot enable memory in %s: other processes share supervise's cgroup", dir)
	}
	leaf := filepath.Join(dir, "supervisor")
	if err := os.Mkdir(leaf, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("cannot create %s: %v", leaf, err)
	}
	if err := writeFile(filepath.Join(leaf, "cgroup.procs"), strconv.Itoa(os.Getpid())); err != nil {
		return fmt.Errorf("cannot move supervise into %s: %v", leaf, err)
	}
	if err := writeFile(filepath.Join(dir, "cgroup.subtree_control"), "+memory"); err != nil {
		return fmt.Errorf("cannot enable memory in %s: %v", dir, err)
	}
	return nil
}

func readTrim(path string) string {
	b, _ := os.ReadFile(path)
	return strings.TrimSpace(string(b))
}

func writeFile(path, v string) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	_, err = f.WriteString(v)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// sanitize keeps a name usable as one cgroup directory name.
func sanitize(name string) string {
	return strings.Map(func(r rune) rune {
		if r == '/' || r == '\n' || r < 0x20 {
			return '_'
		}
		return r
	}, name)
}
