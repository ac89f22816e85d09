package runflags

import (
	"bytes"
	"flag"
	"strings"
	"testing"
)

func TestDidYouMean(t *testing.T) {
	fs := flag.NewFlagSet("supervise run", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--restrat", "never"}, "did you mean --restart?"},
		{[]string{"--restrat=never", "--", "x"}, "did you mean --restart?"},
		{[]string{"-stop-timout", "1s"}, "did you mean --stop-timeout?"},
		{[]string{"--max-rs", "1G"}, "did you mean --max-rss?"},
		{[]string{"--Restart", "never"}, "did you mean --restart?"},
		// A value is skipped, not taken for the unknown flag.
		{[]string{"--restart", "--nope", "--wachdog", "1s"}, "did you mean --watchdog?"},
		{[]string{"--rerun-task", "--resum", "off"}, "did you mean --resume?"},
		// Nothing near: no guess.
		{[]string{"--xyzzy"}, ""},
		{[]string{"--q"}, ""},
		// After --, an argument is the agent's.
		{[]string{"--", "--restrat"}, ""},
		{[]string{"agent", "--restrat"}, ""},
	} {
		if got := DidYouMean(fs, c.args); got != c.want {
			t.Errorf("DidYouMean(%q) = %q, want %q", c.args, got, c.want)
		}
	}
}

// Parse prints the suggestion under the flag package's own line, for any
// subcommand's FlagSet.
func TestParseSuggests(t *testing.T) {
	fs := flag.NewFlagSet("supervise status", flag.ContinueOnError)
	var st State
	st.RegisterLookup(fs)
	fs.Bool("json", false, "")
	fs.String("session", "", "")
	var out, errb bytes.Buffer
	fs.SetOutput(&errb)
	if _, err := Parse(fs, []string{"--sesion", "x"}, &out, &errb); err == nil {
		t.Fatal("Parse accepted --sesion")
	}
	if got := errb.String(); !strings.Contains(got, "flag provided but not defined: -sesion\nsupervise status: did you mean --session?\n") {
		t.Errorf("stderr:\n%s", got)
	}
}
