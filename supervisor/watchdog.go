package supervisor

import (
	"bytes"
	"os"
	"strconv"
)

// stoppedByJobControl reports whether pid is in the stopped state (T):
// /proc/<pid>/stat's state field, after the command name's last ')'.
func stoppedByJobControl(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(b, ')')
	return i > 0 && i+2 < len(b) && b[i+2] == 'T'
}
