package machine

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
)

// Golden effect traces: the hash of every effect the simulation's fixed
// seeds emit, step for step, is committed in testdata/golden-traces.txt. A
// change that only moves code (the machine's parts, seams and layout)
// keeps every line byte for byte; a change of behaviour changes some, and
// its commit says which rule changed and why. SUPERVISE_GOLDEN_UPDATE=1
// writes the file anew.
const (
	goldenSeeds = 10
	goldenSteps = 100_000
	goldenFile  = "testdata/golden-traces.txt"
)

func TestGoldenTraces(t *testing.T) {
	if raceEnabled {
		t.Skip("the traces are the plain run's (the race detector changes nothing of them, at ten times the time)")
	}
	defer debug.SetGCPercent(debug.SetGCPercent(800))
	lines := make([]string, goldenSeeds)
	var wg sync.WaitGroup
	for i := range goldenSeeds {
		wg.Go(func() {
			seed := uint64(1000 + i)
			sim := newSim(t, seed, true)
			sim.run(goldenSteps)
			lines[i] = fmt.Sprintf("seed %d steps %d effects %016x", seed, sim.steps, sim.sum.Sum64())
		})
	}
	wg.Wait()
	got := strings.Join(lines, "\n") + "\n"
	path := filepath.FromSlash(goldenFile)
	if os.Getenv("SUPERVISE_GOLDEN_UPDATE") == "1" {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (SUPERVISE_GOLDEN_UPDATE=1 writes it)", err)
	}
	if got != string(want) {
		t.Fatalf("the effects of the fixed seeds changed: a move changed behaviour, or a rule changed (say which in the commit, and write the file anew with SUPERVISE_GOLDEN_UPDATE=1)\ngot:\n%swant:\n%s", got, want)
	}
}
