package child

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
	"syscall"
)

// ErrUnknownUser is returned by LookupUser for a user that the user
// database does not know.
var ErrUnknownUser = errors.New("unknown user")

// ErrUnknownGroup is returned by LookupUser for a group that the group
// database does not know.
var ErrUnknownGroup = errors.New("unknown group")

// Credential is the user and groups an agent's tree runs as, set between
// fork and exec as systemd's User= and Group=, supervisord's user= and
// runit's chpst -u set them. Only a root supervisor can switch to it.
type Credential struct {
	UID, GID uint32
	// Groups are the supplementary groups, GID among them; none means the
	// process keeps no supplementary group.
	Groups []uint32
	// Name and Home are the user's login name and home directory, for
	// the environment Env returns.
	Name, Home string
}

// LookupUser resolves USER[:GROUP]: USER is a login name or a numeric uid,
// GROUP a group name or a numeric gid. Both must have an entry in the user
// and group databases, numeric ones too: an id without one is more often a
// typo than a wish, and would leave HOME and USER unknown. Without GROUP
// the group is the user's primary group. The supplementary groups are what
// initgroups(3) gives the user with that group: the group itself plus
// every group that lists the user as a member. An unknown user or group
// is an error wrapping ErrUnknownUser or ErrUnknownGroup.
func LookupUser(spec string) (*Credential, error) {
	name, group, withGroup := strings.Cut(spec, ":")
	if name == "" || (withGroup && group == "") {
		return nil, fmt.Errorf("%q is not USER or USER:GROUP", spec)
	}
	u, err := lookupUser(name)
	if err != nil {
		return nil, err
	}
	gid := u.Gid
	if withGroup {
		g, err := lookupGroup(group)
		if err != nil {
			return nil, err
		}
		gid = g.Gid
	}
	c := &Credential{Name: u.Username, Home: u.HomeDir}
	if c.UID, err = parseID(u.Uid); err != nil {
		return nil, fmt.Errorf("user %q: uid %w", name, err)
	}
	if c.GID, err = parseID(gid); err != nil {
		return nil, fmt.Errorf("user %q: gid %w", name, err)
	}
	// GroupIds reads only the name and the group: with the chosen group in
	// place of the primary one, it lists exactly initgroups' groups.
	ids, err := (&user.User{Username: u.Username, Gid: gid}).GroupIds()
	if err != nil {
		return nil, fmt.Errorf("groups of user %q: %w", u.Username, err)
	}
	for _, id := range ids {
		g, err := parseID(id)
		if err != nil {
			return nil, fmt.Errorf("groups of user %q: gid %w", u.Username, err)
		}
		c.Groups = append(c.Groups, g)
	}
	return c, nil
}

// lookupUser finds a user by uid when name is all digits, else by name.
func lookupUser(name string) (*user.User, error) {
	var (
		u   *user.User
		err error
	)
	if isNumeric(name) {
		if _, err := parseID(name); err != nil {
			return nil, fmt.Errorf("%w %q: uid %w", ErrUnknownUser, name, err)
		}
		u, err = user.LookupId(name)
	} else {
		u, err = user.Lookup(name)
	}
	var byID user.UnknownUserIdError
	var byName user.UnknownUserError
	if errors.As(err, &byID) || errors.As(err, &byName) {
		return nil, fmt.Errorf("%w %q", ErrUnknownUser, name)
	}
	if err != nil {
		return nil, fmt.Errorf("look up user %q: %w", name, err)
	}
	return u, nil
}

// lookupGroup finds a group by gid when name is all digits, else by name.
func lookupGroup(name string) (*user.Group, error) {
	var (
		g   *user.Group
		err error
	)
	if isNumeric(name) {
		if _, err := parseID(name); err != nil {
			return nil, fmt.Errorf("%w %q: gid %w", ErrUnknownGroup, name, err)
		}
		g, err = user.LookupGroupId(name)
	} else {
		g, err = user.LookupGroup(name)
	}
	var byID user.UnknownGroupIdError
	var byName user.UnknownGroupError
	if errors.As(err, &byID) || errors.As(err, &byName) {
		return nil, fmt.Errorf("%w %q", ErrUnknownGroup, name)
	}
	if err != nil {
		return nil, fmt.Errorf("look up group %q: %w", name, err)
	}
	return g, nil
}

func isNumeric(s string) bool {
	for _, r := range s {
		if r < '0' || r > '9' {
			return false
		}
	}
	return s != ""
}

// parseID parses a uid or gid; 4294967295 is (uid_t)-1, "no change" to
// setuid(2), so it is refused.
func parseID(s string) (uint32, error) {
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil || n == 1<<32-1 {
		return 0, fmt.Errorf("%q out of range", s)
	}
	return uint32(n), nil
}

// Env returns the environment entries systemd's User= sets for the user:
// HOME (when the user has a home directory), USER and LOGNAME; none for a
// nil Credential. Append them after the rest of the environment:
// Reaper.Start keeps the last entry of a name, so they replace
// supervise's own.
func (c *Credential) Env() []string {
	if c == nil {
		return nil
	}
	var env []string
	if c.Home != "" {
		env = append(env, "HOME="+c.Home)
	}
	return append(env, "USER="+c.Name, "LOGNAME="+c.Name)
}

// String returns uid:gid and the login name, for logs; "" for nil.
func (c *Credential) String() string {
	if c == nil {
		return ""
	}
	return fmt.Sprintf("%d:%d (%s)", c.UID, c.GID, c.Name)
}

// sys returns the credential for SysProcAttr; nil for none. The
// supplementary groups are always set (NoSetGroups false), so the agent
// never keeps supervise's own.
func (c *Credential) sys() *syscall.Credential {
	if c == nil {
		return nil
	}
	return &syscall.Credential{Uid: c.UID, Gid: c.GID, Groups: append([]uint32(nil), c.Groups...)}
}
