// Package cliflags is the command-line parsing every supervise command
// shares, with no dependency on the supervisor: the SUPERVISE_<FLAG>
// environment overlay, duration flags whose errors say what to type, and
// the "did you mean" line for a mistyped flag. It is a leaf (it imports
// only internal/exitcode), so a small binary such as supervise-notify can
// parse its flags exactly as `supervise notify` does without linking the
// run loop, net/http or the metrics library.
//
// Errors from Parse are already printed; every other error is returned for
// the caller to print, and means exit status 2 (usage).
package cliflags

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/supervise-dev/supervise/internal/exitcode"
)

// ErrUsage marks a command-line error (exit code 2); the message has been
// printed already.
var ErrUsage = errors.New("usage error")

// ExitCode maps an error from Parse to supervise's exit status: 0 after
// -h (flag.ErrHelp), else 2 (usage).
func ExitCode(err error) int {
	if errors.Is(err, flag.ErrHelp) {
		return exitcode.OK
	}
	return exitcode.Usage
}

// EnvName is the environment variable that sets a flag: --stop-timeout
// reads SUPERVISE_STOP_TIMEOUT.
func EnvName(flagName string) string {
	return "SUPERVISE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// Parse parses the command line, then fills every flag it did not set
// from SUPERVISE_<FLAG> in the environment, so the command line wins. It
// returns the names of the flags set on the command line. -h prints the
// FlagSet's usage on stdout (once); a bad flag gets the flag package's error
// and a one-line hint on stderr. fs.Usage is the full usage again when
// Parse returns.
func Parse(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (map[string]bool, error) {
	full := fs.Usage
	fs.Usage = func() {}               // the flag package calls it for -h and for errors alike
	defer func() { fs.Usage = full }() // for the caller's own usage errors
	out := fs.Output()
	var msg bytes.Buffer // the flag package's error line, said better for a duration
	fs.SetOutput(&msg)
	err := fs.Parse(args)
	fs.SetOutput(out)
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			full()
			fs.SetOutput(out)
			return nil, flag.ErrHelp
		}
		if line := refusedDuration(fs); line != "" {
			fmt.Fprintf(out, "supervise: %s\n", line)
		} else {
			out.Write(msg.Bytes())
			if line := DidYouMean(fs, args); line != "" {
				fmt.Fprintf(out, "%s: %s\n", fs.Name(), line)
			}
		}
		fmt.Fprintf(stderr, "Run '%s -h' for help.\n", fs.Name())
		return nil, ErrUsage
	}
	set, err := Overlay(fs, os.LookupEnv)
	if err != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", err)
		return nil, ErrUsage
	}
	return set, nil
}

// Overlay fills every flag of fs, already parsed, that its command line did
// not set from SUPERVISE_<FLAG> as lookup finds it (os.LookupEnv for this
// process's environment), so the command line wins. It returns the names of
// the flags set on the command line, as Parse does; an error names the
// variable with the bad value.
func Overlay(fs *flag.FlagSet, lookup func(string) (string, bool)) (map[string]bool, error) {
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := lookup(EnvName(f.Name)); ok && !set[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %v", v, EnvName(f.Name), err)
			}
		}
	})
	return set, envErr
}
