package exitcode

import (
	"slices"
	"strconv"
	"strings"
	"testing"
)

// Every constant has its row, and the help fits a terminal.
func TestTable(t *testing.T) {
	var codes []string
	for _, r := range Table() {
		codes = append(codes, r.Code)
	}
	for _, c := range []int{OK, Internal, Usage, Locked, GaveUp, Parked} {
		if !slices.Contains(codes, strconv.Itoa(c)) {
			t.Errorf("exit code %d has no row in the table %v", c, codes)
		}
	}
	if !slices.Contains(codes, strconv.Itoa(CannotExec)+","+strconv.Itoa(NotFound)) {
		t.Errorf("126,127 missing from %v", codes)
	}
	if !slices.Contains(codes, strconv.Itoa(SignalBase)+"+S") {
		t.Errorf("128+S missing from %v", codes)
	}
	for _, line := range strings.Split(Help(), "\n") {
		if len(line) > 79 {
			t.Errorf("help line longer than 79 columns: %q", line)
		}
	}
}
