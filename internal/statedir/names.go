package statedir

import "path/filepath"

// The names of what supervise keeps in a state dir, written once: the
// supervisor package and the commands around it find the files through
// these functions.

// JournalPath returns the path of the journal in stateDir.
func JournalPath(stateDir string) string { return filepath.Join(stateDir, "journal.db") }

// VerifyFailedPath returns the path of the marker left when a check of the
// journal failed while supervise ran: the next start checks the whole
// journal before anything else (and moves it aside if it is damaged).
func VerifyFailedPath(stateDir string) string { return JournalPath(stateDir) + ".verify-failed" }

// ControlPath returns the path of the control socket in stateDir.
func ControlPath(stateDir string) string { return filepath.Join(stateDir, "control.sock") }

// NotifyDir returns the private directory in stateDir that holds the
// notify socket.
func NotifyDir(stateDir string) string { return filepath.Join(stateDir, "notify") }

// ResumePath returns the path of the resume file in stateDir.
func ResumePath(stateDir string) string { return filepath.Join(stateDir, "resume.json") }
