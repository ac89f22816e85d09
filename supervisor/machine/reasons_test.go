package machine

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/supervise-dev/supervise/record"
)

// Every reason the machine names a death with is a row of the reason
// table, and classify's verdict on dirtiness is the row's.
func TestReasonsFromTheTable(t *testing.T) {
	files, _ := filepath.Glob("*.go")
	used := map[string]bool{}
	re := regexp.MustCompile(`record\.(Reason[A-Za-z]+)`)
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		b, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			used[m[1]] = true
		}
	}
	values := map[string]record.Reason{"ReasonExit": record.ReasonExit, "ReasonSignal": record.ReasonSignal,
		"ReasonExecFailed": record.ReasonExecFailed, "ReasonStopped": record.ReasonStopped,
		"ReasonWatchdog": record.ReasonWatchdog, "ReasonMemory": record.ReasonMemory,
		"ReasonTurnOpen": record.ReasonTurnOpen, "ReasonTurnTimeout": record.ReasonTurnTimeout,
		"ReasonOOM": record.ReasonOOM, "ReasonStreamStall": record.ReasonStreamStall,
		"ReasonTokenBudget": record.ReasonTokenBudget, "ReasonLimit": record.ReasonLimit,
		"ReasonStartTimeout": record.ReasonStartTimeout, "ReasonSilence": record.ReasonSilence, "ReasonRunning": record.ReasonRunning}
	for name := range used {
		v, ok := values[name]
		if !ok {
			t.Errorf("the machine uses %s, unknown to this test: add it", name)
			continue
		}
		if _, ok := v.Row(); !ok && v != record.ReasonRunning {
			t.Errorf("the machine names deaths %q, which the reason table lacks", v)
		}
	}
	if len(used) < 8 {
		t.Fatalf("found only %v", used)
	}
	// Dirtiness by the table: each way a run ends.
	for _, c := range []struct {
		name string
		acts []act
	}{
		{"exit 0", []act{exited(0)}}, {"exit 1", []act{exited(1)}}, {"signal", []act{killed(9)}},
		{"turn open", []act{begin("s1", "t1"), exited(0)}}, {"stop", []act{stopAsked, exited(0)}},
		{"watchdog", []act{watchdogTrigger, killed(6)}}, {"memory", []act{overMemory, killed(15)}},
		{"exec failed", []act{execFailed}},
	} {
		r := newRig(t, testConfig())
		play(r, c.acts)
		run := r.m.LastExit
		row, ok := run.Reason.Row()
		if !ok || row.DirtyFor(run.ExitCode) != run.Dirty {
			t.Errorf("%s: reason %q dirty %v, the table says %+v", c.name, run.Reason, run.Dirty, row)
		}
	}
}
