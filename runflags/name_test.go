package runflags

import (
	"os"
	"path/filepath"
	"testing"
)

// The default --name: the program's base name, or the script's for an
// interpreter running a script file.
func TestDefaultName(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, f := range []string{"agent.py", "bot.js", "run-me", "tool.tar.gz", ".py"} {
		if err := os.WriteFile(f, nil, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir("pkg", 0o700); err != nil {
		t.Fatal(err)
	}
	abs := filepath.Join(dir, "agent.py")
	for _, c := range []struct {
		argv []string
		want string
	}{
		{[]string{"claude", "-p", "fix"}, "claude"},
		{[]string{"/usr/local/bin/my-agent"}, "my-agent"},
		{[]string{"python3", "agent.py"}, "agent"},
		{[]string{"python", "agent.py", "loop"}, "agent"},
		{[]string{"/usr/bin/python3.12", abs}, "agent"},
		{[]string{"pypy3", "agent.py"}, "agent"},
		{[]string{"node", "bot.js"}, "bot"},
		{[]string{"bash", "run-me"}, "run-me"},
		{[]string{"sh", "tool.tar.gz"}, "tool.tar"},
		{[]string{"uv", "run", "agent.py"}, "agent"},
		{[]string{"deno", "run", "bot.js"}, "bot"},
		{[]string{"bun", "bot.js"}, "bot"},
		// Not a script file: the interpreter's own name.
		{[]string{"python3"}, "python3"},
		{[]string{"python3", "-u", "agent.py"}, "python3"},
		{[]string{"python3", "-m", "agent"}, "python3"},
		{[]string{"python3", "missing.py"}, "python3"},
		{[]string{"python3", "pkg"}, "python3"},
		{[]string{"sh", "-c", "exit 0"}, "sh"},
		{[]string{"python3", ".py"}, "python3"},
		{[]string{"node", "run", "bot.js"}, "node"},
		// Launchers that run a package by name, and other programs: their own name.
		{[]string{"uvx", "agent.py"}, "uvx"},
		{[]string{"npx", "bot.js"}, "npx"},
		{[]string{"claude", "agent.py"}, "claude"},
	} {
		if got := DefaultName(c.argv); got != c.want {
			t.Errorf("DefaultName(%q) = %q, want %q", c.argv, got, c.want)
		}
	}
}
