// Package runflags holds supervise's command-line flags that carry
// meaning: the flags of `supervise run` (also accepted by `supervise unit`),
// the --state-dir/--name pair every command that touches state takes, the
// SUPERVISE_<FLAG> environment overlay, and the checks that turn the run
// flags into a supervisor.Config. Each command makes its own FlagSet and
// registers these flags on it; Parse is how every command but `unit` (whose
// unit must not depend on the shell that generated it) parses its flags.
// The chaos package, which starts `supervise run` with an environment of
// its own, parses the run flags it forwards with Overlay over that
// environment.
//
// Errors from Parse are already printed; every other error is returned for
// the caller to print, and means exit status 2 (usage).
package runflags

import (
	"flag"
	"io"
	"os"

	"github.com/supervise-dev/supervise/internal/cliflags"
)

// The parsing every command shares is cliflags' (a leaf the supervise-notify
// binary links without the run loop); these names are kept for the
// commands that parse run flags.

// ErrUsage marks a command-line error (exit code 2); the message has been
// printed already. It is cliflags.ErrUsage.
var ErrUsage = cliflags.ErrUsage

// ExitCode maps an error from Parse to supervise's exit status: 0 after
// -h (flag.ErrHelp), else 2 (usage).
func ExitCode(err error) int { return cliflags.ExitCode(err) }

// EnvName is the environment variable that sets a flag: --stop-timeout
// reads SUPERVISE_STOP_TIMEOUT.
func EnvName(flagName string) string { return cliflags.EnvName(flagName) }

// Parse parses the command line, then fills every flag it did not set
// from SUPERVISE_<FLAG> in the environment, so the command line wins
// (cliflags.Parse). It returns the names of the flags set on the command
// line.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (map[string]bool, error) {
	return cliflags.Parse(fs, args, stdout, stderr)
}

// Overlay fills every flag of fs, already parsed, that its command line did
// not set from SUPERVISE_<FLAG> as lookup finds it (cliflags.Overlay).
func Overlay(fs *flag.FlagSet, lookup func(string) (string, bool)) (map[string]bool, error) {
	return cliflags.Overlay(fs, lookup)
}

// Source names where a flag's value came from, for error messages: the
// command line, else its environment variable.
func Source(name string, set map[string]bool) string {
	if _, ok := os.LookupEnv(EnvName(name)); ok && !set[name] {
		return EnvName(name)
	}
	return "--" + name
}
