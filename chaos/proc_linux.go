package chaos

import (
	"bytes"
	"os"
	"path"
	"strconv"
	"strings"
	"syscall"

	"golang.org/x/sys/unix"
)

// proc is one process found by a scan of /proc.
type proc struct {
	pid   int
	ppid  int
	start uint64 // field 22 of /proc/PID/stat: with pid, the process's identity
	pgrp  int
	sid   int
	comm  string
	tag   string // its SUPERVISE_TREE= entry
}

func (p proc) String() string { return strconv.Itoa(p.pid) + " (" + p.comm + ")" }

// statOf reads /proc/PID/stat; ok is false for a process gone or a zombie.
func statOf(pid int) (p proc, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return p, false
	}
	// comm is in parentheses and may hold anything: split at the last ')'.
	i, j := bytes.IndexByte(b, '('), bytes.LastIndexByte(b, ')')
	if i < 0 || j < i {
		return p, false
	}
	f := strings.Fields(string(b[j+1:]))
	if len(f) < 20 || f[0] == "Z" || f[0] == "X" {
		return p, false
	}
	p.pid = pid
	p.comm = string(b[i+1 : j])
	p.ppid, _ = strconv.Atoi(f[1])
	p.pgrp, _ = strconv.Atoi(f[2])
	p.sid, _ = strconv.Atoi(f[3])
	p.start, _ = strconv.ParseUint(f[19], 10, 64)
	return p, true
}

// walkTree lists leader's live descendants (leader not among them), read
// through /proc/PID/task/TID/children: a few files, fast enough to take
// just before a kill. Taken after it, a scan races supervise's reaper,
// which kills the dead leader's re-parented descendants as soon as it
// reaps the leader.
func walkTree(leader int) []proc {
	var out []proc
	seen := map[int]bool{leader: true}
	queue := []int{leader}
	for len(queue) > 0 && len(seen) < 4096 {
		pid := queue[0]
		queue = queue[1:]
		tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
		for _, task := range tasks {
			b, _ := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
			for _, f := range strings.Fields(string(b)) {
				c, err := strconv.Atoi(f)
				if err != nil || seen[c] {
					continue
				}
				seen[c] = true
				if p, ok := statOf(c); ok {
					out = append(out, p)
					queue = append(queue, c)
				}
			}
		}
	}
	return out
}

// scanTree lists the live processes whose environment holds an entry that
// starts with prefix (SUPERVISE_TREE=<tree>. for every run of a state dir,
// or the exact entry of one run when exact is set).
func scanTree(prefix string, exact bool) []proc {
	ents, _ := os.ReadDir("/proc")
	self := os.Getpid()
	var out []proc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		env, err := os.ReadFile("/proc/" + e.Name() + "/environ")
		if err != nil {
			continue
		}
		tag := ""
		for _, kv := range bytes.Split(env, []byte{0}) {
			if bytes.HasPrefix(kv, []byte(prefix)) && (!exact || len(kv) == len(prefix)) {
				tag = string(kv)
				break
			}
		}
		if tag == "" {
			continue
		}
		if p, ok := statOf(pid); ok {
			p.tag = tag
			out = append(out, p)
		}
	}
	return out
}

// notifyClient reports whether p is `supervise notify ...` or
// `supervise-notify ...` (the same client, the shipped hooks' command): an
// agent hook sending a marker, which ends by itself once supervise
// answers.
func (p proc) notifyClient() bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(p.pid) + "/cmdline")
	if err != nil {
		return false
	}
	return isNotifyClient(strings.Split(string(b), "\x00"))
}

// isNotifyClient reports whether the argv args runs the notify client.
func isNotifyClient(args []string) bool {
	if len(args) == 0 {
		return false
	}
	switch path.Base(args[0]) {
	case "supervise":
		return len(args) > 1 && args[1] == "notify"
	case "supervise-notify":
		return true
	}
	return false
}

// alive reports whether p is still the same live process.
func (p proc) alive() bool {
	q, ok := statOf(p.pid)
	return ok && q.start == p.start
}

// target is the agent process a kill is aimed at, pinned by a pidfd so a
// reused pid is never signalled.
type target struct {
	pid int
	fd  int
}

// pin opens a pidfd for pid and checks that it is still the process that
// started at start (child.StartTime's clock), so a pid reused between the
// launch and now is never pinned.
func pin(pid int, check func() bool) (*target, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, err
	}
	if !check() {
		unix.Close(fd)
		return nil, unix.ESRCH
	}
	return &target{pid: pid, fd: fd}, nil
}

// kill sends SIGKILL to the pinned process alone: a crash, not a stop.
func (t *target) kill() error { return unix.PidfdSendSignal(t.fd, unix.SIGKILL, nil, 0) }

func (t *target) close() { unix.Close(t.fd) }

// superviseAttr has the kernel send supervise SIGTERM when the harness
// dies, so it stops the agent cleanly.
func superviseAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
