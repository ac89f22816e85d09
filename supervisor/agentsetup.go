package supervisor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// AgentSetup is what a CLI's profile (package profile) prepares for the
// agent, for this supervise only: files in the state dir the agent's
// command names (Claude Code's --settings file, Gemini CLI's system
// settings), and a step before each launch (Codex's profile file with the
// proxy's URL of that run).
type AgentSetup struct {
	// Files are written into the state dir (mode 0600) when supervise
	// starts: name (no directory) to content.
	Files map[string][]byte
	// Launch runs before each launch with its environment; an error is
	// logged and the launch goes ahead (the agent is then unseen, not
	// stopped).
	Launch func(env []string) error
	// Done runs when supervise ends (Codex's profile file is removed).
	Done func()
	// Saved reports whether the CLI has saved a session's conversation
	// where its resume looks (known false: a resume of it cannot work,
	// and the death of that resume is a lost conversation); nil: unknown.
	Saved func(session string) (saved, known bool)
	// Said is what the profile set up and why, logged when supervise
	// starts (after an interactive run's log has moved to the state dir).
	Said []string
}

// writeAgentFiles writes the profile's files into the state dir: each to
// a temporary name, then renamed over, so the agent never reads half of
// one and a link planted at the name is replaced, never followed.
func writeAgentFiles(dir string, files map[string][]byte) error {
	for name, b := range files {
		if name != filepath.Base(name) || strings.HasPrefix(name, ".") {
			return fmt.Errorf("agent file %q: not a plain name", name)
		}
		path := filepath.Join(dir, name)
		tmp := path + ".tmp"
		os.Remove(tmp)
		f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
		if err != nil {
			return err
		}
		_, err = f.Write(b)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err == nil {
			err = os.Rename(tmp, path)
		}
		if err != nil {
			os.Remove(tmp)
			return err
		}
	}
	return nil
}

// unsavedResume names the one session a launch hands the CLI by its
// resume template when the CLI's profile knows it never saved that
// conversation: the resume cannot work, and its death is a lost
// conversation (machine.Exited.Lost), not a crash. "" otherwise.
func (s *Supervisor) unsavedResume(task bool, ids []string) string {
	if !task || len(ids) != 1 || s.cfg.Agent.Saved == nil {
		return ""
	}
	if saved, known := s.cfg.Agent.Saved(ids[0]); known && !saved {
		return "no saved conversation " + ids[0] + ": the CLI never saved it (killed before it wrote it down, or it never had that id)"
	}
	return ""
}
