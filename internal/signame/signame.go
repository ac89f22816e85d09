// Package signame is the one place supervise names signals: Name for the
// signals an agent's death is commonly reported with (a fixed table, the
// same on every OS, so a continuation message reads the same everywhere),
// and Of for any signal as this OS numbers it.
package signame

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// table names the signals a death is commonly reported with, by their
// Linux numbers.
var table = [...]string{1: "SIGHUP", 2: "SIGINT", 3: "SIGQUIT", 4: "SIGILL", 6: "SIGABRT", 7: "SIGBUS",
	8: "SIGFPE", 9: "SIGKILL", 11: "SIGSEGV", 13: "SIGPIPE", 15: "SIGTERM"}

// Name is the name the table gives sig ("SIGKILL" for 9), "" when the
// table has none; the caller says what stands in its place.
func Name(sig int) string {
	if sig > 0 && sig < len(table) {
		return table[sig]
	}
	return ""
}

// Of is the name of sig as this OS numbers it ("SIGUSR1"), "" when it
// has none.
func Of(sig syscall.Signal) string { return unix.SignalName(sig) }
