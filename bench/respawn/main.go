// Command respawn is the Go floor of restart latency: it runs os.Args[1:]
// and, whenever it exits, runs it again with syscall.ForkExec and Wait4,
// nothing else (no journal, no backoff, no logging). It stops only when
// the exec fails.
package main

import (
	"os"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		os.Exit(2)
	}
	attr := &syscall.ProcAttr{Env: os.Environ(), Files: []uintptr{0, 1, 2}}
	for {
		pid, err := syscall.ForkExec(os.Args[1], os.Args[1:], attr)
		if err != nil {
			os.Stderr.WriteString("respawn: " + err.Error() + "\n")
			os.Exit(127)
		}
		var ws syscall.WaitStatus
		for {
			_, err := syscall.Wait4(pid, &ws, 0, nil)
			if err != syscall.EINTR {
				break
			}
		}
	}
}
