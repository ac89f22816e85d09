package machine

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// The machine is parts that own their fields, not one type that grows a
// method for every feature: no type of the package has more than 40
// methods.
func TestNoTypeOverFortyMethods(t *testing.T) {
	fset := token.NewFileSet()
	names, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	methods := map[string]int{}
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range f.Decls {
			if fn, ok := d.(*ast.FuncDecl); ok && fn.Recv != nil && len(fn.Recv.List) == 1 {
				typ := fn.Recv.List[0].Type
				if st, ok := typ.(*ast.StarExpr); ok {
					typ = st.X
				}
				if id, ok := typ.(*ast.Ident); ok {
					methods[id.Name]++
				}
			}
		}
	}
	if methods["Machine"] == 0 {
		t.Fatalf("found no methods of Machine: %v", methods)
	}
	for typ, n := range methods {
		if n > 40 {
			t.Errorf("%s has %d methods, more than 40: give a part its own", typ, n)
		}
	}
}
