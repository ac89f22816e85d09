package child

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// ErrGone is returned when a process no longer exists or is no longer the
// process that was recorded (its pid was reused).
var ErrGone = errors.New("process is gone")

// StartTime returns the start time of pid in milliseconds since the epoch,
// the value gopsutil's CreateTime reports (read from /proc directly on
// Linux, through gopsutil elsewhere). Together with the pid it identifies a
// process across pid reuse.
func StartTime(ctx context.Context, pid int) (int64, error) {
	_ = ctx // reading /proc does not block
	return startTime(pid)
}

// Alive reports whether the process recorded as (pid, start) still runs: the
// pid exists, is not a zombie, and has the same start time.
func Alive(ctx context.Context, pid int, start int64) bool {
	if pid <= 0 {
		return false
	}
	st, err := readStat(pid)
	if err != nil || st.state == 'Z' || st.state == 'X' {
		return false
	}
	t, err := StartTime(ctx, pid)
	return err == nil && t == start
}

// BootID returns the kernel's boot id, which changes at every boot: a pid
// and start time recorded under another boot id name no living process.
func BootID() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return string(bytes.TrimSpace(b))
}

// stat is the part of /proc/<pid>/stat we use.
type stat struct {
	state byte
	ppid  int
	pgrp  int
}

// readStat parses /proc/<pid>/stat. The command name may contain spaces and
// parentheses, so fields are counted from the last ')'.
func readStat(pid int) (stat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return stat{}, ErrGone
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return stat{}, ErrGone
	}
	f := bytes.Fields(b[i+2:]) // state ppid pgrp session ...
	if len(f) < 3 || len(f[0]) != 1 {
		return stat{}, ErrGone
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	pgrp, err2 := strconv.Atoi(string(f[2]))
	if err1 != nil || err2 != nil {
		return stat{}, ErrGone
	}
	return stat{state: f[0][0], ppid: ppid, pgrp: pgrp}, nil
}

// ownChildren lists the children of this process: the ones it started and
// the orphans re-parented to it as a subreaper. It reads the per-thread
// children lists (cheap) and falls back to a scan of /proc.
func ownChildren() []int {
	self := os.Getpid()
	tasks, err := os.ReadDir("/proc/self/task")
	if err == nil {
		var out []int
		ok := true
		for _, t := range tasks {
			b, err := os.ReadFile(filepath.Join("/proc/self/task", t.Name(), "children"))
			if err != nil {
				if errors.Is(err, os.ErrNotExist) && t.Name() == strconv.Itoa(self) {
					ok = false // kernel without CONFIG_PROC_CHILDREN
					break
				}
				continue // thread exited meanwhile
			}
			for _, f := range bytes.Fields(b) {
				if pid, err := strconv.Atoi(string(f)); err == nil {
					out = append(out, pid)
				}
			}
		}
		if ok {
			return out
		}
	}
	var out []int
	for pid, st := range scanProc() {
		if st.ppid == self {
			out = append(out, pid)
		}
	}
	return out
}

// scanProc reads the stat of every process.
func scanProc() map[int]stat {
	ents, _ := os.ReadDir("/proc")
	m := make(map[int]stat, len(ents))
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if st, err := readStat(pid); err == nil {
			m[pid] = st
		}
	}
	return m
}

// descendants returns every live descendant of root, found by walking
// parent links in one snapshot of /proc.
func descendants(root int) []int {
	kids := map[int][]int{}
	for pid, st := range scanProc() {
		if st.state != 'Z' {
			kids[st.ppid] = append(kids[st.ppid], pid)
		}
	}
	var out []int
	queue := []int{root}
	seen := map[int]bool{root: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range kids[p] {
			if !seen[c] {
				seen[c] = true
				out = append(out, c)
				queue = append(queue, c)
			}
		}
	}
	return out
}

// KillTagged sends SIGKILL to every process (other than this one) whose
// environment contains an entry starting with tag, for example
// "SUPERVISE_TREE=3f2a9c.": the way a supervisor finds what is left of a
// previous instance's trees after its own kill -9, including descendants that
// left the process group or were re-parented to init. Each match is pinned
// with a pidfd before it is signalled, so a pid reused between the scan and
// the kill is never hit. It returns the pids it killed.
//
// This process and its ancestors are never killed, even when tagged: a
// shell left from an old tree may be the one starting the new supervisor.
func KillTagged(tag string) []int {
	needle := []byte(tag)
	spare := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !spare[pid]; {
		spare[pid] = true
		st, err := readStat(pid)
		if err != nil {
			break
		}
		pid = st.ppid
	}
	ents, _ := os.ReadDir("/proc")
	var killed []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || spare[pid] {
			continue
		}
		fd, err := unix.PidfdOpen(pid, 0)
		if err != nil {
			continue
		}
		// Read the environment after the pidfd pins the process: if the pid
		// was reused before the open, we read the new owner's environment.
		env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
		if err == nil && hasEnvPrefix(env, needle) {
			if unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0) == nil {
				killed = append(killed, pid)
			}
		}
		unix.Close(fd)
	}
	return killed
}

func hasEnvPrefix(environ, prefix []byte) bool {
	for len(environ) > 0 {
		i := bytes.IndexByte(environ, 0)
		entry := environ
		if i >= 0 {
			entry, environ = environ[:i], environ[i+1:]
		} else {
			environ = nil
		}
		if bytes.HasPrefix(entry, prefix) {
			return true
		}
	}
	return false
}

// KillRecorded kills the process recorded as (pid, start) and its process
// group and descendants, if it is still alive and still the same process. It
// is for a child of a previous supervisor instance: not our child, so we
// cannot reap it, but we wait up to timeout for it to disappear. It reports
// whether it found the process alive.
func KillRecorded(ctx context.Context, pid int, start int64, timeout time.Duration) (bool, error) {
	if pid <= 0 {
		return false, nil
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return false, nil // no such process
	}
	defer unix.Close(fd)
	// Verify identity after pinning: a pidfd cannot follow a reused pid.
	if !Alive(ctx, pid, start) {
		return false, nil
	}
	victims := descendants(pid)
	if st, err := readStat(pid); err == nil && st.pgrp == pid {
		// The live leader pins its group id, so this cannot hit a stranger.
		_ = unix.Kill(-pid, unix.SIGKILL)
	}
	if err := unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0); err != nil && err != unix.ESRCH {
		return true, err
	}
	for _, d := range victims {
		killPinned(ctx, d)
	}
	fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
	deadline := time.Now().Add(timeout)
	for {
		ms := int(time.Until(deadline) / time.Millisecond)
		if ms <= 0 {
			return true, errors.New("recorded process did not die after SIGKILL")
		}
		n, err := unix.Poll(fds, ms)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return true, err
		}
		if n > 0 {
			return true, nil
		}
	}
}

// killPinned sends SIGKILL to pid through a pidfd, checking that the process
// still has the start time it had when the pidfd was opened.
func killPinned(ctx context.Context, pid int) {
	start, err := StartTime(ctx, pid)
	if err != nil {
		return
	}
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return
	}
	defer unix.Close(fd)
	if t, err := StartTime(ctx, pid); err == nil && t == start {
		_ = unix.PidfdSendSignal(fd, unix.SIGKILL, nil, 0)
	}
}

// procStart reads a process's parent and its start time in clock ticks
// since boot (field 22 of /proc/<pid>/stat): cheaper than StartTime, and
// just as good for telling whether a pid still names the same process.
func procStart(pid int) (ppid int, start uint64, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, ErrGone
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, 0, ErrGone
	}
	f := bytes.Fields(b[i+2:]) // field 3 (state) is f[0], so field 22 is f[19]
	if len(f) < 20 || f[0][0] == 'Z' || f[0][0] == 'X' {
		return 0, 0, ErrGone
	}
	ppid, err1 := strconv.Atoi(string(f[1]))
	start, err2 := strconv.ParseUint(string(f[19]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, ErrGone
	}
	return ppid, start, nil
}

// Member is a verified member of a process tree: a pid and the start time
// (in ticks since boot) it had when it was verified.
type Member struct {
	PID   int
	Start uint64
}

// Still reports whether m's pid still names the process that was verified.
func (m Member) Still() bool {
	_, start, err := procStart(m.PID)
	return err == nil && start == m.Start
}

// InTree reports whether pid is root or a descendant of root, walking parent
// links. A process whose chain reaches this process instead (an orphan
// re-parented to the supervisor, a subreaper) counts only if its
// environment carries tag. The answer is re-checked against the start time
// of pid afterwards, so a pid reused during the walk is not admitted.
func InTree(pid, root int, tag string) (Member, bool) {
	_, start, err := procStart(pid)
	if err != nil {
		return Member{}, false
	}
	m := Member{PID: pid, Start: start}
	self := os.Getpid()
	p := pid
	for hops := 0; hops < 256; hops++ {
		if p == root {
			return m, m.Still()
		}
		ppid, _, err := procStart(p)
		if err != nil || ppid <= 1 {
			return m, false
		}
		if ppid == self {
			if tag == "" {
				return m, false
			}
			env, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
			return m, err == nil && hasEnvEntry(env, tag) && m.Still()
		}
		p = ppid
	}
	return m, false
}

// hasEnvEntry reports whether environ holds exactly the entry kv.
func hasEnvEntry(environ []byte, kv string) bool {
	for _, e := range bytes.Split(environ, []byte{0}) {
		if string(e) == kv {
			return true
		}
	}
	return false
}

// TreeRSS returns the resident memory, in bytes, of the process root and
// all its live descendants, read from /proc in one pass.
func TreeRSS(root int) uint64 {
	var total uint64
	for _, pid := range append([]int{root}, descendants(root)...) {
		total += rss(pid)
	}
	return total
}

// rss reads the resident set of one process from /proc/<pid>/statm.
func rss(pid int) uint64 {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/statm")
	if err != nil {
		return 0
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0
	}
	pages, err := strconv.ParseUint(string(f[1]), 10, 64)
	if err != nil {
		return 0
	}
	return pages * uint64(os.Getpagesize())
}
