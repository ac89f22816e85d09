package child

import (
	"bytes"
	"context"
	"errors"
	"os"
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

// stat is the part of /proc/<pid>/stat we use.
type stat struct {
	state byte
	ppid  int
	pgrp  int
}

// descendants returns every live descendant of root, found by walking
// parent links in one snapshot of the process table.
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

// spared returns this process and its ancestors: never killed by a tag
// sweep, even when tagged, since a shell left from an old tree may be the
// one that started this supervisor.
func spared() map[int]bool {
	spare := map[int]bool{}
	for pid := os.Getpid(); pid > 1 && !spare[pid]; {
		spare[pid] = true
		st, err := readStat(pid)
		if err != nil {
			break
		}
		pid = st.ppid
	}
	return spare
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

// Member is a verified member of a process tree: a pid and the start time
// it had when it was verified (in the process table's own unit: clock
// ticks since boot on Linux, microseconds since the epoch on macOS).
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
			env, err := environ(pid)
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
// all its live descendants.
func TreeRSS(root int) uint64 {
	var total uint64
	for _, pid := range append([]int{root}, descendants(root)...) {
		total += rss(pid)
	}
	return total
}
