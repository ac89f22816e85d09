package child

import (
	"errors"
	"testing"
)

// table is a fake process table: pid -> (ppid, start).
type table map[int][2]uint64

func (tb table) read(pid int) (int, uint64, error) {
	e, ok := tb[pid]
	if !ok {
		return 0, 0, errors.New("gone")
	}
	return int(e[0]), e[1], nil
}

// The walk's verdicts on fixed tables. 100 is supervise, 200 the agent;
// 1 is init, 50 a person's shell.
func TestAncestry(t *testing.T) {
	tb := table{
		1:   {0, 1},
		50:  {1, 5},  // a person's shell
		51:  {50, 6}, // supervise resume from it
		99:  {50, 7}, // the shell that started supervise
		100: {99, 8}, // supervise
		200: {100, 9},
		201: {200, 10},
		202: {201, 11},
		300: {100, 12}, // an orphan of the tree, re-parented to supervise
		301: {300, 13},
		400: {400, 14}, // a cycle no kernel makes
	}
	for _, c := range []struct {
		pid   int
		start uint64
		root  int
		want  Origin
	}{
		{202, 0, 200, OriginTree},
		{202, 11, 200, OriginTree},
		{201, 0, 0, OriginTree},   // no agent running: still under supervise
		{301, 0, 200, OriginTree}, // the orphan's child, env or not
		{200, 0, 200, OriginTree},
		{100, 0, 200, OriginTree}, // supervise itself
		{51, 0, 200, OriginOutside},
		{99, 0, 200, OriginOutside}, // an ancestor of supervise is not its tree
		{1, 0, 200, OriginOutside},
		{777, 0, 200, OriginUnknown}, // gone
		{202, 3, 200, OriginUnknown}, // another process has its pid now
		{400, 0, 200, OriginUnknown}, // no end
	} {
		if got, why := ancestry(c.pid, c.start, c.root, 100, tb.read); got != c.want {
			t.Errorf("ancestry(%d, start %d, root %d) = %v (%s), want %v", c.pid, c.start, c.root, got, why, c.want)
		}
	}
}

// changing is a table whose process 201 exits (its child 202 re-parented to
// supervise, 100) the first time 201 is read, and whose pid 201 is then
// taken by an outside process (parent 50): a walk that trusted 202's
// parent as read first would go up the wrong chain and say "outside".
type changing struct {
	tb     table
	exited bool
}

func (c *changing) read(pid int) (int, uint64, error) {
	if pid == 201 && !c.exited {
		c.exited = true
		c.tb[202] = [2]uint64{100, 11}
		c.tb[201] = [2]uint64{50, 99}
		return 50, 99, nil
	}
	return c.tb.read(pid)
}

func TestAncestryParentExitsDuringWalk(t *testing.T) {
	c := &changing{tb: table{1: {0, 1}, 50: {1, 5}, 99: {50, 7}, 100: {99, 8}, 200: {100, 9}, 201: {200, 10}, 202: {201, 11}}}
	if got, why := ancestry(202, 11, 200, 100, c.read); got != OriginTree {
		t.Fatalf("ancestry = %v (%s), want tree: the re-parenting must be seen", got, why)
	}
}

// A chain that changes at every read is never trusted.
func TestAncestryKeepsChanging(t *testing.T) {
	n := 0
	read := func(pid int) (int, uint64, error) {
		switch pid {
		case 10:
			n++
			return 20 + n%2, 1, nil // its parent flips between reads
		case 20, 21:
			return 1, 2, nil
		case 1:
			return 0, 1, nil
		}
		return 0, 0, errors.New("gone")
	}
	if got, _ := ancestry(10, 0, 200, 100, read); got != OriginUnknown {
		t.Fatalf("ancestry of a chain that keeps changing = %v, want unknown", got)
	}
}
