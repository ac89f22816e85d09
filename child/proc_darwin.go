package child

import (
	"context"
	"strings"

	"github.com/shirou/gopsutil/v4/process"
	"golang.org/x/sys/unix"
)

// The process table on macOS comes from sysctl(KERN_PROC), the source
// gopsutil reads too: one call lists every process with its parent, group,
// state and start time. gopsutil's own Status runs ps(1), far too slow for
// the reaper, so the kinfo_proc records are read here directly.

// BootID returns the kernel's boot session UUID, which changes at every
// boot: a pid and start time recorded under another boot id name no living
// process.
func BootID() string {
	id, _ := unix.Sysctl("kern.bootsessionuuid")
	return strings.TrimSpace(id)
}

// Process states of kinfo_proc's p_stat (<sys/proc.h>).
const (
	sidl   = 1
	srun   = 2
	ssleep = 3
	sstop  = 4
	szomb  = 5
)

func statOf(k *unix.KinfoProc) stat {
	st := stat{ppid: int(k.Eproc.Ppid), pgrp: int(k.Eproc.Pgid)}
	switch k.Proc.P_stat {
	case szomb:
		st.state = 'Z'
	case sstop:
		st.state = 'T'
	case srun, sidl:
		st.state = 'R'
	default:
		st.state = 'S'
	}
	return st
}

// readStat reads one process's state, parent and group.
func readStat(pid int) (stat, error) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(k.Proc.P_pid) != pid {
		return stat{}, ErrGone
	}
	return statOf(k), nil
}

// scanProc reads the state of every process.
func scanProc() map[int]stat {
	ks, _ := unix.SysctlKinfoProcSlice("kern.proc.all")
	m := make(map[int]stat, len(ks))
	for i := range ks {
		m[int(ks[i].Proc.P_pid)] = statOf(&ks[i])
	}
	return m
}

// procStart reads a process's parent and its start time in microseconds
// since the epoch; a zombie counts as gone.
func procStart(pid int) (ppid int, start uint64, err error) {
	k, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || int(k.Proc.P_pid) != pid || k.Proc.P_stat == szomb {
		return 0, 0, ErrGone
	}
	t := k.Proc.P_starttime
	return int(k.Eproc.Ppid), uint64(t.Sec)*1_000_000 + uint64(t.Usec), nil
}

// environ returns the environment of pid, entries separated by NUL bytes,
// through gopsutil (sysctl KERN_PROCARGS2: same-uid processes only).
func environ(pid int) ([]byte, error) {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return nil, ErrGone
	}
	env, err := p.EnvironWithContext(context.Background())
	if err != nil {
		return nil, err
	}
	return []byte(strings.Join(env, "\x00")), nil
}

// rss reads the resident set of one process through gopsutil
// (proc_pidinfo).
func rss(pid int) uint64 {
	p, err := process.NewProcess(int32(pid))
	if err != nil {
		return 0
	}
	mi, err := p.MemoryInfoWithContext(context.Background())
	if err != nil || mi == nil {
		return 0
	}
	return mi.RSS
}
