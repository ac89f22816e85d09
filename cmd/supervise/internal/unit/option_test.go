package unit

import (
	"bytes"
	"encoding/xml"
	"errors"
	"flag"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/runflags"
)

// No value becomes an option of supervise's command line in a unit: a
// value that begins with '-' (--name, --state-dir, --resume-message,
// --fingerprint) is written joined to its flag, and supervise, parsing the
// unit's arguments as `run` does, reads back each value and the agent's
// own arguments unchanged.
func TestUnitValuesNeverBecomeOptions(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	t.Setenv("HOME", dir)
	if err := os.WriteFile("-f", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"--name", "-x", "--state-dir", "-d", "--resume-message", "-m", "--fingerprint", "-f",
		"--", "sh", "-v", "--name=-y"}
	want := map[string]string{"name": "-x", "state-dir": filepath.Join(dir, "-d"), "resume-message": "-m", "fingerprint": "-f"}
	for _, kind := range []string{"systemd", "launchd"} {
		var out, errb bytes.Buffer
		if code := Command(append([]string{kind}, args...), &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", kind, code, errb.String())
		}
		var argv []string
		if kind == "systemd" {
			argv = execStart(t, out.String())
		} else {
			argv = programArguments(t, out.String())
		}
		if len(argv) < 2 || argv[1] != "run" {
			t.Fatalf("%s: argv %q", kind, argv)
		}
		if err := checkArgs(argv[1:]); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		fs := flag.NewFlagSet("run", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f runflags.Flags
		f.Register(fs)
		if err := fs.Parse(argv[2:]); err != nil {
			t.Fatalf("%s: supervise cannot parse %q: %v", kind, argv, err)
		}
		for name, v := range want {
			if got := fs.Lookup(name).Value.String(); got != v {
				t.Errorf("%s: --%s reads back as %q, want %q (argv %q)", kind, name, got, v, argv)
			}
		}
		if rest := fs.Args(); len(rest) != 3 || !filepath.IsAbs(rest[0]) || !reflect.DeepEqual(rest[1:], []string{"-v", "--name=-y"}) {
			t.Errorf("%s: the agent's argv reads back as %q", kind, rest)
		}
	}
}

// execStart splits a unit's ExecStart= line; every value in this test is
// plain, so SystemdWord leaves it unquoted and the words are its fields.
func execStart(t *testing.T, unit string) []string {
	t.Helper()
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, "ExecStart="); ok {
			if strings.ContainsAny(v, `"\`) {
				t.Fatalf("ExecStart= is quoted, this test cannot split it: %s", v)
			}
			return strings.Fields(v)
		}
	}
	t.Fatalf("no ExecStart= in\n%s", unit)
	return nil
}

// programArguments returns the strings of a plist's ProgramArguments array.
func programArguments(t *testing.T, plist string) []string {
	t.Helper()
	d := xml.NewDecoder(strings.NewReader(plist))
	d.Strict = false // the DOCTYPE names an external DTD
	var argv []string
	inKey, want, in := false, false, false
	for {
		tok, err := d.Token()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch tok := tok.(type) {
		case xml.StartElement:
			inKey = tok.Name.Local == "key"
			if tok.Name.Local == "array" && want {
				in = true
			}
			if tok.Name.Local == "string" && in {
				var s string
				if err := d.DecodeElement(&s, &tok); err != nil {
					t.Fatal(err)
				}
				argv = append(argv, s)
			}
		case xml.CharData:
			if inKey {
				want = string(tok) == "ProgramArguments"
			}
		case xml.EndElement:
			inKey = false
			if tok.Name.Local == "array" && in {
				return argv
			}
		}
	}
	t.Fatalf("no ProgramArguments in\n%s", plist)
	return nil
}

// Whatever builds a Spec, its Args have the shape that keeps every value
// joined to its flag, with -- before the agent.
func TestCheckArgs(t *testing.T) {
	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"run", "--", "/bin/agent"}, true},
		{[]string{"run", "--name=-x", "--state-dir=/s", "--resume-message=-m", "--", "/bin/agent", "-v", "--", "-x"}, true},
		{[]string{"run", "--name=", "--log-level=debug", "--", "/bin/agent"}, true},
		{[]string{"run", "--name", "-x", "--", "/bin/agent"}, false},
		{[]string{"run", "-x", "--", "/bin/agent"}, false},
		{[]string{"run", "--name=x", "value", "--", "/bin/agent"}, false},
		{[]string{"run", "-name=x", "--", "/bin/agent"}, false},
		{[]string{"run", "---name=x", "--", "/bin/agent"}, false},
		{[]string{"run", "--=x", "--", "/bin/agent"}, false},
		{[]string{"run", "--Name=x", "--", "/bin/agent"}, false},
		{[]string{"run", "--name=x", "/bin/agent", "-v"}, false},
		{[]string{"run", "--name=x", "--"}, false},
		{[]string{"--name=x", "run", "--", "/bin/agent"}, false},
		{nil, false},
	} {
		err := checkArgs(tc.args)
		if tc.ok != (err == nil) || err != nil && !errors.Is(err, ErrValue) {
			t.Errorf("checkArgs(%q) = %v, want ok %v", tc.args, err, tc.ok)
		}
		spec := Spec{Name: "n", Exe: "/bin/supervise", Args: tc.args, Agent: "/bin/agent", LogFile: "/l"}
		_, serr := Systemd(spec)
		_, lerr := Launchd(spec)
		if tc.ok != (serr == nil) || tc.ok != (lerr == nil) {
			t.Errorf("%q: Systemd %v, Launchd %v; want ok %v", tc.args, serr, lerr, tc.ok)
		}
	}
}

// systemd reads -@:+! at the start of ExecStart='s first word, after
// unquoting it, as prefixes: an executable path that begins with one
// would become options of the command line.
func TestExecLinePrefixes(t *testing.T) {
	for _, exe := range []string{"-/bin/x", "@/bin/x", ":x", "+/x", "!x", "!!/x", ""} {
		if line, err := ExecLine([]string{exe, "run"}); !errors.Is(err, ErrValue) {
			t.Errorf("ExecLine(%q) = %q, %v; want ErrValue", exe, line, err)
		}
	}
	if _, err := ExecLine(nil); !errors.Is(err, ErrValue) {
		t.Errorf("ExecLine(nil) = %v", err)
	}
	if line, err := ExecLine([]string{"/bin/x-y", "-v", "@a", "+b"}); err != nil || line != "/bin/x-y -v @a +b" {
		t.Errorf("ExecLine = %q, %v", line, err)
	}
}

// The commands a unit's comments suggest quote the name for a shell.
func TestShellWord(t *testing.T) {
	for in, want := range map[string]string{
		"agent": "agent", "-x": "-x", "a b": "'a b'", "x; rm -rf ~": "'x; rm -rf ~'", "it's": `'it'\''s'`, "": "''", "$HOME": "'$HOME'",
	} {
		if got := shellWord(in); got != want {
			t.Errorf("shellWord(%q) = %s, want %s", in, got, want)
		}
	}
}

// The commands in a unit's comments keep a hostile name one quoted word.
func TestUnitCommentCommandsQuoteTheName(t *testing.T) {
	t.Chdir(t.TempDir())
	t.Setenv("HOME", t.TempDir())
	const name = "x; touch pwned"
	for kind, want := range map[string][]string{
		"systemd": {"#          supervise status --state-dir '" + filepath.Join(SystemStateBase, name) + "'"},
		"launchd": {"  Inspect: supervise status -name 'x; touch pwned'", "bootout gui/$(id -u)/'dev.supervise.x; touch pwned'"},
	} {
		var out, errb bytes.Buffer
		if code := Command([]string{kind, "--name", name, "--", "sh"}, &out, &errb); code != 0 {
			t.Fatalf("%s: exit %d: %s", kind, code, errb.String())
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w+"\n") {
				t.Errorf("%s: no line ending %q in\n%s", kind, w, out.String())
			}
		}
	}
}
