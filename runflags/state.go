package runflags

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/supervise-dev/supervise/internal/statedir"
)

// State holds --state-dir and --name, the flags every subcommand that
// touches state accepts.
type State struct {
	stateDir string
	name     string
}

// Register adds --state-dir and --name to fs, as `supervise run` (and
// `unit`, `chaos`) take them: they name the state dir of the agent run.
func (s *State) Register(fs *flag.FlagSet) {
	fs.StringVar(&s.stateDir, "state-dir", "", "directory for the journal and sockets (default $XDG_STATE_HOME/supervise/NAME, else ~/.local/state/supervise/NAME)")
	fs.StringVar(&s.name, "name", "", "name of this supervised agent, which names its state dir (default: the base name of AGENT; for an interpreter running a script file, the script's base name without extension: python3 agent.py, node agent.js and uv run agent.py are named agent)")
}

// RegisterLookup adds --state-dir and --name to fs for a command that
// finds the state dir of an agent supervise runs or ran (status, resume):
// their help says how, since such a command has no AGENT to name it after.
func (s *State) RegisterLookup(fs *flag.FlagSet) {
	fs.StringVar(&s.stateDir, "state-dir", "", "the agent's state dir, as given to supervise run --state-dir (inside a supervised agent: $SUPERVISE_STATE_DIR)")
	fs.StringVar(&s.name, "name", "", "the agent's name, as supervise run had it: its --name, else the base name of its AGENT (or of the script an interpreter ran: python3 agent.py is agent); the state dir is then $XDG_STATE_HOME/supervise/NAME, else ~/.local/state/supervise/NAME. With neither flag: the one state dir there, if there is only one")
}

// StateRoot is the directory holding every named state dir:
// $XDG_STATE_HOME/supervise, else ~/.local/state/supervise.
func StateRoot() (string, error) { return stateBase() }

// SeveralError is Resolve's error when neither --state-dir nor --name
// picks a state dir and more than one exists under Root: a command that
// can show them all (status) does so instead.
type SeveralError struct {
	Root  string
	Names []string
}

func (e *SeveralError) Error() string {
	return fmt.Sprintf("several supervised agents under %s (%s): pick one with --name", e.Root, strings.Join(e.Names, ", "))
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

// Resolve picks the state dir: --state-dir on the command line, then --name
// on the command line, then $SUPERVISE_STATE_DIR (set inside a supervised
// agent), then $SUPERVISE_NAME, then defaultName. With none of them, it looks
// for exactly one existing state dir.
func (s *State) Resolve(set map[string]bool, defaultName string) (dir, name string, err error) {
	name = s.name
	if set["state-dir"] && strings.TrimSpace(s.stateDir) == "" {
		// Not the current directory: supervise would make it private
		// (chmod 0700) and fill it with its journal and sockets.
		return "", "", errors.New("--state-dir is empty: give a directory, or leave the flag out for the default ($XDG_STATE_HOME/supervise/NAME, else ~/.local/state/supervise/NAME)")
	}
	if set["name"] && s.name == "" {
		return "", "", errors.New("--name is empty: give a name, or leave the flag out")
	}
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
				return "", "", &SeveralError{Root: base, Names: names}
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
			if _, err := os.Stat(statedir.JournalPath(filepath.Join(base, e.Name()))); err == nil {
				names = append(names, e.Name())
			}
		}
	}
	sort.Strings(names)
	return names, nil
}
