package cliflags

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
	"time"
)

// newSet is a FlagSet with one duration and one string flag, as
// `supervise notify` registers them.
func newSet(d *time.Duration, s *string) *flag.FlagSet {
	fs := flag.NewFlagSet("supervise notify", flag.ContinueOnError)
	DurationVar(fs, d, "timeout", 5*time.Second, "how long")
	fs.StringVar(s, "session", "", "session id")
	return fs
}

func TestParseEnvOverlay(t *testing.T) {
	var d time.Duration
	var s string
	fs := newSet(&d, &s)
	t.Setenv("SUPERVISE_TIMEOUT", "250ms")
	t.Setenv("SUPERVISE_SESSION", "from-env")
	var out, errb bytes.Buffer
	fs.SetOutput(&errb)
	set, err := Parse(fs, []string{"--session", "cli"}, &out, &errb)
	if err != nil {
		t.Fatalf("Parse: %v (stderr %q)", err, errb.String())
	}
	if d != 250*time.Millisecond || s != "cli" || !set["session"] || set["timeout"] {
		t.Fatalf("timeout %v session %q set %v: want the env's 250ms and the command line's session", d, s, set)
	}
}

func TestParseErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		env  string
		want string
	}{
		{[]string{"--timeout", "10"}, "", "supervise: --timeout 10: a duration needs a unit, e.g. 10s or 500ms\n"},
		{[]string{"--sesion", "x"}, "", "supervise notify: did you mean --session?\n"},
		{nil, "zz", "supervise: invalid value \"zz\" for SUPERVISE_TIMEOUT: not a duration: a number with a unit, e.g. 10s, 500ms or 1m30s\n"},
	} {
		var d time.Duration
		var s string
		fs := newSet(&d, &s)
		if c.env != "" {
			t.Setenv("SUPERVISE_TIMEOUT", c.env)
		}
		var out, errb bytes.Buffer
		fs.SetOutput(&errb)
		_, err := Parse(fs, c.args, &out, &errb)
		if !errors.Is(err, ErrUsage) || ExitCode(err) != 2 {
			t.Fatalf("%v: err %v, want ErrUsage (exit 2)", c.args, err)
		}
		if !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: stderr %q, want it to hold %q", c.args, errb.String(), c.want)
		}
	}
}

func TestParseHelp(t *testing.T) {
	var d time.Duration
	var s string
	fs := newSet(&d, &s)
	fs.Usage = func() { fs.Output().Write([]byte("USAGE\n")) }
	var out, errb bytes.Buffer
	fs.SetOutput(&errb)
	_, err := Parse(fs, []string{"-h"}, &out, &errb)
	if !errors.Is(err, flag.ErrHelp) || ExitCode(err) != 0 {
		t.Fatalf("err %v, want flag.ErrHelp (exit 0)", err)
	}
	if out.String() != "USAGE\n" || errb.Len() != 0 {
		t.Fatalf("stdout %q stderr %q: want the usage once on stdout", out.String(), errb.String())
	}
}

func TestNearest(t *testing.T) {
	for name, want := range map[string]string{"notfy": "notify", "xyzzy": "", "STATUS": "status"} {
		if got := Nearest(name, []string{"notify", "status", "run"}); got != want {
			t.Errorf("Nearest(%q) = %q, want %q", name, got, want)
		}
	}
}

func TestLevenshtein(t *testing.T) {
	for _, c := range []struct {
		a, b string
		d    int
	}{{"", "", 0}, {"a", "", 1}, {"", "abc", 3}, {"restrat", "restart", 2}, {"kitten", "sitting", 3}, {"name", "name", 0}} {
		if d := levenshtein(c.a, c.b); d != c.d {
			t.Errorf("levenshtein(%q, %q) = %d, want %d", c.a, c.b, d, c.d)
		}
	}
}
