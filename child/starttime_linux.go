package child

import (
	"bytes"
	"os"
	"strconv"
	"sync"
)

// clockTicks is USER_HZ, the unit of starttime in /proc/<pid>/stat: 100 on
// every Linux architecture Go supports (gopsutil assumes the same).
const clockTicks = 100

var bootTime = sync.OnceValues(func() (uint64, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	for line := range bytes.Lines(b) {
		if v, ok := bytes.CutPrefix(line, []byte("btime ")); ok {
			return strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		}
	}
	return 0, ErrGone
})

// startTime reads the start time of pid straight from /proc: starttime
// (field 22 of /proc/<pid>/stat, clock ticks since boot) and the boot time
// (btime of /proc/stat, read once), combined exactly as gopsutil's
// CreateTime combines them, so values recorded by earlier versions still
// compare equal. It avoids gopsutil on the restart path and keeps its
// package out of the Linux binary.
func startTime(pid int) (int64, error) {
	bt, err := bootTime()
	if err != nil {
		return 0, ErrGone
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, ErrGone
	}
	i := bytes.LastIndexByte(b, ')')
	if i < 0 || i+2 >= len(b) {
		return 0, ErrGone
	}
	// Fields after the command: state is field 3, starttime field 22.
	f := bytes.Fields(b[i+2:])
	if len(f) < 20 {
		return 0, ErrGone
	}
	t, err := strconv.ParseUint(string(f[19]), 10, 64)
	if err != nil {
		return 0, ErrGone
	}
	return int64(t*1000/clockTicks + bt*1000), nil
}
