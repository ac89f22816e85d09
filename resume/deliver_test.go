package resume

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/supervise-dev/supervise/record"
)

func TestResumeFile(t *testing.T) {
	older := record.Session{ID: "b", Turn: "t2", Phase: "tool", Tool: "bash", Detail: "npm test", Prompt: "p",
		Effects: []string{"write:a.go"},
		Resume:  &record.Resume{Attempt: 1, Reason: "r", Message: "m", Since: now.Add(-time.Minute)}}
	newer := record.Session{ID: "a", Resume: &record.Resume{Attempt: 2, Message: "m2", Since: now}}
	items := Items([]record.Session{newer, older})
	path := filepath.Join(t.TempDir(), "resume.json")
	if err := WriteFile(path, items); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(path)
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode %v", fi.Mode())
	}
	raw, _ := os.ReadFile(path)
	var got []map[string]any
	if err := json.Unmarshal(raw, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{"session": "b", "turn": "t2", "attempt": 1.0, "interrupted_run": 0.0, "reason": "r", "phase": "tool",
		"tool": "bash", "detail": "npm test", "prompt": "p", "message": "m", "effects": []any{"write:a.go"}}
	if len(got) != 2 || !reflect.DeepEqual(got[0], want) || got[1]["session"] != "a" || !reflect.DeepEqual(got[1]["effects"], []any{}) {
		t.Errorf("resume file, oldest first, contract fields:\n%s", raw)
	}
}

func TestExecTemplate(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []string
	}{
		{"claude -p -r {session} {message}", []string{"claude", "-p", "-r", "S 1", "hello world; rm -rf /"}},
		{"codex exec resume {session} {message}", []string{"codex", "exec", "resume", "S 1", "hello world; rm -rf /"}},
		{`agent --msg="{message}" '--id={session}' x\ y`, []string{"agent", "--msg=hello world; rm -rf /", "--id=S 1", "x y"}},
		{"gemini -r {session} -p {message} --turn {turn}", []string{"gemini", "-r", "S 1", "-p", "hello world; rm -rf /", "--turn", "T"}},
	} {
		tpl, err := ParseTemplate(tc.in)
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		got, err := ExecArgv(tpl, Item{Session: "S 1", Turn: "T", Message: "hello world; rm -rf /"})
		if err != nil {
			t.Fatalf("%q: %v", tc.in, err)
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%q: got %q, want %q", tc.in, got, tc.want)
		}
	}
	for _, bad := range []string{"", "   ", "claude --continue", "claude -r 'unterminated {session}", `x "{session}`} {
		if _, err := ParseTemplate(bad); !errors.Is(err, ErrTemplate) {
			t.Errorf("%q: err %v, want ErrTemplate", bad, err)
		}
	}
	// A placeholder typo is refused by name: it would reach the model as
	// literal text. Braces that are no placeholder are the agent's own.
	for tpl, name := range map[string]string{
		"claude -r {session} {mesage}":         "{mesage}",
		"claude -r {sesion} {message}":         "{sesion}",
		"agent --id=x{session_id} {session}":   "{session_id}",
		`agent -r {session} "go on: {prompt}"`: "{prompt}",
	} {
		_, err := ParseTemplate(tpl)
		if !errors.Is(err, ErrTemplate) || !strings.Contains(err.Error(), "unknown placeholder "+name+" ") {
			t.Errorf("%q: err %v, want ErrTemplate naming %s", tpl, err, name)
		}
	}
	for _, ok := range []string{`agent -r {session} --config {"a":1} {} {X} {message}`, "agent {session} {turn}{"} {
		if _, err := ParseTemplate(ok); err != nil {
			t.Errorf("%q: %v, want it kept", ok, err)
		}
	}
	// --resume-message's templates: the same, with their own placeholders.
	for tpl, name := range map[string]string{"go on: {promt}": "{promt}", "{session} {message}": "{message}"} {
		if err := CheckMessage(tpl); err == nil || !strings.Contains(err.Error(), "unknown placeholder "+name+" ") {
			t.Errorf("message %q: err %v, want it naming %s", tpl, err, name)
		}
	}
	for _, ok := range []string{"", "plain text", "{session} {turn} {how} {phase} {tool} {detail} {prompt} {effects}", `reply {"ok":true} { x }`} {
		if err := CheckMessage(ok); err != nil {
			t.Errorf("message %q: %v, want it kept", ok, err)
		}
	}
}

// ReadFile reads what WriteFile wrote; no path or no file is nothing owed;
// a damaged file is an error naming it.
func TestReadFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "resume.json")
	for _, p := range []string{"", path} {
		if items, err := ReadFile(p); err != nil || items != nil {
			t.Errorf("ReadFile(%q) = %v, %v; want nothing owed", p, items, err)
		}
	}
	want := []Item{{Session: "s1", Turn: "t1", Attempt: 2, InterruptedRun: 7, Reason: "signal", Message: "go on"}}
	if err := WriteFile(path, want); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadFile(path); err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("ReadFile = %+v, %v; want %+v", got, err, want)
	}
	os.WriteFile(path, []byte("[{"), 0o600)
	if _, err := ReadFile(path); err == nil || !strings.Contains(err.Error(), path) {
		t.Errorf("damaged file: %v, want an error naming %s", err, path)
	}
}
