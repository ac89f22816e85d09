package child

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// rootOrSkip skips a test that switches users: only root can.
func rootOrSkip(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skipf("switching users needs root; this test runs as uid %d", os.Geteuid())
	}
}

// exeForAnyone copies the test binary into a directory every user may
// enter, since the one go test built it in is private to its owner, and
// returns the copy's path.
func exeForAnyone(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "child-credential-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	exe := filepath.Join(dir, "child.test")
	dst, err := os.OpenFile(exe, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o755)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		t.Fatal(err)
	}
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	return exe
}

// ids starts exe, the test binary, as cred with env appended to ours and
// returns the line its "ids" mode prints: real and effective ids, the
// sorted supplementary groups, HOME, USER and LOGNAME.
func ids(t *testing.T, r *Reaper, exe string, cred *Credential, env ...string) string {
	t.Helper()
	pr, pw, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer pr.Close()
	p, err := r.Start(Spec{
		Args:       []string{exe},
		Env:        append(append(os.Environ(), "CHILD_HELPER=ids"), env...),
		Stdout:     pw,
		Credential: cred,
	})
	pw.Close()
	if err != nil {
		t.Fatalf("start as %v: %v", cred, err)
	}
	t.Cleanup(func() { p.Kill(); <-p.Done() })
	out, err := io.ReadAll(pr)
	if err != nil {
		t.Fatal(err)
	}
	if e := wait(t, p); !e.Clean() {
		t.Fatalf("the child as %v: %s; output %q", cred, e, out)
	}
	return strings.TrimSpace(string(out))
}

func idsLine(uid, gid uint32, groups []uint32, home, name string) string {
	sorted := slices.Clone(groups)
	slices.Sort(sorted)
	return fmt.Sprintf("uid=%d euid=%d gid=%d egid=%d groups=%v home=%s user=%s logname=%s",
		uid, uid, gid, gid, sorted, home, name, name)
}

// Issue 21: an agent started with nobody's credential runs as nobody,
// real and effective ids alike, in nobody's groups and none of supervise's,
// with nobody's HOME, USER and LOGNAME replacing supervise's own.
func TestCredentialNobody(t *testing.T) {
	rootOrSkip(t)
	cred, err := LookupUser("nobody")
	if errors.Is(err, ErrUnknownUser) {
		t.Skip("this machine has no user nobody")
	}
	if err != nil {
		t.Fatal(err)
	}
	got := ids(t, newReaper(t), exeForAnyone(t), cred, cred.Env()...)
	if want := idsLine(cred.UID, cred.GID, cred.Groups, cred.Home, "nobody"); got != want {
		t.Errorf("the agent as nobody reports\n  %s\nwant\n  %s", got, want)
	}
}

// The supplementary groups are set exactly as given, none of them having
// to exist; an empty list leaves the agent in no supplementary group.
func TestCredentialGroups(t *testing.T) {
	rootOrSkip(t)
	r, exe := newReaper(t), exeForAnyone(t)
	for _, c := range []struct {
		uid, gid uint32
		groups   []uint32
	}{
		{65534, 65534, []uint32{65534, 4243, 4242}},
		{4000, 4001, []uint32{4001, 4002}},
		{65534, 65534, nil},
	} {
		cred := &Credential{UID: c.uid, GID: c.gid, Groups: c.groups, Name: "agent", Home: "/"}
		if got, want := ids(t, r, exe, cred, cred.Env()...), idsLine(c.uid, c.gid, c.groups, "/", "agent"); got != want {
			t.Errorf("%d:%d %v: the agent reports\n  %s\nwant\n  %s", c.uid, c.gid, c.groups, got, want)
		}
	}
}

// LookupUser takes a name or a uid, an optional group by name or gid, and
// lists the groups initgroups(3) would; unknown names and ids are
// ErrUnknownUser and ErrUnknownGroup.
func TestLookupUser(t *testing.T) {
	me, err := user.Current()
	if err != nil {
		t.Skipf("no user database entry for this process: %v", err)
	}
	myGroups, err := me.GroupIds()
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{me.Username, me.Uid, me.Username + ":" + me.Gid, me.Uid + ":" + me.Gid} {
		c, err := LookupUser(spec)
		if err != nil {
			t.Errorf("LookupUser(%q): %v", spec, err)
			continue
		}
		if strconv.FormatUint(uint64(c.UID), 10) != me.Uid || strconv.FormatUint(uint64(c.GID), 10) != me.Gid ||
			c.Name != me.Username || c.Home != me.HomeDir || len(c.Groups) != len(myGroups) {
			t.Errorf("LookupUser(%q) = %+v; want uid %s gid %s name %s home %s groups %v", spec, c, me.Uid, me.Gid, me.Username, me.HomeDir, myGroups)
		}
	}

	if nobody, err := user.Lookup("nobody"); err == nil {
		// GROUP replaces the primary group, in the supplementary list too.
		c, err := LookupUser("nobody:0")
		if err != nil {
			t.Fatal(err)
		}
		if c.Name != "nobody" || c.GID != 0 || !slices.Contains(c.Groups, 0) {
			t.Errorf("LookupUser(nobody:0) = %+v; want gid 0 among the groups", c)
		}
		if gid, _ := strconv.ParseUint(nobody.Gid, 10, 32); gid != 0 && slices.Contains(c.Groups, uint32(gid)) {
			t.Errorf("LookupUser(nobody:0) = %+v: nobody's primary group %d is still there", c, gid)
		}
		if env := strings.Join(c.Env(), " "); env != "HOME="+nobody.HomeDir+" USER=nobody LOGNAME=nobody" {
			t.Errorf("nobody's env: %s", env)
		}
	}

	for _, c := range []struct {
		spec string
		is   error
		msg  string
	}{
		{"no-such-user-21", ErrUnknownUser, `unknown user "no-such-user-21"`},
		{"4000000000", ErrUnknownUser, `unknown user "4000000000"`},
		{"4294967295", ErrUnknownUser, `unknown user "4294967295": uid "4294967295" out of range`},
		{"99999999999", ErrUnknownUser, `unknown user "99999999999": uid "99999999999" out of range`},
		{me.Username + ":no-such-group-21", ErrUnknownGroup, `unknown group "no-such-group-21"`},
		{me.Uid + ":4000000000", ErrUnknownGroup, `unknown group "4000000000"`},
		{"", nil, `"" is not USER or USER:GROUP`},
		{":0", nil, `":0" is not USER or USER:GROUP`},
		{me.Username + ":", nil, fmt.Sprintf("%q is not USER or USER:GROUP", me.Username+":")},
	} {
		_, err := LookupUser(c.spec)
		if err == nil || err.Error() != c.msg || (c.is != nil && !errors.Is(err, c.is)) {
			t.Errorf("LookupUser(%q): %v; want %q (errors.Is %v)", c.spec, err, c.msg, c.is)
		}
	}
}

// Env omits HOME for a user without a home directory; a nil Credential
// (no --user) adds nothing.
func TestCredentialEnv(t *testing.T) {
	c := &Credential{Name: "agent"}
	if got := strings.Join(c.Env(), " "); got != "USER=agent LOGNAME=agent" {
		t.Errorf("Env() = %s", got)
	}
	var none *Credential
	if env, s := none.Env(), none.String(); env != nil || s != "" {
		t.Errorf("nil Credential: Env() = %q, String() = %q", env, s)
	}
}
