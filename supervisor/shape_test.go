package supervisor

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The loop's shape, held so that it cannot grow back unnoticed: the runner
// has at most 25 fields, no function under supervisor/ is longer than 80
// lines, and cmd/supervise stays wiring (at most 450 lines).
func TestShape(t *testing.T) {
	fset := token.NewFileSet()
	for _, dir := range []string{".", "machine"} {
		files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
		for _, name := range files {
			if strings.HasSuffix(name, "_test.go") {
				continue
			}
			f, err := parser.ParseFile(fset, name, nil, 0)
			if err != nil {
				t.Fatal(err)
			}
			ast.Inspect(f, func(n ast.Node) bool {
				switch x := n.(type) {
				case *ast.FuncDecl:
					if l := fset.Position(x.End()).Line - fset.Position(x.Pos()).Line + 1; l > 80 {
						t.Errorf("%s: %s is %d lines, more than 80", name, x.Name.Name, l)
					}
				case *ast.TypeSpec:
					if st, ok := x.Type.(*ast.StructType); ok && x.Name.Name == "Supervisor" && dir == "." {
						n := 0
						for _, fl := range st.Fields.List {
							n += max(len(fl.Names), 1)
						}
						if n > 25 {
							t.Errorf("Supervisor has %d fields, more than 25", n)
						}
					}
				}
				return true
			})
		}
	}
	cmd, _ := filepath.Glob("../cmd/supervise/*.go")
	lines := 0
	for _, name := range cmd {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines += strings.Count(string(b), "\n")
	}
	if lines == 0 || lines > 450 {
		t.Errorf("cmd/supervise has %d lines of code, want 1..450: it is wiring", lines)
	}
}
