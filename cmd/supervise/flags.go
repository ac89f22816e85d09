package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// errUsage marks a command-line error (exit code 2); the message has been
// printed already.
var errUsage = errors.New("usage error")

// envName is the environment variable that sets a flag: --stop-timeout
// reads SUPERVISE_STOP_TIMEOUT.
func envName(flagName string) string {
	return "SUPERVISE_" + strings.ToUpper(strings.ReplaceAll(flagName, "-", "_"))
}

// parseFlags parses the command line, then fills every flag it did not set
// from SUPERVISE_<FLAG> in the environment, so the command line wins. It
// returns the names of the flags set on the command line. -h prints the
// FlagSet's usage on stdout (once); a bad flag gets the flag package's error
// and a one-line hint on stderr.
func parseFlags(fs *flag.FlagSet, args []string, stdout, stderr io.Writer) (map[string]bool, error) {
	full := fs.Usage
	fs.Usage = func() {} // the flag package calls it for -h and for errors alike
	err := fs.Parse(args)
	fs.Usage = full // a caller that finds the arguments wrong prints it
	if err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stdout)
			full()
			return nil, flag.ErrHelp
		}
		fmt.Fprintf(stderr, "Run '%s -h' for help.\n", fs.Name())
		return nil, errUsage
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		if v, ok := os.LookupEnv(envName(f.Name)); ok && !set[f.Name] && envErr == nil {
			if err := fs.Set(f.Name, v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %v", v, envName(f.Name), err)
			}
		}
	})
	if envErr != nil {
		fmt.Fprintf(stderr, "supervise: %v\n", envErr)
		return nil, errUsage
	}
	return set, nil
}

// source names where a flag's value came from, for error messages: the
// command line, else its environment variable.
func source(name string, set map[string]bool) string {
	if _, ok := os.LookupEnv(envName(name)); ok && !set[name] {
		return envName(name)
	}
	return "--" + name
}

// stateFlags are the flags every subcommand that touches state accepts.
type stateFlags struct {
	stateDir string
	name     string
}

func (s *stateFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&s.stateDir, "state-dir", "", "directory for the journal and sockets (default $XDG_STATE_HOME/supervise/NAME, else ~/.local/state/supervise/NAME)")
	fs.StringVar(&s.name, "name", "", "name of this supervised agent (default: base name of AGENT)")
}

// stateBase is the directory holding every named state dir.
func stateBase() (string, error) {
	if x := os.Getenv("XDG_STATE_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "supervise"), nil
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "", fmt.Errorf("cannot find a state dir: set --state-dir or $HOME: %w", err)
	}
	return filepath.Join(home, ".local", "state", "supervise"), nil
}

// resolve picks the state dir: --state-dir on the command line, then --name
// on the command line, then $SUPERVISE_STATE_DIR (set inside a supervised
// agent), then $SUPERVISE_NAME, then defaultName. With none of them, it looks
// for exactly one existing state dir.
func (s *stateFlags) resolve(set map[string]bool, defaultName string) (dir, name string, err error) {
	name = s.name
	switch {
	case set["state-dir"], s.stateDir != "" && !set["name"]:
		dir = s.stateDir
	default:
		if name == "" {
			name = defaultName
		}
		base, err := stateBase()
		if err != nil {
			return "", "", err
		}
		if name == "" {
			names, _ := existingNames(base)
			switch len(names) {
			case 0:
				return "", "", fmt.Errorf("no supervise state found under %s: pass --state-dir or --name", base)
			case 1:
				name = names[0]
			default:
				return "", "", fmt.Errorf("several supervised agents under %s (%s): pick one with --name", base, strings.Join(names, ", "))
			}
		}
		if strings.ContainsAny(name, "/\x00") || name == "." || name == ".." {
			return "", "", fmt.Errorf("invalid --name %q: it names a directory, so no slashes", name)
		}
		dir = filepath.Join(base, name)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return "", "", err
	}
	if name == "" {
		name = filepath.Base(dir)
	}
	if strings.ContainsAny(name, "/\x00") {
		return "", "", fmt.Errorf("invalid --name %q: no slashes", name)
	}
	return dir, name, nil
}

func existingNames(base string) ([]string, error) {
	ents, err := os.ReadDir(base)
	if err != nil {
		return nil, err
	}
	var names []string
	for _, e := range ents {
		if e.IsDir() {
			if _, err := os.Stat(filepath.Join(base, e.Name(), "journal.db")); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
