//go:build !linux

package supervisor

// ignoresInterrupt cannot tell where there is no /proc: it reports false, so
// a Ctrl-C the agent ignores is not escalated (press Ctrl-C twice).
func ignoresInterrupt(pid int) bool { return false }
