package unit_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/cmd/supervise/internal/unit"
	"github.com/supervise-dev/supervise/internal/exitcode"
)

const (
	exitOK    = exitcode.OK
	exitUsage = exitcode.Usage
)

// call runs `supervise unit ARGS...` (args[0] is "unit") in-process and
// returns its exit status and output.
func call(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	if len(args) == 0 || args[0] != "unit" {
		t.Fatalf("call %q: not a unit command", args)
	}
	var out, errb bytes.Buffer
	code := unit.Command(args[1:], &out, &errb)
	return code, out.String(), errb.String()
}

// trickyArgs are agent arguments every unit must carry through unchanged.
var trickyArgs = []string{
	"a b", "100%", "%n", "$HOME", "${X}", "$$", `"q"`, "it's", `back\slash`, "tab\tx",
	"new\nline", ";", "", "é", "--f=v", "bell\a", "<x> & y", "a--b", "]]>",
}

// unitGen runs `supervise unit ARGS...` in-process and wants exit 0.
func unitGen(t *testing.T, args ...string) string {
	t.Helper()
	code, out, errs := call(t, append([]string{"unit"}, args...)...)
	if code != exitOK {
		t.Fatalf("unit %q: exit %d, stderr %q", args, code, errs)
	}
	return out
}

// setting returns the value of every KEY= line of a unit.
func setting(unit, key string) []string {
	var vals []string
	for _, l := range strings.Split(unit, "\n") {
		if v, ok := strings.CutPrefix(l, key+"="); ok {
			vals = append(vals, v)
		}
	}
	return vals
}

func lookSh(t *testing.T) string {
	t.Helper()
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skipf("no sh in PATH: %v", err)
	}
	sh, _ = filepath.Abs(sh)
	return sh
}

func TestUnitSystemdSystem(t *testing.T) {
	// The generating shell's SUPERVISE_* variables must not leak into the unit.
	t.Setenv("SUPERVISE_STOP_TIMEOUT", "99s")
	t.Setenv("SUPERVISE_RESTART", "never")
	t.Setenv("SUPERVISE_STATE_DIR", "/nowhere")
	t.Setenv("PATH", "/usr/local/bin:relative:/usr/bin:/bin:/usr/bin")
	sh := lookSh(t)
	exe, _ := os.Executable()
	out := unitGen(t, "systemd", "--stop-timeout", "25s", "--resume=off", "--", "sh", "-c", "exit 0")

	want := map[string]string{
		"Type": "notify", "NotifyAccess": "main", "WatchdogSec": "30s", "KillMode": "mixed", "Delegate": "yes",
		"TimeoutStopSec": "35s", "Restart": "on-failure", "RestartPreventExitStatus": "3",
		"RestartSec": "1s", "OOMPolicy": "continue", "WantedBy": "multi-user.target",
		"StateDirectory": "supervise/sh", "StateDirectoryMode": "0700",
		"Environment": "PATH=/usr/local/bin:/usr/bin:/bin",
		"ExecStart":   unit.SystemdWord(exe, false) + " run --name=sh --state-dir=/var/lib/supervise/sh --resume=off --stop-timeout=25s -- " + sh + " -c " + `"exit 0"`,
	}
	for k, v := range want {
		if got := setting(out, k); len(got) != 1 || got[0] != v {
			t.Errorf("%s= %q, want exactly %q", k, got, v)
		}
	}
	wd, _ := os.Getwd()
	if got := setting(out, "WorkingDirectory"); len(got) != 1 || got[0] != strings.ReplaceAll(wd, "%", "%%") {
		t.Errorf("WorkingDirectory= %q, want %q", got, wd)
	}
	for _, bad := range []string{"99s", "--restart", "/nowhere", "relative", "\nUser="} {
		if strings.Contains(out, bad) {
			t.Errorf("unit contains %q:\n%s", bad, out)
		}
	}
	if unit.IsTempBuild(exe) && !strings.Contains(out, "# NOTE: "+exe+" looks like a temporary go run") {
		t.Errorf("no go run warning for %s:\n%s", exe, out)
	}
}

func TestUnitSystemdUser(t *testing.T) {
	out := unitGen(t, "systemd", "--user-unit", "--", "sh")
	exec := setting(out, "ExecStart")
	if len(exec) != 1 || !strings.Contains(exec[0], " run --name=sh -- ") {
		t.Errorf("ExecStart= %q: want --name=sh and the default state dir", exec)
	}
	if got := setting(out, "WantedBy"); len(got) != 1 || got[0] != "default.target" {
		t.Errorf("WantedBy= %q, want default.target", got)
	}
	for _, key := range []string{"StateDirectory", "#User", "Wants", "After"} {
		if got := setting(out, key); got != nil {
			t.Errorf("user unit has %s=%q", key, got)
		}
	}
}

// An explicit --state-dir is passed on as an absolute path, and systemd
// then creates no StateDirectory=.
func TestUnitSystemdStateDir(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, user := range []bool{false, true} {
		args := []string{"systemd", "--state-dir", "state", "--", "sh"}
		if user {
			args = append([]string{"systemd", "--user-unit"}, args[1:]...)
		}
		out := unitGen(t, args...)
		exec := setting(out, "ExecStart")
		if len(exec) != 1 || !strings.Contains(exec[0], " run --name=state --state-dir="+filepath.Join(dir, "state")+" -- ") {
			t.Errorf("user=%v: ExecStart= %q: want --name and the absolute --state-dir", user, exec)
		}
		if strings.Contains(exec[0], "--user-unit") {
			t.Errorf("user=%v: --user passed on to supervise run: %s", user, exec[0])
		}
		if got := setting(out, "StateDirectory"); got != nil {
			t.Errorf("user=%v: StateDirectory=%q with an explicit --state-dir", user, got)
		}
		verifyUnit(t, out, user)
	}
}

// systemdAnalyze finds a systemd-analyze that can verify units here, or
// skips: a trivial unit must verify, so a failure is never blamed on the
// environment. The verify function it returns keeps the two streams apart:
// systemd-analyze writes the unit dump to stdout, which is fully buffered
// in a pipe, and its log to stderr, unbuffered; merged into one pipe, the
// log lines written between two 4 KiB flushes of stdout land inside the
// dump, wherever the flush happens to cut it (the place moves with the
// lengths of the paths in the dump: checkout, temp dirs, PATH).
func systemdAnalyze(t *testing.T, dir string, user bool) func(file string, debug bool) (stdout, stderr string, err error) {
	t.Helper()
	bin, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed (apt-get install systemd): cannot verify the unit")
	}
	rt := filepath.Join(dir, "runtime")
	if err := os.MkdirAll(rt, 0o700); err != nil {
		t.Fatal(err)
	}
	verify := func(file string, debug bool) (string, string, error) {
		args := []string{"verify", "--man=no", file}
		if user {
			args = append([]string{"--user-unit"}, args...)
		}
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "XDG_RUNTIME_DIR="+rt, "SYSTEMD_LOG_LEVEL=info", "SYSTEMD_LOG_COLOR=0")
		if debug {
			cmd.Env = append(cmd.Env, "SYSTEMD_LOG_LEVEL=debug")
		}
		var stdout, stderr bytes.Buffer
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		return stdout.String(), stderr.String(), err
	}
	control := filepath.Join(dir, "control.service")
	if err := os.WriteFile(control, []byte("[Service]\nExecStart="+lookSh(t)+" -c true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, errs, err := verify(control, false); err != nil {
		t.Skipf("systemd-analyze cannot verify even a trivial unit here (%v): %s%s", err, out, errs)
	}
	return verify
}

// verifyUnit runs systemd-analyze verify on a unit and fails on any
// complaint about it, except the keys that systemd before 254 does not
// know and ignores.
func verifyUnit(t *testing.T, unit string, user bool) (dump string) {
	t.Helper()
	dir := t.TempDir()
	verify := systemdAnalyze(t, dir, user)
	file := filepath.Join(dir, "supervise-test.service")
	if err := os.WriteFile(file, []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	out, errs, err := verify(file, false)
	if err != nil {
		t.Fatalf("systemd-analyze verify: %v\n%s%s\nunit:\n%s", err, out, errs, unit)
	}
	newer := regexp.MustCompile(`Unknown key '?(RestartSteps|RestartMaxDelaySec)'?`)
	for _, l := range strings.Split(out+"\n"+errs, "\n") {
		if strings.Contains(l, "supervise-test.service") && !newer.MatchString(l) {
			t.Errorf("systemd-analyze verify: %s", l)
		}
	}
	dump, _, _ = verify(file, true) // the dump alone: stdout
	return dump
}

// dumpedCommand parses the ExecStart "Command Line:" that systemd-analyze
// dumps at debug level: words, double-quoted with backslash escapes when
// needed. ok is false when this systemd dumps no command line.
func dumpedCommand(t *testing.T, dump string) (argv []string, ok bool) {
	t.Helper()
	i := strings.Index(dump, "-> ExecStart:")
	if i < 0 {
		return nil, false
	}
	rest, found := strings.CutPrefix(strings.TrimLeft(dump[i+len("-> ExecStart:"):], " \t\n"), "Command Line: ")
	if !found {
		return nil, false
	}
	line, _, _ := strings.Cut(rest, "\n")
	for line = strings.TrimLeft(line, " "); line != ""; line = strings.TrimLeft(line, " ") {
		if line[0] != '"' {
			w, r, _ := strings.Cut(line, " ")
			argv, line = append(argv, w), r
			continue
		}
		var w strings.Builder
		j := 1
		for ; j < len(line) && line[j] != '"'; j++ {
			if line[j] != '\\' {
				w.WriteByte(line[j])
				continue
			}
			j++
			switch c := line[j]; c {
			case 'x':
				n, err := strconv.ParseUint(line[j+1:j+3], 16, 8)
				if err != nil {
					t.Fatalf("bad escape in %q", line)
				}
				w.WriteByte(byte(n))
				j += 2
			default:
				if k := strings.IndexByte("abfnrtv", c); k >= 0 {
					w.WriteByte("\a\b\f\n\r\t\v"[k])
				} else {
					w.WriteByte(c)
				}
			}
		}
		if j >= len(line) {
			t.Fatalf("unterminated quote in dumped command line %q", line)
		}
		argv, line = append(argv, w.String()), line[j+1:]
	}
	return argv, true
}

// The generated unit passes systemd-analyze verify, and systemd reads
// back exactly the argv supervise meant, for a system and a user unit.
func TestUnitSystemdVerify(t *testing.T) {
	sh := lookSh(t)
	exe, _ := os.Executable()
	for _, user := range []bool{false, true} {
		t.Run(fmt.Sprintf("user=%v", user), func(t *testing.T) {
			args := []string{"systemd", "--name", "my agent", "--stop-timeout=1m30s", "--resume-message", "go on with {session}: {how}"}
			if user {
				args = append(args, "--user-unit")
			}
			args = append(append(args, "--", "sh"), trickyArgs...)
			dump := verifyUnit(t, unitGen(t, args...), user)
			got, ok := dumpedCommand(t, dump)
			if !ok {
				t.Skip("this systemd-analyze dumps no command line: argv not compared")
			}
			want := []string{exe, "run", "--name=my agent"}
			if !user {
				want = append(want, "--state-dir=/var/lib/supervise/my agent")
			}
			want = append(want, "--resume-message=go on with {session}: {how}", "--stop-timeout=1m30s", "--", sh)
			for _, a := range trickyArgs {
				// systemd keeps $$ until it substitutes variables at exec time.
				want = append(want, strings.ReplaceAll(a, "$", "$$"))
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("systemd reads ExecStart as\n%q\nwant\n%q", got, want)
			}
		})
	}
}

// plistValue is a decoded plist value: string, int64, bool, []any or
// map[string]any.
type plistValue = any

// decodePlist parses an XML property list strictly: well-formed XML, a
// plist root holding one value, and only the value elements it knows.
func decodePlist(data []byte) (plistValue, error) {
	d := xml.NewDecoder(bytes.NewReader(data))
	d.Strict = true
	next := func() (xml.Token, error) {
		for {
			tok, err := d.Token()
			if err != nil {
				return nil, err
			}
			switch tk := tok.(type) {
			case xml.Comment, xml.ProcInst, xml.Directive:
				continue
			case xml.CharData:
				if len(bytes.TrimSpace(tk)) == 0 {
					continue
				}
			}
			return xml.CopyToken(tok), nil
		}
	}
	text := func(name string) (string, error) {
		var b strings.Builder
		for {
			tok, err := d.Token()
			if err != nil {
				return "", err
			}
			switch tk := tok.(type) {
			case xml.CharData:
				b.Write(tk)
			case xml.EndElement:
				return b.String(), nil
			default:
				return "", fmt.Errorf("unexpected %T in <%s>", tok, name)
			}
		}
	}
	var value func(tok xml.Token) (plistValue, error)
	value = func(tok xml.Token) (plistValue, error) {
		se, ok := tok.(xml.StartElement)
		if !ok {
			return nil, fmt.Errorf("want a value, got %#v", tok)
		}
		switch se.Name.Local {
		case "string":
			return text("string")
		case "integer":
			s, err := text("integer")
			if err != nil {
				return nil, err
			}
			return strconv.ParseInt(s, 10, 64)
		case "true", "false":
			if _, err := text(se.Name.Local); err != nil {
				return nil, err
			}
			return se.Name.Local == "true", nil
		case "array":
			list := []any{}
			for {
				tok, err := next()
				if err != nil {
					return nil, err
				}
				if _, end := tok.(xml.EndElement); end {
					return list, nil
				}
				v, err := value(tok)
				if err != nil {
					return nil, err
				}
				list = append(list, v)
			}
		case "dict":
			dict := map[string]any{}
			for {
				tok, err := next()
				if err != nil {
					return nil, err
				}
				if _, end := tok.(xml.EndElement); end {
					return dict, nil
				}
				if se, ok := tok.(xml.StartElement); !ok || se.Name.Local != "key" {
					return nil, fmt.Errorf("want <key> in <dict>, got %#v", tok)
				}
				k, err := text("key")
				if err != nil {
					return nil, err
				}
				tok, err = next()
				if err != nil {
					return nil, err
				}
				if dict[k], err = value(tok); err != nil {
					return nil, fmt.Errorf("%s: %w", k, err)
				}
			}
		}
		return nil, fmt.Errorf("unknown plist element <%s>", se.Name.Local)
	}
	tok, err := next()
	if err != nil {
		return nil, err
	}
	if se, ok := tok.(xml.StartElement); !ok || se.Name.Local != "plist" {
		return nil, fmt.Errorf("root is %#v, want <plist>", tok)
	}
	if tok, err = next(); err != nil {
		return nil, err
	}
	v, err := value(tok)
	if err != nil {
		return nil, err
	}
	if tok, err = next(); err != nil {
		return nil, err
	}
	if _, ok := tok.(xml.EndElement); !ok {
		return nil, fmt.Errorf("more than one value in <plist>: %#v", tok)
	}
	if tok, err := next(); !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("content after </plist>: %#v %v", tok, err)
	}
	return v, nil
}

// pythonPlist loads a plist with Python's plistlib and returns it as JSON
// values, or ok false when there is no python3.
func pythonPlist(t *testing.T, data []byte) (v map[string]any, ok bool) {
	t.Helper()
	py, err := exec.LookPath("python3")
	if err != nil {
		return nil, false
	}
	cmd := exec.Command(py, "-c", "import json, plistlib, sys; json.dump(plistlib.loads(sys.stdin.buffer.read()), sys.stdout)")
	cmd.Stdin = bytes.NewReader(data)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("plistlib rejects the plist: %v\n%s", err, stderr.String())
	}
	if err := json.Unmarshal(out, &v); err != nil {
		t.Fatal(err)
	}
	return v, true
}

func TestUnitLaunchdPlist(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("PATH", "/usr/local/bin:/usr/bin:/bin")
	sh := lookSh(t)
	exe, _ := os.Executable()
	// A plist cannot carry \a (XML 1.0 has no such character): refused.
	if code, _, errs := call(t, "unit", "launchd", "--", "sh", "bell\a"); code != exitUsage || !strings.Contains(errs, "cannot be written") {
		t.Errorf("a control character in a plist: exit %d, stderr %q; want 2", code, errs)
	}
	agentArgs := []string{"sh"}
	for _, a := range trickyArgs {
		if a != "bell\a" {
			agentArgs = append(agentArgs, a)
		}
	}
	out := unitGen(t, append([]string{"launchd", "--name", "a--b & <c>", "--stop-timeout", "45s", "--"}, agentArgs...)...)
	args := append([]string{exe, "run", "--name=a--b & <c>", "--stop-timeout=45s", "--", sh}, agentArgs[1:]...)
	anyArgs := make([]any, len(args))
	for i, a := range args {
		anyArgs[i] = a
	}
	wd, _ := os.Getwd()
	logFile := filepath.Join(home, "Library", "Logs", "dev.supervise.a--b____c_.log")
	want := map[string]any{
		"Label":                "dev.supervise.a--b & <c>",
		"ProgramArguments":     anyArgs,
		"WorkingDirectory":     wd,
		"EnvironmentVariables": map[string]any{"PATH": "/usr/local/bin:/usr/bin:/bin"},
		"RunAtLoad":            true,
		"KeepAlive":            map[string]any{"SuccessfulExit": false},
		"ThrottleInterval":     int64(10),
		"ProcessType":          "Standard",
		"ExitTimeOut":          int64(55),
		"StandardOutPath":      logFile,
		"StandardErrorPath":    logFile,
	}
	got, err := decodePlist([]byte(out))
	if err != nil {
		t.Fatalf("plist does not parse: %v\n%s", err, out)
	}
	if !reflect.DeepEqual(got, any(want)) {
		t.Errorf("plist is\n%#v\nwant\n%#v", got, want)
	}
	if !strings.HasPrefix(out, `<?xml version="1.0" encoding="UTF-8"?>`+"\n"+`<!DOCTYPE plist PUBLIC "-//Apple//DTD PLIST 1.0//EN"`) {
		t.Errorf("plist header missing:\n%s", out)
	}
	if py, ok := pythonPlist(t, []byte(out)); ok {
		if want["ThrottleInterval"], want["ExitTimeOut"] = float64(10), float64(55); !reflect.DeepEqual(py, want) {
			t.Errorf("plistlib reads\n%#v\nwant\n%#v", py, want)
		}
	} else {
		t.Log("no python3: plist checked with encoding/xml only")
	}
}

// TestUnitLaunchdExpectations reads the plist as launchd would (plistlib
// when python3 is here, encoding/xml otherwise) and checks the keys whose
// values decide how launchd keeps supervise alive, for several stop
// timeouts: restart on any exit but 0 (KeepAlive SuccessfulExit=false, not
// Crashed, which a Go crash or SIGKILL never triggers), launchd's SIGKILL
// only after supervise's own stop (ExitTimeOut above --stop-timeout), a
// restart floor of at least launchd's own 10 s, no Background throttling,
// and the log in a file directly in ~/Library/Logs (launchd creates a
// missing file, not a missing directory).
func TestUnitLaunchdExpectations(t *testing.T) {
	home := t.TempDir()
	t.Setenv("HOME", home)
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, stop := range []time.Duration{time.Second, 30 * time.Second, 90*time.Second + 500*time.Millisecond} {
		out := unitGen(t, "launchd", "--name", "agent", "--stop-timeout", stop.String(), "--", "sh")
		d, ok := pythonPlist(t, []byte(out))
		if !ok {
			v, err := decodePlist([]byte(out))
			if err != nil {
				t.Fatalf("plist does not parse: %v\n%s", err, out)
			}
			d, _ = v.(map[string]any)
		}
		num := func(k string) float64 {
			switch v := d[k].(type) {
			case int64:
				return float64(v)
			case float64:
				return v
			}
			t.Errorf("stop %v: %s is %#v, want a number", stop, k, d[k])
			return 0
		}
		if ka, _ := d["KeepAlive"].(map[string]any); len(ka) != 1 || ka["SuccessfulExit"] != false {
			t.Errorf("stop %v: KeepAlive is %#v, want exactly {SuccessfulExit: false}", stop, d["KeepAlive"])
		}
		if d["RunAtLoad"] != true {
			t.Errorf("stop %v: RunAtLoad is %#v, want true", stop, d["RunAtLoad"])
		}
		if got := num("ExitTimeOut"); got < stop.Seconds()+unit.StopMargin.Seconds() {
			t.Errorf("stop %v: ExitTimeOut %v, want at least the stop timeout plus %v", stop, got, unit.StopMargin)
		}
		if got := num("ThrottleInterval"); got < 10 {
			t.Errorf("stop %v: ThrottleInterval %v, want at least launchd's 10", stop, got)
		}
		if d["ProcessType"] != "Standard" {
			t.Errorf("stop %v: ProcessType %#v, want Standard", stop, d["ProcessType"])
		}
		logs := filepath.Join(home, "Library", "Logs")
		for _, k := range []string{"StandardOutPath", "StandardErrorPath"} {
			if p, _ := d[k].(string); filepath.Dir(p) != logs || !strings.HasSuffix(p, ".log") {
				t.Errorf("stop %v: %s is %#v, want a .log file directly in %s", stop, k, d[k], logs)
			}
		}
		if args, _ := d["ProgramArguments"].([]any); len(args) < 2 || args[1] != "run" {
			t.Errorf("stop %v: ProgramArguments %#v, want supervise run ...", stop, d["ProgramArguments"])
		}
	}
}

func TestUnitUsageErrors(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"unit"}, "which kind"},
		{[]string{"unit", "--user-unit"}, "which kind"},
		{[]string{"unit", "upstart", "--", "sh"}, `unknown kind "upstart"`},
		{[]string{"unit", "systemd"}, "no agent"},
		{[]string{"unit", "systemd", "--", "no-such-agent-xyzzy"}, "no-such-agent-xyzzy"},
		{[]string{"unit", "systemd", "--restart", "sometimes", "--", "sh"}, "restart mode must be"},
		{[]string{"unit", "launchd", "--stop-signal", "SIGNOPE", "--", "sh"}, "unknown signal"},
		{[]string{"unit", "systemd", "--name", "a\nb", "--", "sh"}, "control characters"},
		{[]string{"unit", "systemd", "--bogus", "--", "sh"}, "bogus"},
		{[]string{"unit", "systemd", "--resume-exec", "sh -c {session}", "--", "sh"}, "would run the task again"},
		{[]string{"unit", "launchd", "--resume-exec", "sh -c {session}", "--", "sh"}, "--resume-exec is task mode"},
	} {
		code, out, errs := call(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) || out != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want 2 and %q", tc.args, code, out, errs, tc.want)
		}
	}
	for _, args := range [][]string{{"unit", "--help"}, {"unit", "systemd", "-h"}} {
		code, out, _ := call(t, args...)
		if code != exitOK || !strings.Contains(out, "--stop-timeout") || !strings.Contains(out, "--user-unit") {
			t.Errorf("%q: exit %d, help %q", args, code, out)
		}
	}
}

// readExample reads a file under examples/.
func readExample(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "..", "..", "examples", path))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// The shipped examples stay valid and in step with the generator.
func TestUnitExamples(t *testing.T) {
	t.Run("systemd", func(t *testing.T) {
		example := readExample(t, "systemd/agent.service")
		gen := unitGen(t, "systemd", "--name=agent", "--stop-timeout=30s", "--", "sh")
		sc := bufio.NewScanner(strings.NewReader(gen))
		for sc.Scan() {
			l := sc.Text()
			key, _, ok := strings.Cut(l, "=")
			if !ok || strings.HasPrefix(l, "#") {
				continue
			}
			switch key {
			case "ExecStart", "WorkingDirectory", "Environment", "Description":
				continue
			}
			if !strings.Contains("\n"+example+"\n", "\n"+l+"\n") {
				t.Errorf("examples/systemd/agent.service lacks %q, which supervise unit systemd prints", l)
			}
		}
		// Point the example at binaries that exist here, then verify it.
		exe, _ := os.Executable()
		unit := strings.ReplaceAll(example, "/usr/local/bin/supervise", exe)
		unit = strings.ReplaceAll(unit, "/usr/local/bin/agent", lookSh(t))
		verifyUnit(t, unit, false)
	})
	t.Run("launchd", func(t *testing.T) {
		v, err := decodePlist([]byte(readExample(t, "launchd/dev.supervise.agent.plist")))
		if err != nil {
			t.Fatalf("examples/launchd/dev.supervise.agent.plist: %v", err)
		}
		d, _ := v.(map[string]any)
		if !reflect.DeepEqual(d["KeepAlive"], map[string]any{"SuccessfulExit": false}) || d["ExitTimeOut"] != int64(40) ||
			d["ThrottleInterval"] != int64(10) || d["Label"] != "dev.supervise.agent" || d["ProcessType"] != "Standard" {
			t.Errorf("example plist has KeepAlive %v, ExitTimeOut %v, ThrottleInterval %v, Label %v, ProcessType %v",
				d["KeepAlive"], d["ExitTimeOut"], d["ThrottleInterval"], d["Label"], d["ProcessType"])
		}
		if args, _ := d["ProgramArguments"].([]any); !reflect.DeepEqual(args[:4], []any{"/usr/local/bin/supervise", "run", "--name=agent", "--stop-timeout=30s"}) {
			t.Errorf("example plist runs %q", args)
		}
	})
	t.Run("kubernetes", func(t *testing.T) {
		y := readExample(t, "kubernetes/statefulset.yaml")
		grace := regexp.MustCompile(`(?m)^\s+terminationGracePeriodSeconds: (\d+)`).FindStringSubmatch(y)
		stop := regexp.MustCompile(`--stop-timeout=(\d+)s`).FindStringSubmatch(y)
		if grace == nil || stop == nil {
			t.Fatal("statefulset.yaml lacks terminationGracePeriodSeconds or --stop-timeout=Ns")
		}
		g, _ := strconv.Atoi(grace[1])
		s, _ := strconv.Atoi(stop[1])
		if g < s+int(unit.StopMargin.Seconds()) {
			t.Errorf("terminationGracePeriodSeconds %d leaves supervise less than %v beyond --stop-timeout=%ds", g, unit.StopMargin, s)
		}
		for _, want := range []string{"kind: StatefulSet", "volumeClaimTemplates:", "mountPath: /var/lib/supervise",
			"--state-dir=/var/lib/supervise/", "path: /healthz", "--metrics-addr=:9090", `command: ["/usr/local/bin/supervise"]`} {
			if !strings.Contains(y, want) {
				t.Errorf("statefulset.yaml lacks %q", want)
			}
		}
	})
}
