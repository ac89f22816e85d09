package runflags

import (
	"os"
	"path/filepath"
	"strings"
)

// DefaultName is the name --name defaults to for argv, which names the
// state dir: the base name of the program, or, when the program is an
// interpreter running a script file, the script's base name without its
// extension. `supervise -- python3 agent.py` is named agent, not python3:
// two Python agents would otherwise share one state dir, and the second
// would exit 3.
//
// The interpreters: python, python3, python3.X (any version suffix), pypy,
// node, nodejs, bun, deno, ruby, perl, php, sh, bash, dash, zsh, ksh, and
// uv; for bun, deno and uv the script follows their `run` word (`uv run
// agent.py`). The script must be the first argument (no options before it)
// and a regular file. Launchers that run a package by name (uvx, npx,
// pipx) keep their own name: give those --name.
func DefaultName(argv []string) string {
	base := filepath.Base(argv[0])
	args := argv[1:]
	runWord, ok := interpreter(base)
	if !ok {
		return base
	}
	if runWord && len(args) > 0 && args[0] == "run" {
		args = args[1:]
	}
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		return base
	}
	if st, err := os.Stat(args[0]); err != nil || !st.Mode().IsRegular() {
		return base
	}
	script := filepath.Base(args[0])
	if name := strings.TrimSuffix(script, filepath.Ext(script)); name != "" && name != "." && name != ".." {
		return name
	}
	return base
}

// interpreter reports whether the program named base runs a script given
// as its first argument, and whether a `run` word may come before it.
func interpreter(base string) (runWord, ok bool) {
	switch strings.TrimRight(base, "0123456789.") {
	case "python", "pypy", "node", "nodejs", "ruby", "perl", "php", "sh", "bash", "dash", "zsh", "ksh":
		return false, true
	case "bun", "deno", "uv":
		return true, true
	}
	return false, false
}
