package runflags

import (
	"flag"
	"regexp"
	"strings"
	"testing"
)

// Every run flag is printed exactly once, as --flag, in one of the groups;
// every flag a group names exists; the first group starts with the flags
// most people need.
func TestHelpPrintsEveryFlagOnce(t *testing.T) {
	fs := flag.NewFlagSet("supervise run", flag.ContinueOnError)
	var f Flags
	f.Register(fs)
	var b strings.Builder
	PrintHelp(&b, fs)
	out := b.String()
	n := 0
	fs.VisitAll(func(fl *flag.Flag) {
		n++
		re := regexp.MustCompile(`(?m)^  --` + regexp.QuoteMeta(fl.Name) + `( |$)`)
		if got := len(re.FindAllString(out, -1)); got != 1 {
			t.Errorf("--%s is printed %d times, want once", fl.Name, got)
		}
	})
	if got := len(regexp.MustCompile(`(?m)^  --`).FindAllString(out, -1)); got != n {
		t.Errorf("%d flag lines for %d flags:\n%s", got, n, out)
	}
	if regexp.MustCompile(`(?m)^\s+-[a-z]`).MatchString(out) {
		t.Errorf("a flag is written with one dash:\n%s", out)
	}
	seen := map[string]string{}
	for _, g := range helpGroups {
		for _, name := range g.flags {
			if fs.Lookup(name) == nil {
				t.Errorf("group %q names --%s, which does not exist", g.title, name)
			}
			if other, ok := seen[name]; ok {
				t.Errorf("--%s is in the groups %q and %q", name, other, g.title)
			}
			seen[name] = g.title
		}
	}
	// Every flag is placed in a group on purpose, not left to the last.
	fs.VisitAll(func(fl *flag.Flag) {
		if seen[fl.Name] == "" {
			t.Errorf("--%s is in no group of helpGroups", fl.Name)
		}
	})
	var order []string
	for _, m := range regexp.MustCompile(`(?m)^  --([a-z-]+)`).FindAllStringSubmatch(out, 5) {
		order = append(order, m[1])
	}
	if strings.Join(order, " ") != "name resume-exec restart metrics-addr on-event" {
		t.Errorf("the first flags are %v", order)
	}
	for _, title := range []string{"Most people need:", "Resumes and parks:", "Deadlines and hangs:", "Limits and budgets:",
		"The model-API proxy:", "Crash loops:", "Service and other:"} {
		if !strings.Contains(out, "\n"+title+"\n") {
			t.Errorf("no group %q", title)
		}
	}
	// The mode --resume-exec picks is said.
	for _, want := range []string{"task mode", "interactive", "carries a task prompt", "carries none"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	for _, l := range strings.Split(out, "\n") {
		if len(l) > helpWidth && !strings.HasPrefix(l, "  --") {
			t.Errorf("line of %d columns: %q", len(l), l)
		}
	}
}
