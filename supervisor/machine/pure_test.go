package machine

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/record"
	"github.com/supervise-dev/supervise/resume"
)

// Step is pure: the package imports nothing that does I/O, reads no clock,
// sleeps not, and starts no goroutine. Checked on the source, so a change
// that breaks it fails here, not in review.
func TestPure(t *testing.T) {
	forbidden := []string{"os", "net", "syscall", "golang.org/x/sys", "go.etcd.io/bbolt", "log/slog", "log",
		"math/rand", "math/rand/v2", "crypto/rand", "os/exec", "io/fs"}
	clock := map[string]bool{"Now": true, "Sleep": true, "After": true, "AfterFunc": true, "NewTimer": true,
		"NewTicker": true, "Tick": true, "Since": true, "Until": true}
	files, _ := filepath.Glob("*.go")
	fset := token.NewFileSet()
	checked := 0
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		for _, imp := range f.Imports {
			path := strings.Trim(imp.Path.Value, `"`)
			for _, bad := range forbidden {
				if path == bad || strings.HasPrefix(path, bad+"/") {
					t.Errorf("%s imports %s", name, path)
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			switch x := n.(type) {
			case *ast.GoStmt:
				t.Errorf("%s: a goroutine at %s", name, fset.Position(x.Pos()))
			case *ast.SelectorExpr:
				if id, ok := x.X.(*ast.Ident); ok && id.Name == "time" && clock[x.Sel.Name] {
					t.Errorf("%s: time.%s at %s reads or waits on the clock", name, x.Sel.Name, fset.Position(x.Pos()))
				}
			}
			return true
		})
	}
	if checked == 0 {
		t.Fatal("no source file checked")
	}
}

// A death that decides for thousands of sessions logs a bounded number of
// lines: maxDecisionLines one by one, then one summary with the counts.
func TestLogDecisionsBounded(t *testing.T) {
	m := New(testConfig())
	var decs []resume.Decision
	for i := range 3000 {
		decs = append(decs, resume.Decision{Action: resume.Park, Session: record.Session{ID: fmt.Sprintf("s%d", i), State: record.Parked}})
	}
	var o out
	logDecisions(&o, decs, m.Hold(), m.Config.StateDir)
	lines := all[Log](o.fx)
	if len(lines) != maxDecisionLines+1 {
		t.Fatalf("%d log lines for 3000 parks, want %d", len(lines), maxDecisionLines+1)
	}
	last := fmt.Sprint(lines[len(lines)-1].Args...)
	if !strings.Contains(last, "parked2980") || !strings.Contains(last, "logged20") {
		t.Errorf("summary line = %v", lines[len(lines)-1])
	}
}

// The machine's whole import closure, not only its direct imports, is free
// of the journal's storage (bbolt), the network and the packages that hold
// them: the record types come from the leaves record and marker.
func TestPureClosure(t *testing.T) {
	gobin, err := exec.LookPath("go")
	if err != nil {
		gobin = filepath.Join(os.Getenv("GOROOT"), "bin", "go") // go test sets GOROOT for its tests
	}
	out, err := exec.Command(gobin, "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	forbidden := []string{"go.etcd.io/bbolt", "net", "github.com/supervise-dev/supervise/journal",
		"github.com/supervise-dev/supervise/notify", "github.com/supervise-dev/supervise/apiproxy", "log/slog", "os/exec"}
	deps := strings.Fields(string(out))
	if len(deps) < 5 {
		t.Fatalf("go list -deps listed %d packages: %q", len(deps), deps)
	}
	for _, dep := range deps {
		for _, bad := range forbidden {
			if dep == bad || strings.HasPrefix(dep, bad+"/") {
				t.Errorf("the machine's import closure holds %s", dep)
			}
		}
	}
}

// The mode is one value: TaskConfig.On is read in Config.Mode alone,
// here and in the runner; every rule asks Machine.Policy.
func TestTaskPolicyOnePlace(t *testing.T) {
	for _, glob := range []string{"*.go", "../*.go"} {
		files, _ := filepath.Glob(glob)
		fset := token.NewFileSet()
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			for _, d := range f.Decls {
				fn, ok := d.(*ast.FuncDecl)
				ast.Inspect(d, func(n ast.Node) bool {
					if sel, ok2 := n.(*ast.SelectorExpr); ok2 && sel.Sel.Name == "On" {
						if inner, ok3 := sel.X.(*ast.SelectorExpr); ok3 && inner.Sel.Name == "Task" &&
							!(ok && fn.Name.Name == "Mode" && name == "policy.go") {
							t.Errorf("%s reads Task.On at %s: ask Machine.Policy", name, fset.Position(sel.Pos()))
						}
					}
					return true
				})
			}
		}
	}
}
