package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"slices"
	"strings"
	"testing"
)

// module is this module's path.
const module = "github.com/supervise-dev/supervise"

// leaves are the internal packages the public packages import: they import
// no package of this module, so nothing public depends on supervise's
// internals through them, and no import cycle can pass through them.
var leaves = []string{"internal/statedir", "internal/failpoint", "internal/exitcode"}

// supervisorUsers are the packages under internal/ allowed to import
// supervisor, each because it uses supervisor's API, not a constant or a
// file name (those live in internal/statedir).
var supervisorUsers = map[string]string{
	"internal/runflags": "builds a supervisor.Config (and its Deadlines) from the run flags",
	"internal/observe":  "carries supervisor.Event to the chaos harness as a supervisor.Observer",
	"internal/demo":     "reads supervisor.Status through supervisor.FetchStatus to narrate the demo",
	"internal/statecmd": "status, resume and ls: supervisor.LoadStatusView, WriteStatus, FetchStatusView and ManualResume",
}

// listed is the part of `go list -json` these tests read.
type listed struct {
	ImportPath   string
	Deps         []string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// goList lists the packages under internal/ and their dependencies.
func goList(t *testing.T) map[string]listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-deps", "-json", "./internal/...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	pkgs := map[string]listed{}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs[strings.TrimPrefix(p.ImportPath, module+"/")] = p
	}
	return pkgs
}

// The leaves import no package of this module, directly or not; no package
// under internal/ imports supervisor (in its code or its tests) but those
// that use its API.
func TestInternalImports(t *testing.T) {
	t.Parallel()
	pkgs := goList(t)
	for _, leaf := range leaves {
		p, ok := pkgs[leaf]
		if !ok {
			t.Errorf("go list does not list %s", leaf)
			continue
		}
		for _, dep := range p.Deps {
			if dep == module || strings.HasPrefix(dep, module+"/") {
				t.Errorf("%s is a leaf but depends on %s", leaf, dep)
			}
		}
	}
	supervisor := module + "/supervisor"
	for name, p := range pkgs {
		if !strings.HasPrefix(name, "internal/") || supervisorUsers[name] != "" {
			continue
		}
		if slices.Contains(p.Imports, supervisor) || slices.Contains(p.TestImports, supervisor) || slices.Contains(p.XTestImports, supervisor) {
			t.Errorf("%s imports supervisor; take file names from internal/statedir, or add it to supervisorUsers saying which API it needs", name)
		}
	}
	for name := range supervisorUsers {
		if _, ok := pkgs[name]; !ok {
			t.Errorf("supervisorUsers names %s, which go list does not list", name)
		}
	}
}
