package child

import (
	"bytes"
	"os"
	"strconv"
	"sync"
)

// BootID returns the kernel's boot id, which changes at every boot: a pid
// and start time recorded under another boot id name no living process.
func BootID() string { return bootID() }

// bootID reads the id once: it cannot change while this process lives (a
// reboot ends it), and every launch's commit records it.
var bootID = sync.OnceValue(func() string {
	b, _ := os.ReadFile("/proc/sys/kernel/random/boot_id")
	return string(bytes.TrimSpace(b))
})

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

// environ returns the environment of pid, entries separated by NUL bytes.
func environ(pid int) ([]byte, error) {
	return os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
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
