// Command reporter is the Go stand-in for csrc/reporter.c, used when no C
// compiler is installed: its first action in main is to read
// CLOCK_MONOTONIC, then it appends "<monotonic ns> <pid>\n" to $REPORTER_OUT
// (else os.Args[1], else ./stamps) in one write and sleeps until killed.
// The Go runtime starts before main, so its stamps are later than the C
// reporter's by the runtime's start-up time.
package main

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

func main() {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	out := os.Getenv("REPORTER_OUT")
	if out == "" && len(os.Args) > 1 {
		out = os.Args[1]
	}
	if out == "" {
		out = "stamps"
	}
	line := strconv.FormatInt(ts.Nano(), 10) + " " + strconv.Itoa(os.Getpid()) + "\n"
	if f, err := os.OpenFile(out, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600); err == nil {
		f.WriteString(line)
		f.Close()
	}
	for {
		time.Sleep(time.Hour) // not select{}: the runtime would call that a deadlock
	}
}
