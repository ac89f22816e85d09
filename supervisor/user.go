package supervisor

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/supervise-dev/supervise/child"
)

// shareWith opens to the agent's user (--user) exactly what it needs of the
// state dir: the dir itself and the notify dir become searchable by others
// (0711: a name can be reached, nothing listed), the notify socket becomes
// the user's own (0600); the journal and the control socket stay 0600 and
// root's. The directories above the state dir must let the user through.
func (s *Supervisor) shareWith(u *child.Credential) error {
	dir := s.cfg.StateDir
	for d := filepath.Dir(dir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("--user: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("--user %s: the agent's user cannot reach the state dir %s: %s is not searchable by others (mode %04o); "+
				"use a --state-dir it can reach, such as /var/lib/supervise/%s", u, dir, d, fi.Mode().Perm(), s.cfg.Name)
		}
		if d == filepath.Dir(d) {
			break
		}
	}
	for _, d := range []string{dir, NotifyDir(dir)} {
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("--user: %w", err)
		}
	}
	sock := s.notify.Path()
	if err := os.Lchown(sock, int(u.UID), int(u.GID)); err != nil {
		return fmt.Errorf("--user: the notify socket: %w", err)
	}
	return os.Chmod(sock, 0o600)
}

// giveResumeFile makes the resume file at path the agent's user's own, so
// that it can read it (--user); a no-op without --user.
func (s *Supervisor) giveResumeFile(path string) {
	if u := s.cfg.User; u != nil {
		if err := os.Lchown(path, int(u.UID), int(u.GID)); err != nil {
			s.log.Error("--user: the resume file cannot be handed to the agent's user", "err", err)
		}
	}
}
