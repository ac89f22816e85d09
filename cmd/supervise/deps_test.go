package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"strings"
	"testing"
)

// module is this module's path.
const module = "github.com/supervise-dev/supervise"

// listed is the part of `go list -json` these tests read.
type listed struct {
	ImportPath   string
	Imports      []string
	TestImports  []string
	XTestImports []string
}

// goList lists the packages under internal/.
func goList(t *testing.T) []listed {
	t.Helper()
	cmd := exec.Command("go", "list", "-json", "./internal/...")
	cmd.Dir = repoRoot
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	var pkgs []listed
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listed
		err := dec.Decode(&p)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("go list output: %v", err)
		}
		pkgs = append(pkgs, p)
	}
	return pkgs
}

// internal/ holds leaves only: no package under it imports, in its code or
// its tests, a package of this module outside internal/. A command's code
// lives beside its command (cmd/supervise/internal, cmd/internal), and a
// package that needs the supervisor sits above it, never below in
// internal/, so no arrow runs back up. There is no list of exceptions.
func TestInternalImports(t *testing.T) {
	t.Parallel()
	pkgs := goList(t)
	if len(pkgs) == 0 {
		t.Fatal("go list lists no package under internal/")
	}
	for _, p := range pkgs {
		if !strings.HasPrefix(p.ImportPath, module+"/internal/") {
			t.Errorf("go list ./internal/... lists %s", p.ImportPath)
			continue
		}
		for _, imports := range [][]string{p.Imports, p.TestImports, p.XTestImports} {
			for _, imp := range imports {
				if (imp == module || strings.HasPrefix(imp, module+"/")) && !strings.HasPrefix(imp, module+"/internal/") {
					t.Errorf("%s imports %s: internal/ holds leaves only; move the package beside its user or above what it imports", p.ImportPath, imp)
				}
			}
		}
	}
}
