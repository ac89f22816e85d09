package main

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/runflags"
)

// call runs the command in-process and returns its exit code and output.
func call(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	devnull, _ := os.Open(os.DevNull)
	defer devnull.Close()
	code := run(context.Background(), args, devnull, &out, &errb)
	return code, out.String(), errb.String()
}

func TestHelpDocumentsExitCodes(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"help"}, {"run", "-h"}} {
		code, out, _ := call(t, args...)
		if code != 0 {
			t.Errorf("%v: exit %d", args, code)
		}
		for _, want := range []string{"Exit codes:", "126,127", "--stop-timeout", "SUPERVISE_STOP_TIMEOUT", "supervise status"} {
			if args[0] != "help" && !strings.Contains(out, want) {
				t.Errorf("%v: help lacks %q", args, want)
			}
		}
	}
}

func TestUsageErrors(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	for _, tc := range []struct {
		args []string
		env  map[string]string
		want string
	}{
		{[]string{"frobnicate"}, nil, `unknown command "frobnicate"`},
		{[]string{"run"}, nil, "no agent to run"},
		{[]string{"--restart", "sometimes", "--", "true"}, nil, "restart mode must be"},
		{[]string{"--", "true"}, map[string]string{"SUPERVISE_RESTART": "sometimes"}, "SUPERVISE_RESTART"},
		{[]string{"--", "true"}, map[string]string{"SUPERVISE_STOP_TIMEOUT": "soon"}, "SUPERVISE_STOP_TIMEOUT"},
		{[]string{"--stop-signal", "SIGNOPE", "--", "true"}, nil, "unknown signal"},
		{[]string{"--name", "a/b", "--", "true"}, nil, "no slashes"},
		{[]string{"--log-format", "xml", "--", "true"}, nil, "--log-format"},
		{[]string{"--foreground", "maybe", "--", "true"}, nil, "--foreground"},
		{[]string{"--metrics-addr", "nope", "--", "true"}, nil, "--metrics-addr nope: want HOST:PORT"},
		{[]string{"--stop-timeout", "10", "--", "true"}, nil, "--stop-timeout 10: a duration needs a unit, e.g. 10s or 500ms"},
		{[]string{"notify", "turn-begin", "--session", "s", "--timeout", "10"}, nil, "--timeout 10: a duration needs a unit, e.g. 10s or 500ms"},
		{[]string{"--api-proxy", "maybe", "--", "true"}, nil, "--api-proxy must be on or off"},
		{[]string{"--max-tokens", "10", "--", "true"}, nil, "--max-tokens needs --api-proxy on"},
		{[]string{"--api-proxy", "on", "--", "true"}, map[string]string{"ANTHROPIC_BASE_URL": "not a url"}, "ANTHROPIC_BASE_URL is not an absolute http(s) URL"},
		{[]string{"status", "extra"}, nil, "unexpected argument"},
		// Usage errors found after the flags are parsed print the usage.
		{[]string{"resume"}, nil, "Usage: supervise resume"},
		{[]string{"resume", "a", "b"}, nil, "Usage: supervise resume"},
	} {
		for k, v := range tc.env {
			t.Setenv(k, v)
		}
		code, _, errs := call(t, tc.args...)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("%v %v: exit %d, stderr %q; want 2 and %q", tc.args, tc.env, code, errs, tc.want)
		}
		for k := range tc.env {
			os.Unsetenv(k)
		}
	}
}

// Every flag reads SUPERVISE_<FLAG>, and the command line wins.
func TestEnvironmentSetsFlags(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SUPERVISE_STATE_DIR", filepath.Join(dir, "from-env"))
	t.Setenv("SUPERVISE_RESTART", "never")
	t.Setenv("SUPERVISE_LOG_LEVEL", "error")
	code, _, errs := call(t, "--", "sh", "-c", "exit 7")
	if code != 7 {
		t.Fatalf("SUPERVISE_RESTART=never: exit %d, want the child's 7 (stderr %q)", code, errs)
	}
	if _, err := os.Stat(filepath.Join(dir, "from-env", "journal.db")); err != nil {
		t.Errorf("SUPERVISE_STATE_DIR not used: %v", err)
	}
	// The command line beats the environment.
	other := filepath.Join(dir, "from-flag")
	code, _, _ = call(t, "--state-dir", other, "--restart", "on-failure", "--", "sh", "-c", "exit 0")
	if code != 0 {
		t.Errorf("exit %d", code)
	}
	if _, err := os.Stat(filepath.Join(other, "journal.db")); err != nil {
		t.Errorf("--state-dir on the command line not used: %v", err)
	}
}

// -h prints the usage once, on stdout; a bad flag is an error on stderr.
func TestHelpOnceOnStdout(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"run", "-h"}, {"status", "-h"}, {"resume", "-h"}, {"notify", "-h"}, {"demo", "-h"}, {"chaos", "-h"}} {
		code, out, errs := call(t, args...)
		if code != 0 || out == "" || errs != "" {
			t.Errorf("%v: exit %d, %d bytes on stdout, stderr %q", args, code, len(out), errs)
		}
		if strings.Count(out, "Usage") > 1 && args[0] != "--help" && args[0] != "run" {
			t.Errorf("%v: usage printed more than once", args)
		}
	}
	code, out, errs := call(t, "--bogus")
	if code != 2 || out != "" || !strings.Contains(errs, "flag provided but not defined") || !strings.Contains(errs, "-h' for help") {
		t.Errorf("bad flag: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// The reference's configuration table (docs/reference.md) documents every run flag with its
// environment variable.
func TestReadmeDocumentsEveryFlag(t *testing.T) {
	readme, err := os.ReadFile("../../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	var f runflags.Flags
	f.Register(fs)
	fs.VisitAll(func(fl *flag.Flag) {
		if !strings.Contains(string(readme), "| `--"+fl.Name) || !strings.Contains(string(readme), "`"+runflags.EnvName(fl.Name)+"`") {
			t.Errorf("docs/reference.md's configuration table lacks --%s / %s", fl.Name, runflags.EnvName(fl.Name))
		}
	})
}
