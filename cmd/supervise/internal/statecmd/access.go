package statecmd

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"syscall"

	"github.com/supervise-dev/supervise/internal/exitcode"

	"github.com/supervise-dev/supervise/supervisor/machine"
)

// A state dir another user may not read.
//
// supervise makes a state dir private (0700) to the user it runs as, so
// `supervise ls` and `supervise status` run by anyone else cannot read it.
// They say so, and whose it is (uid and user name), and exit
// exitNoAccess: never "no supervised agents here" and 0, which reads as
// "nothing runs" to a person or a script.
//
// `ls` exits exitNoAccess when the root it lists (the user's state root,
// or --root) or a state dir under it may not be read; it still lists
// every other agent first. State dirs of unit-installed agents under
// SystemRoot, which `ls` looks in by default beside the user's own, are
// listed as no-access with their owner but do not change the exit status:
// a user's `supervise ls` is not a failure because root runs an agent too.
// `status` exits exitNoAccess when the state dir it would read (or the
// state root it would choose one from) may not be read.

// exitNoAccess is the exit status of ls and status when this user may not
// read a state dir: 77, EX_NOPERM of sysexits.h (as 75, EX_TEMPFAIL, is
// task mode's limit).
const exitNoAccess = exitcode.NoAccess

// lsOwner is whose a directory this user may not read is.
type lsOwner struct {
	// Path is the directory that stops this user: the state dir, the
	// root, or the nearest directory above them this user may not enter.
	Path string `json:"path"`
	UID  int    `json:"uid"`
	// User is the owner's name, "" when the uid has none here.
	User string `json:"user,omitempty"`
}

// whose returns the owner of p, or of the nearest directory above p that
// this user can see but not enter (nil if none can be seen).
func whose(p string) *lsOwner {
	p = filepath.Clean(p)
	for {
		fi, err := os.Lstat(p)
		if err == nil {
			st, ok := fi.Sys().(*syscall.Stat_t)
			if !ok {
				return nil
			}
			o := &lsOwner{Path: p, UID: int(st.Uid)}
			if u, err := user.LookupId(strconv.Itoa(o.UID)); err == nil {
				o.User = u.Username
			}
			return o
		}
		up := filepath.Dir(p)
		if !errors.Is(err, fs.ErrPermission) || up == p {
			return nil
		}
		p = up
	}
}

// String is "uid 0 (root)", or "uid 1234" without a name.
func (o *lsOwner) String() string {
	if o == nil {
		return "another user"
	}
	if o.User != "" {
		return fmt.Sprintf("uid %d (%s)", o.UID, o.User)
	}
	return fmt.Sprintf("uid %d", o.UID)
}

// asWhom is the command prefix that reads what o owns: "sudo -u NAME ",
// or "sudo " for root or a uid without a name.
func (o *lsOwner) asWhom() string {
	if o != nil && o.User != "" && o.UID != 0 {
		return "sudo -u " + o.User + " "
	}
	return "sudo "
}

// readsIt is the command that reads the state dir dir, owned by o.
func readsIt(o *lsOwner, dir string) string {
	return o.asWhom() + "supervise status --state-dir " + machine.ShellQuote(dir) + " reads it"
}

// noAccessWords says that path may not be read by this user, and whose it
// is: what ls and status print.
func noAccessWords(what, path string, o *lsOwner) string {
	s := fmt.Sprintf("permission denied: %s %s belongs to %s", what, path, o)
	if o != nil && filepath.Clean(o.Path) != filepath.Clean(path) {
		s = fmt.Sprintf("permission denied: %s %s is inside %s, which belongs to %s", what, path, o.Path, o)
	}
	return s + fmt.Sprintf(" and this user (uid %d) may not read it", os.Geteuid())
}
