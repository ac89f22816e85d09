package record

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// Every Reason constant that ends a run is one row of the table, once;
// the reservations starting and running are not ends.
func TestReasonTableComplete(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "record.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	ast.Inspect(f, func(n ast.Node) bool {
		if v, ok := n.(*ast.ValueSpec); ok {
			for i, id := range v.Names {
				if strings.HasPrefix(id.Name, "Reason") && i < len(v.Values) {
					if lit, ok := v.Values[i].(*ast.BasicLit); ok {
						names = append(names, strings.Trim(lit.Value, `"`))
					}
				}
			}
		}
		return true
	})
	if len(names) < 10 {
		t.Fatalf("found %d reason constants: %q", len(names), names)
	}
	seen := map[Reason]int{}
	for _, r := range Reasons() {
		seen[r.Name]++
		if r.Help == "" {
			t.Errorf("reason %s has no help", r.Name)
		}
		if r.Dirty != NeverDirty && r.Advice == "" {
			t.Errorf("dirty reason %s has no advice for the breaker's park", r.Name)
		}
		if r.How == "" && r.Said == "" {
			t.Errorf("reason %s has no words", r.Name)
		}
	}
	for _, name := range names {
		n := Reason(name)
		switch {
		case n == ReasonStarting || n == ReasonRunning:
			if seen[n] != 0 {
				t.Errorf("%s is a reservation, not an end, yet in the table", n)
			}
		case seen[n] != 1:
			t.Errorf("reason %s is %d times in the table, want once", n, seen[n])
		}
	}
	if len(seen) != len(names)-2 {
		t.Errorf("the table has %d reasons, the constants %d ends", len(seen), len(names)-2)
	}
}

// The README's reasons and parks tables are the table's (print the
// wanted ones with -v when this fails).
func TestReadmeTables(t *testing.T) {
	b, err := os.ReadFile("../docs/reference.md")
	if err != nil {
		t.Fatal(err)
	}
	readme := string(b)
	for name, want := range map[string]string{"reasons": ReasonsMarkdown(), "parks": ParksMarkdown()} {
		if !strings.Contains(readme, want) {
			t.Errorf("README.md lacks the %s table as the table makes it; want:\n%s", name, want)
		}
	}
}

// Only a breaker's park lifts for a changed agent; any other kind, known
// or not (a damaged record), is lifted by a person alone.
func TestParkKinds(t *testing.T) {
	for _, by := range []string{ParkedByBudget, ParkedByWait, ParkedByStale, ParkedByUntaken, ParkedByLost,
		ParkedByTemplate, "damaged", "", "anything"} {
		if LiftedByFingerprint(by) {
			t.Errorf("a changed agent lifts a %q park", by)
		}
		if !strings.HasPrefix(LookupPark(by).Lift, "a person") {
			t.Errorf("%q: lifted by %q", by, LookupPark(by).Lift)
		}
	}
	if !LiftedByFingerprint(ParkedByBreaker) {
		t.Error("a changed agent does not lift the breaker's park")
	}
}

// Token sums saturate.
func TestAddTokens(t *testing.T) {
	const maxInt = 1<<63 - 1
	for _, c := range []struct{ a, b, want int64 }{
		{1, 2, 3}, {1 << 62, 1 << 62, maxInt}, {maxInt, 1, maxInt}, {maxInt, maxInt, maxInt}, {5, -3, 5}, {0, -1 << 62, 0},
	} {
		if got := AddTokens(c.a, c.b); got != c.want {
			t.Errorf("AddTokens(%d, %d) = %d, want %d", c.a, c.b, got, c.want)
		}
	}
	if got := (Tokens{Input: maxInt, Output: maxInt, Lifted: 10}).Spent(); got != maxInt-10 {
		t.Errorf("Spent = %d", got)
	}
}
