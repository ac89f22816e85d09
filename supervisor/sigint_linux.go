//go:build linux

package supervisor

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// ignoresInterrupt reports whether process pid ignores or blocks SIGINT,
// from the SigIgn and SigBlk masks in /proc/PID/status.
func ignoresInterrupt(pid int) bool {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return false
	}
	defer f.Close()
	const sigint = 1 << (2 - 1)
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "SigIgn" && k != "SigBlk") {
			continue
		}
		if mask, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64); err == nil && mask&sigint != 0 {
			return true
		}
	}
	return false
}
