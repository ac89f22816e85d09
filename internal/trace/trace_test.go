package trace

import (
	"bufio"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func TestOffByDefault(t *testing.T) {
	t.Setenv(EnvVar, "")
	r := FromEnv()
	if r != nil {
		t.Fatalf("FromEnv with %s empty = %v, want nil", EnvVar, r)
	}
	r.Mark(DeathSeen) // a nil Recorder does nothing and does not panic
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMarksWrittenAtStarted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "trace")
	t.Setenv(EnvVar, path)
	r := FromEnv()
	if r == nil {
		t.Fatal("FromEnv returned nil with the variable set")
	}
	before := Now()
	for s := Reaped; s < Started; s++ {
		r.Mark(s)
	}
	r.Mark(RunStart)
	r.Mark(BootDone)
	r.Mark(MainStart)
	r.Mark(JournalOpened)
	r.Mark(ForkCall)
	if fi, err := os.Stat(path); err != nil || fi.Size() != 0 {
		t.Fatalf("trace file before Started: %v, %v; want it empty (marks are buffered)", fi, err)
	}
	r.Mark(Started)
	r.Mark(DeathSeen) // buffered until Close
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var steps []Step
	last := before
	for sc := bufio.NewScanner(f); sc.Scan(); {
		name, ns, ok := strings.Cut(sc.Text(), " ")
		s, known := Parse(name)
		v, err := strconv.ParseInt(ns, 10, 64)
		if !ok || !known || err != nil {
			t.Fatalf("line %q: want STEP NANOSECONDS", sc.Text())
		}
		if v < last {
			t.Fatalf("line %q goes back in time (previous %d)", sc.Text(), last)
		}
		last = v
		steps = append(steps, s)
	}
	if len(steps) != int(numSteps)+1 || steps[0] != Reaped || steps[numSteps-2] != ForkCall || steps[numSteps-1] != Started || steps[numSteps] != DeathSeen {
		t.Fatalf("steps %v, want every step in order and the mark after Started", steps)
	}
}

func TestNames(t *testing.T) {
	for s := Reaped; s < numSteps; s++ {
		if got, ok := Parse(s.String()); !ok || got != s {
			t.Errorf("Parse(%q) = %v, %v", s.String(), got, ok)
		}
	}
	if _, ok := Parse("nope"); ok {
		t.Error("Parse accepted an unknown name")
	}
}
