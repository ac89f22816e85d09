package main

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// monoNow reads CLOCK_MONOTONIC, the clock the reporter stamps with.
func monoNow() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// sample is a set of durations.
type sample []time.Duration

func (s sample) sorted() sample {
	c := slices.Clone(s)
	slices.Sort(c)
	return c
}

// q returns the q-quantile (nearest rank) of a sorted sample.
func (s sample) q(q float64) time.Duration {
	if len(s) == 0 {
		return 0
	}
	i := int(math.Ceil(q*float64(len(s)))) - 1
	return s[min(max(i, 0), len(s)-1)]
}

// ms formats d in milliseconds with three significant digits.
func ms(d time.Duration) string {
	v := float64(d) / 1e6
	switch {
	case v >= 100:
		return fmt.Sprintf("%.0f ms", v)
	case v >= 10:
		return fmt.Sprintf("%.1f ms", v)
	case v >= 1:
		return fmt.Sprintf("%.2f ms", v)
	}
	return fmt.Sprintf("%.3f ms", v)
}

func mib(kb int64) string { return fmt.Sprintf("%.1f MiB", float64(kb)/1024) }

// rate formats events per second.
func rate(v float64) string {
	switch {
	case v >= 1e6:
		return fmt.Sprintf("%.2f M/s", v/1e6)
	case v >= 1e4:
		return fmt.Sprintf("%.0f k/s", v/1e3)
	case v >= 1e3:
		return fmt.Sprintf("%.1f k/s", v/1e3)
	}
	return fmt.Sprintf("%.0f /s", v)
}

// memStatus returns the VmHWM, VmRSS, RssAnon and RssFile of pid, in KiB.
type memStatus struct{ hwm, rss, anon, file, shmem int64 }

func readMem(pid int) (memStatus, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return memStatus{}, err
	}
	var m memStatus
	for _, line := range strings.Split(string(b), "\n") {
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		f := strings.Fields(v)
		if len(f) == 0 {
			continue
		}
		n, _ := strconv.ParseInt(f[0], 10, 64)
		switch k {
		case "VmHWM":
			m.hwm = n
		case "VmRSS":
			m.rss = n
		case "RssAnon":
			m.anon = n
		case "RssFile":
			m.file = n
		case "RssShmem":
			m.shmem = n
		}
	}
	return m, nil
}

// clkTck is USER_HZ, the unit of utime and stime in /proc/PID/stat; it is
// 100 on every Linux architecture Go supports.
const clkTck = 100

// cpuTime returns utime+stime of pid (all its threads).
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad stat for %d", pid)
	}
	f := strings.Fields(string(b[i+2:]))
	// After the name: state(3) ppid pgrp session tty tpgid flags minflt
	// cminflt majflt cmajflt utime(14) stime(15).
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat for %d", pid)
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * time.Second / clkTck, nil
}

// exeIs reports whether pid runs the executable path (compared by the
// /proc/PID/exe link, falling back to argv[0]'s base name), so that a pid
// read from a stamp is never signalled after it was reused.
func exeIs(pid int, path string) bool {
	if exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe"); err == nil {
		if exe == path {
			return true
		}
		if fi1, err1 := os.Stat(exe); err1 == nil {
			if fi2, err2 := os.Stat(path); err2 == nil && os.SameFile(fi1, fi2) {
				return true
			}
		}
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := bytes.Cut(b, []byte{0})
	return filepath.Base(string(argv0)) == filepath.Base(path)
}

// alive reports whether pid exists and is not a zombie.
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] != 'Z' && b[i+2] != 'X'
}
